"""The driver contract, the finished jobs' history (issue 46): finished rows moved out of the
jobs table in batches after a grace, found by every read wherever they live, brought back by a
retry, and dropped a whole day of a state at a time by retention. Every case runs on the memory
driver AND the PostgreSQL driver through the ``harness`` fixture, asserting the same answers."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

import pytest

from django_xjobs.drivers.contract import Complete, Finish
from django_xjobs.errors import JobNotCancellableError
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.drivers.contract.support import claim
from tests.support.database import no_history_days

DAY = 86400.0
FINISHED = ["done", "failed", "dead", "cancelled"]


def hot(harness) -> dict[str, int]:
    """What still lives in the jobs table, per finished state (prune's dry run reads only it)."""
    return harness.driver.jobs().prune(older_than=-DAY, states=FINISHED, dry_run=True)


def finished(harness) -> tuple[UUID, UUID, UUID]:
    """Three claimed jobs settled: done, dead, and one left running."""
    for n in range(3):
        jobs.ok.enqueue(n=n)
    a, b, c = claim(harness.driver)
    harness.driver.runs().complete([Complete(a.id, a.lease_token)])
    harness.driver.runs().finish(Finish(b.id, b.lease_token, "dead"))
    return a.id, b.id, c.id


def test_hist_02_the_mover_takes_finished_rows_past_the_grace_only(harness):
    _, _, running = finished(harness)
    history = harness.driver.history()
    assert history.move_finished(grace=60) == 0  # just finished: parents and waiters see them
    assert hot(harness) == {"done": 1, "failed": 0, "dead": 1, "cancelled": 0}
    harness.advance(120)
    assert history.move_finished(grace=60, batch=1) == 2  # batch by batch, until a short one
    assert hot(harness) == dict.fromkeys(FINISHED, 0)
    assert harness.row(running).state == "running"  # a live row never moves
    assert history.move_finished(grace=60) == 0


def test_hist_02_batches_bound_one_call(harness):
    finished(harness)
    harness.advance(120)
    assert harness.driver.history().move_finished(grace=60, batch=1, batches=1) == 1
    assert sum(hot(harness).values()) == 1


def test_hist_04_every_read_finds_a_moved_job(harness):
    done, dead, running = finished(harness)
    harness.advance(120)
    harness.driver.history().move_finished(grace=60)
    reads = harness.driver.reads()
    assert reads.get_job(done).state == "done"
    assert reads.get_job(dead).state == "dead"
    assert {r.id for r in reads.list_jobs()} == {done, dead, running}
    assert [r.id for r in reads.list_jobs(state="dead")] == [dead]
    assert [r.id for r in reads.dead_letters()] == [dead]
    assert reads.job_states([done, dead, running]) == {
        done: "done",
        dead: "dead",
        running: "running",
    }
    assert reads.job_ids_between(min(done, dead), max(done, dead), limit=10) == sorted([done, dead])
    [stats] = reads.stats()
    assert (stats.dead, stats.running) == (1, 1)


def test_hist_05_a_retry_brings_a_dead_job_back(harness):
    done, dead, _ = finished(harness)
    harness.advance(120)
    harness.driver.history().move_finished(grace=60)
    row = harness.driver.jobs().requeue(dead, from_step=None, force=False)
    assert (row.id, row.state, row.attempt) == (dead, "ready", 0)
    assert harness.row(dead).state == "ready"
    assert [r.id for r in harness.driver.reads().dead_letters()] == []
    # a refused retry leaves the row where it was: a done job is not retried
    with pytest.raises(Exception, match="done"):
        harness.driver.jobs().requeue(done, from_step=None, force=False)
    assert harness.row(done).state == "done"
    assert hot(harness)["done"] == 0
    with pytest.raises(JobNotCancellableError):  # the refusal a finished row always gets
        harness.driver.jobs().cancel(done, None)


def test_hist_06_partitions_are_made_ahead_once(harness):
    no_history_days(harness.driver)
    history = harness.driver.history()
    made = history.ensure_partitions(2)
    assert len(made) == 4 * 3  # each finished state: today and two days ahead
    assert {p.state for p in made} == set(FINISHED)
    assert made[1].day - made[0].day == timedelta(days=1)
    assert history.ensure_partitions(2) == []
    assert history.partitions() == made


def test_hist_03_retention_drops_whole_days_with_their_steps(harness):
    jobs.five_steps.enqueue(token="hist-03")
    jobs.ok.enqueue(n=1)
    run_until_idle(driver=harness.driver)
    no_history_days(harness.driver)
    [stepped] = [r for r in harness.driver.reads().list_jobs() if r.name.endswith("five_steps")]
    assert len(harness.driver.steps().list(stepped.run_id)) == 5
    harness.advance(3 * DAY)  # finished three days ago: its day is three days back
    history = harness.driver.history()
    assert history.move_finished(grace=60) == 2
    days = [p for p in history.partitions() if p.state == "done"]
    assert len(days) == 4  # three days back to today
    dropped = history.drop_partitions({"done": 2 * DAY, "dead": 90 * DAY})
    assert [p.name for p in dropped] == [days[0].name]  # only the day past its retention
    assert harness.driver.reads().list_jobs() == []
    assert harness.driver.steps().list(stepped.run_id) == []
    assert history.drop_partitions({"done": 2 * DAY}) == []


def test_hist_04_a_job_may_wait_for_one_in_the_history(harness):
    """A dependency moved to the history has ended: done lets the new job run at once, dead
    ends it dependency_failed, as if it were still in the jobs table (SPEC DEP-03)."""
    done, dead, _ = finished(harness)
    harness.advance(120)
    harness.driver.history().move_finished(grace=60)
    after_done = jobs.ok.using(after=[done]).enqueue(n=10).id
    after_dead = jobs.ok.using(after=[dead]).enqueue(n=11).id
    assert harness.row(after_done).state == "ready"
    assert harness.row(after_done).after_failed is None
    assert harness.row(after_dead).after_failed == dead
