"""The driver contract, reads (SPEC DRV-04 table, DRV-05 gaps closed): the job list, the dead
letters and the stats buckets. Every case runs on the memory driver AND the PostgreSQL driver through the ``harness``
fixture, asserting the same answers."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest
from django.conf import settings
from django.db import transaction
from django.test import override_settings

from django_xjobs.drivers.contract import (
    Complete,
    Finish,
    SuspendUntil,
)
from django_xjobs.outbox.relay import Relay
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.drivers.contract.support import claim

#: numbers past a double's exact range (2**53): ints a 64-bit primary key or more wide, and
#: floats Python writes with an exponent (1e16 and up), which jsonb keeps as digits
NUMBERS = {
    "bigint": 2**63 - 1,
    "past_2_53": 2**53 + 1,
    "negative": -(2**64),
    "thirty_digits": 10**30,
    "exact_float": 2.0**53,
    "float": 1e20,
    "digits": 1.2345678901234567e25,
    "negative_float": -3.5e16,
    "largest": 1.7976931348623157e308,
    "tiny": 1e-20,
    "nested": [2**62, {"f": 9.9e99}],
    "text": "1e+20 stays text",
}


def typed(value: Any) -> Any:
    """``value`` with each number paired with its type: an int read back for a float differs."""
    if isinstance(value, dict):
        return {key: typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [typed(item) for item in value]
    return (type(value).__name__, value)


# --- (h) list newest first, limit after the sort --------------------------------------------


def test_insp_04_se_06_list_is_newest_first_and_limited_after_sorting(harness):
    ids = [jobs.ok.enqueue(n=i).id for i in range(5)]
    assert [r.id for r in harness.driver.list_jobs()] == ids[::-1]
    assert [r.id for r in harness.driver.list_jobs(limit=2)] == ids[:2:-1]
    assert [r.id for r in harness.driver.list_jobs(state="ready", name="tests.jobs.ok")] == ids[
        ::-1
    ]
    assert harness.driver.list_jobs(queue="other") == []


def test_insp_04_list_defaults_to_100_rows(harness):
    for i in range(105):
        jobs.ok.enqueue(n=i)
    assert len(harness.driver.list_jobs()) == 100


# --- (i) dead letters by updated_at, newest first -------------------------------------------


def test_insp_05_dead_letters_newest_first(harness):
    jobs.ok.enqueue(n=1)
    jobs.ok.enqueue(n=2)
    jobs.ok.enqueue(n=3)
    a, b, c = claim(harness.driver)
    harness.driver.finish(Finish(b.id, b.lease_token, "dead"))
    harness.advance(10)
    harness.driver.finish(Finish(a.id, a.lease_token, "dead"))
    harness.driver.ack([Complete(c.id, c.lease_token)])
    assert [r.id for r in harness.driver.dead_letters()] == [a.id, b.id]
    assert [r.id for r in harness.driver.dead_letters(limit=1)] == [a.id]


# --- (j) exclusive stats buckets ------------------------------------------------------------


def test_met_03_q_05_stats_buckets_are_exclusive(harness):
    """SPEC SE-05; a due ``delayed`` row counts as ready (STATE-05)."""
    jobs.ok.enqueue(n=1)  # ready
    jobs.ok.using(delay="1h").enqueue(n=2)  # delayed
    jobs.ok.using(delay="10s").enqueue(n=3)  # delayed, due after the advance: counts ready
    harness.advance(20)
    jobs.ok.enqueue(n=4)
    jobs.ok.enqueue(n=5)
    jobs.on_other_queue.enqueue(n=1)
    running = claim(harness.driver, limit=2)  # the two oldest due: n=1 and n=3
    assert {j.input["n"] for j in running} == {1, 3}
    jobs.ok.enqueue(n=6)
    jobs.ok.enqueue(n=7)
    [dead, parked] = claim(harness.driver, limit=2)
    harness.driver.finish(Finish(dead.id, dead.lease_token, "dead"))
    harness.driver.suspend(SuspendUntil(parked.id, parked.lease_token, delay=60))
    due = jobs.ok.using(delay="10s").enqueue(n=8)  # still 'delayed' when read, but due
    harness.advance(20)
    stats = {s.queue: s for s in harness.driver.stats()}
    assert list(stats) == ["default", "other"]
    default = stats["default"]
    assert harness.row(due.id).state == "delayed"  # counted below as ready, not delayed
    assert (default.ready, default.delayed, default.running, default.suspended, default.dead) == (
        3,
        1,
        2,
        1,
        1,
    )
    assert stats["other"].ready == 1
    assert default.oldest_ready_seconds >= 0.0
    assert stats["other"].oldest_ready_seconds >= 0.0


def test_stats_oldest_ready_is_measured_from_run_at(harness):
    jobs.ok.enqueue(n=1)
    harness.advance(90)
    [default] = harness.driver.stats()
    assert 90 <= default.oldest_ready_seconds < 120


# --- numbers past 2**53 read back as written --------------------------------------------------


@pytest.mark.parametrize("path", ["direct", "commit", "relay"])
def test_drv_05_numbers_past_2_53_read_back_as_written(live_harness, path):
    """An int keeps every digit and a float stays the same float, in the input (published
    directly, staged and published at commit, or by the relay), a step's output, the result and
    an event's payload, on PostgreSQL as in memory: jsonb keeps a number's digits, not its type,
    and read a float written ``1e+20`` back as an int."""
    driver, token = live_harness.driver, f"numbers-{path}"
    with override_settings(XJOBS={**settings.XJOBS, "OUTBOX": "auto"}):
        if path == "direct":
            job_id = jobs.numbers.using(outbox=False).enqueue(token=token, values=NUMBERS).id
        elif path == "commit":
            with transaction.atomic():
                job_id = jobs.numbers.enqueue(token=token, values=NUMBERS).id
        else:
            store = driver.outbox_store("default")
            job_id = store.stage(jobs.numbers.build_request({"token": token, "values": NUMBERS}))
            assert Relay(store=store, driver=driver).tick() == 1
    assert typed(live_harness.row(job_id).input) == typed({"token": token, "values": NUMBERS})
    [run] = run_until_idle(driver=driver)
    assert run.outcome == "completed"
    row = live_harness.row(job_id)
    [step] = driver.steps.list(row.run_id)
    assert typed(step.output) == typed(NUMBERS)
    assert typed(row.result) == typed({"step": NUMBERS})
    published = driver.events.publish(
        id=uuid4(), name="numbers", payload=NUMBERS, correlation_key=None, ttl=60
    )
    found = driver.events.find("numbers", after=published.published_at)
    assert found is not None and typed(found.payload) == typed(NUMBERS)
