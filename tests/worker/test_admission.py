"""A suspect (a job whose last run died with its worker) runs alone without losing its place
(issue 12, item 3): claimed beside live runs, it goes back in its old place in the queue, and
that worker claims nothing more until its runs end, then takes it first."""

from __future__ import annotations

import uuid

from django_xjobs.drivers.contract import Shed
from django_xjobs.run.execute import Outcome
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.models import Ledger


def _suspect(harness, token: str):
    """A ``ledger`` job whose one run died with its worker: its next claim is a suspect's."""
    job_id = jobs.ledger.enqueue(token=token).id
    harness.driver.claim(queues=["default"], limit=1, visibility_timeout=5, worker_id="doomed")
    harness.advance(5)
    return job_id


def _row(token: str, phase: str) -> Ledger:
    return Ledger.objects.get(token=token, phase=phase)


def test_a_suspect_claimed_beside_a_run_goes_back_and_runs_alone_once_it_ends(live_harness):
    suspect, busy = f"suspect-{uuid.uuid4()}", f"busy-{uuid.uuid4()}"
    suspect_id = _suspect(live_harness, suspect)
    # higher priority: claimed first in the same batch, so it is in flight when the suspect comes
    busy_id = jobs.ledger.using(priority=10).enqueue(token=busy, hold=0.3).id
    worker = Worker(queues=["default"], concurrency=2, driver=live_harness.driver, burst=True)
    stats = worker.run()

    assert stats.outcomes == {Outcome.COMPLETED: 2, "shed": 1}
    assert live_harness.row(busy_id).state == "done"
    row = live_harness.row(suspect_id)
    assert (row.state, row.attempt, row.lease_expiries) == ("done", 2, 0)
    assert _row(suspect, "start").id > _row(busy, "done").id, "it started beside a live run"


def test_while_a_suspect_waits_or_runs_the_worker_starts_nothing_else(live_harness):
    suspect = f"suspect-{uuid.uuid4()}"
    suspect_id = _suspect(live_harness, suspect)
    first, later = f"first-{uuid.uuid4()}", f"later-{uuid.uuid4()}"
    jobs.ledger.using(priority=10).enqueue(token=first, hold=0.3)
    later_id = jobs.ledger.using(priority=-10).enqueue(token=later).id
    worker = Worker(queues=["default"], concurrency=3, driver=live_harness.driver, burst=True)
    stats = worker.run()

    # shed: the suspect and ``later`` beside ``first``, then ``later`` beside the suspect
    assert stats.outcomes == {Outcome.COMPLETED: 3, "shed": 3}
    assert {live_harness.row(i).state for i in (suspect_id, later_id)} == {"done"}
    assert _row(suspect, "start").id > _row(first, "done").id
    assert _row(later, "start").id > _row(suspect, "done").id


def test_a_job_shed_to_keep_its_place_is_due_at_once_in_its_old_place(harness):
    """``Shed(keep_place=True)`` keeps ``run_at`` (ahead of jobs enqueued after it); a plain
    shed moves it to now + delay, behind them (SPEC WORK-04)."""
    kept_id = jobs.ok.enqueue(n=1).id
    moved_id = jobs.ok.enqueue(n=2).id
    before = {i: harness.row(i).run_at for i in (kept_id, moved_id)}
    claimed = harness.driver.claim(
        queues=["default"], limit=2, visibility_timeout=30, worker_id="w"
    )
    by_id = {job.id: job for job in claimed}
    kept, moved = by_id[kept_id], by_id[moved_id]
    assert harness.driver.shed(Shed(kept.id, kept.lease_token, delay=60, keep_place=True))
    assert harness.driver.shed(Shed(moved.id, moved.lease_token, delay=60))
    row = harness.row(kept_id)
    assert (row.state, row.attempt, row.run_at) == ("ready", 0, before[kept_id])
    assert harness.row(moved_id).run_at > before[moved_id]
    [again] = harness.driver.claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id="w"
    )
    assert again.id == kept_id
