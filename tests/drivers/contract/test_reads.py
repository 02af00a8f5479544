"""The driver contract, reads (SPEC DRV-04 table, DRV-05 gaps closed): the job list, the dead
letters and the stats buckets. Every case runs on the memory driver AND the PostgreSQL driver through the ``harness``
fixture, asserting the same answers."""

from __future__ import annotations

from django_xjobs.drivers.contract import (
    Complete,
    Finish,
    SuspendUntil,
)
from tests import jobs
from tests.drivers.contract.support import claim

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
