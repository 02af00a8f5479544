"""A suspect (a job whose last run died with its worker) waits for the runs beside it, then
runs alone (issue 12, item 3): it is not handed back to the end of the queue again and again."""

from __future__ import annotations

import uuid

from django_xjobs.execute import Outcome
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.models import Ledger


def _suspect(harness, token: str):
    """A ``ledger`` job whose one run died with its worker: its next claim is a suspect's."""
    job_id = jobs.ledger.enqueue(token=token).id
    harness.driver.claim(queues=["default"], limit=1, visibility_timeout=5, worker_id="doomed")
    harness.advance(5)
    return job_id


def _phases(token: str) -> list[tuple[str, int]]:
    return list(Ledger.objects.filter(token=token).values_list("phase", "attempt"))


def test_a_suspect_claimed_beside_a_run_waits_for_it_then_runs_alone(live_harness):
    suspect, busy = f"suspect-{uuid.uuid4()}", f"busy-{uuid.uuid4()}"
    suspect_id = _suspect(live_harness, suspect)
    # higher priority: claimed first in the same batch, so it is in flight when the suspect comes
    busy_id = jobs.ledger.using(priority=10).enqueue(token=busy, hold=0.3).id
    worker = Worker(queues=["default"], concurrency=2, driver=live_harness.driver, burst=True)
    stats = worker.run()

    assert stats.outcomes == {Outcome.COMPLETED: 2}, "the suspect was handed back, not held"
    assert live_harness.row(busy_id).state == "done"
    row = live_harness.row(suspect_id)
    assert (row.state, row.attempt, row.lease_expiries) == ("done", 2, 0)
    busy_done = Ledger.objects.get(token=busy, phase="done")
    suspect_start = Ledger.objects.get(token=suspect, phase="start")
    assert suspect_start.id > busy_done.id, "the suspect started beside a running job"
    assert _phases(suspect) == [("start", 2), ("done", 2)]


def test_jobs_claimed_behind_a_held_suspect_go_back_and_run_after_it(live_harness):
    """While a suspect waits or runs, the worker claims nothing and starts nothing else."""
    suspect = f"suspect-{uuid.uuid4()}"
    suspect_id = _suspect(live_harness, suspect)
    first, later = f"first-{uuid.uuid4()}", f"later-{uuid.uuid4()}"
    jobs.ledger.using(priority=10).enqueue(token=first, hold=0.3)
    later_id = jobs.ledger.using(priority=-10).enqueue(token=later).id
    worker = Worker(queues=["default"], concurrency=3, driver=live_harness.driver, burst=True)
    stats = worker.run()

    assert stats.outcomes["shed"] == 1  # ``later``, claimed in the batch behind the suspect
    assert stats.outcomes[Outcome.COMPLETED] == 3  # claimed again once the suspect ended
    assert {live_harness.row(i).state for i in (suspect_id, later_id)} == {"done"}
    suspect_done = Ledger.objects.get(token=suspect, phase="done")
    assert Ledger.objects.get(token=later, phase="start").id > suspect_done.id


def test_a_held_suspect_goes_back_unrun_when_the_worker_stops(live_harness):
    """Stopping before the runs beside it end: it is shed, not left to lapse (a lapse would
    count another crash against it)."""
    suspect, busy = f"suspect-{uuid.uuid4()}", f"busy-{uuid.uuid4()}"
    suspect_id = _suspect(live_harness, suspect)
    jobs.ledger.using(priority=10).enqueue(token=busy, hold=1)
    worker = Worker(queues=["default"], concurrency=2, driver=live_harness.driver)
    original = worker._execute

    def execute_then_stop(run):
        worker.stop()  # the busy run has started; the suspect is held behind it
        original(run)

    worker._execute = execute_then_stop  # type: ignore[method-assign]
    stats = worker.run()

    assert stats.outcomes["shed"] == 1
    row = live_harness.row(suspect_id)
    assert (row.state, row.lease_expiries) == ("ready", 1)  # the crash count is kept, not raised
    assert not Ledger.objects.filter(token=suspect).exists()
