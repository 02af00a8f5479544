"""The driver contract, settle (SPEC DRV-04 table, DRV-05 gaps closed): every settle fenced on
the running state and the lease token, and the attempt given back. Every case runs on the memory driver AND the PostgreSQL driver through the ``harness``
fixture, asserting the same answers."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from django.db import connection

from django_xjobs.drivers.contract import (
    Complete,
    Finish,
    RetryAt,
    Shed,
    SuspendUntil,
)
from django_xjobs.drivers.memory import MemoryDriver
from tests import jobs
from tests.drivers.contract.support import claim

# --- (d) every settle fenced on running and the lease token --------------------------------


def test_ack_stores_the_result_and_clears_the_claim(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    assert harness.driver.runs().complete([Complete(job.id, job.lease_token, '{"x": [1, 2]}')]) == {
        job.id
    }
    row = harness.row(job.id)
    assert (row.state, row.result) == ("done", {"x": [1, 2]})
    assert (row.claimed_by, row.visible_at, row.lease_token) == (None, None, None)


def test_ack_settles_a_batch_each_on_its_own_token(harness):
    for i in range(3):
        jobs.ok.enqueue(n=i)
    a, b, c = claim(harness.driver)
    stale = Complete(c.id, uuid.uuid4())
    done = harness.driver.runs().complete(
        [Complete(a.id, a.lease_token), Complete(b.id, b.lease_token), stale]
    )
    assert done == {a.id, b.id}
    assert harness.row(c.id).state == "running"


def test_state_01_q_01_a_lapsed_claim_cannot_settle_its_successors_run(harness):
    jobs.ok.enqueue(n=1)
    [old] = claim(harness.driver, vis=5)
    harness.advance(5)
    [new] = claim(harness.driver, worker="w2")
    assert harness.driver.runs().complete([Complete(old.id, old.lease_token)]) == set()
    assert not harness.driver.runs().finish(Finish(old.id, old.lease_token, "dead", error="x"))
    row = harness.row(new.id)
    assert (row.state, row.lease_token, row.last_error) == ("running", new.lease_token, None)
    assert harness.driver.runs().complete([Complete(new.id, new.lease_token)]) == {new.id}


def test_state_01_se_03_settling_a_row_that_is_not_running_changes_nothing(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    assert harness.driver.runs().retry(RetryAt(job.id, job.lease_token, delay=60, error="first"))
    before = harness.row(job.id)
    assert harness.driver.runs().complete([Complete(job.id, job.lease_token)]) == set()
    assert not harness.driver.runs().retry(RetryAt(job.id, job.lease_token, error="second"))
    after = harness.row(job.id)
    assert (after.state, after.attempt, after.last_error) == (before.state, before.attempt, "first")


def test_drv_01_a_retry_goes_back_to_ready_after_the_delay(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    assert harness.driver.runs().retry(
        RetryAt(job.id, job.lease_token, delay=60, error="ValueError: x")
    )
    row = harness.row(job.id)
    assert (row.state, row.attempt, row.last_error) == ("ready", 1, "ValueError: x")
    assert (row.claimed_by, row.visible_at, row.lease_token) == (None, None, None)
    assert claim(harness.driver) == []
    harness.advance(60)
    [again] = claim(harness.driver)
    assert again.attempt == 2


@pytest.mark.parametrize("final", ["dead", "failed"])
def test_drv_01_a_finish_with_a_final_state_ends_the_job(harness, final):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    finish = Finish(job.id, job.lease_token, final, error="E", stop_reason="terminal")
    assert harness.driver.runs().finish(finish)
    row = harness.row(job.id)
    assert (row.state, row.stop_reason, row.last_error) == (final, "terminal", "E")


def test_state_02_a_retry_without_error_keeps_the_previous_one(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    harness.driver.runs().retry(RetryAt(job.id, job.lease_token, error="first"))
    [job] = claim(harness.driver)
    harness.driver.runs().suspend(SuspendUntil(job.id, job.lease_token))
    assert harness.row(job.id).last_error == "first"


# --- (e) the attempt given back, floored at 0 -----------------------------------------------


def test_state_03_a_parked_retry_gives_the_attempt_back(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    assert harness.driver.runs().suspend(SuspendUntil(job.id, job.lease_token, delay=5))
    row = harness.row(job.id)
    assert (row.state, row.attempt) == ("suspended", 0)
    harness.advance(5)
    [again] = claim(harness.driver)
    assert again.attempt == 1


def set_attempt(harness, job_id, attempt):
    """Write a held row's attempt as SQL or an older release could (SPEC STATE-03's attempt 0)."""
    if isinstance(harness.driver, MemoryDriver):
        rows = harness.driver._rows
        rows[job_id] = replace(rows[job_id], attempt=attempt)
        return
    with connection.cursor() as cursor:
        cursor.execute("UPDATE x_jobs SET attempt = %s WHERE id = %s", [attempt, job_id])


@pytest.mark.parametrize(
    "give_back",
    [
        lambda job: SuspendUntil(job.id, job.lease_token, delay=5),
        lambda job: RetryAt(job.id, job.lease_token, delay=5, counts_as_attempt=False),
        lambda job: Shed(job.id, job.lease_token, delay=5),
    ],
    ids=["suspend", "retry-not-counted", "shed"],
)
def test_state_03_se_07_a_retry_at_attempt_0_stays_at_0(harness, give_back):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    set_attempt(harness, job.id, 0)  # held at attempt 0: a row requeued under its holder
    release = give_back(job)
    verb = {SuspendUntil: "suspend", RetryAt: "retry", Shed: "shed"}[type(release)]
    assert getattr(harness.driver, verb)(release)
    assert harness.row(job.id).attempt == 0  # floored, never -1
    harness.advance(5)
    [again] = claim(harness.driver)
    assert again.attempt == 1
