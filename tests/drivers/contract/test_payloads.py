"""The payload store (issue 46, SPEC CRYPT-07) on both drivers: the sealed payloads of a place
walked in key order a batch at a time, and a batch swapped with each row fenced on the value it
read, so a payload rewritten meanwhile is left as it is."""

from __future__ import annotations

import uuid

from django_xjobs import crypt
from django_xjobs.drivers.contract import StoredPayload
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.test_crypt import EMAIL, NEW, keys


def test_crypt_07_the_walk_reads_sealed_payloads_in_key_order_a_batch_at_a_time(harness):
    with keys(NEW):
        sealed = sorted(jobs.clear_input.enqueue(token=f"c{i}").id for i in range(2))
        ids = sorted(
            jobs.sealed.enqueue(token=f"t-{uuid.uuid4()}", email=EMAIL).id for _ in range(3)
        )
    store = harness.driver.jobs().payloads()
    first = store.sealed("job_input", after=None, limit=2)
    rest = store.sealed("job_input", after=(first[-1].row, first[-1].name), limit=2)
    assert [p.row for p in first + rest] == ids  # the clear inputs are not walked
    assert all(crypt.is_sealed(p.value) for p in first + rest)
    assert store.sealed("job_input", after=(rest[-1].row, ""), limit=2) == []
    assert store.sealed("job_result", after=None, limit=10) == []
    assert not set(sealed) & set(ids)


def test_crypt_07_a_swap_is_fenced_on_the_value_it_read(harness):
    with keys(NEW):
        job_id = jobs.sealed.enqueue(token=f"t-{uuid.uuid4()}", email=EMAIL).id
        run_until_idle()
    store = harness.driver.jobs().payloads()
    [read] = store.sealed("job_input", after=None, limit=10)
    [step] = [p for p in store.sealed("step_output", after=None, limit=10) if p.name == "lookup"]
    stale = StoredPayload("job_input", job_id, "", {crypt.MARK: "not-what-is-stored"})
    new = {crypt.MARK: "swapped"}
    assert store.reseal([(stale, new)]) == 0  # rewritten meanwhile: left as it is
    assert harness.row(job_id).input == read.value
    assert store.reseal([(read, new), (step, new)]) == 2
    assert harness.row(job_id).input == new
    assert {s.name: s.output for s in harness.driver.steps().list(step.row)}["lookup"] == new
