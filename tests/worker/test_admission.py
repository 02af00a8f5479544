"""A suspect (a job whose last run died with its worker, or died alone) is admitted as any run
(issue 39 item 2, SPEC LEASE-19): nothing is shed or held back for it, so its worker keeps
claiming every queue. Where the driver's jobs can be reached from a child process its body runs
there, alone (worker/isolation.py; on real processes in ``test_isolation_fleet.py``); the memory
driver's rows live in one process, so its suspects run in their thread like any run."""

from __future__ import annotations

import threading
import uuid
from dataclasses import replace

import pytest

from django_xjobs.drivers.contract import Shed
from django_xjobs.run.execution import Outcome
from django_xjobs.worker.run import Run
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.models import Ledger
from tests.support.process import wait_for


def _suspect(harness, token: str):
    """A ``ledger`` job whose one run died with its worker: its next claim is a suspect's."""
    job_id = jobs.ledger.enqueue(token=token).id
    harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=5, worker_id="doomed"
    )
    harness.advance(5)
    return job_id


@pytest.mark.parametrize("live_harness", ["memory"], indirect=True)
def test_lease_19_a_suspect_runs_beside_live_runs_and_nothing_is_shed_for_it(live_harness):
    suspect, busy = f"suspect-{uuid.uuid4()}", f"busy-{uuid.uuid4()}"
    suspect_id = _suspect(live_harness, suspect)
    # higher priority: claimed first in the same batch, and held until the test releases it
    busy_id = jobs.gated.using(priority=10).enqueue(token=busy).id
    later = [jobs.ledger.using(priority=-10).enqueue(token=f"later-{i}-{busy}").id for i in (1, 2)]
    worker = Worker(queues=["default"], concurrency=2, driver=live_harness.driver, burst=True)
    stats: list = []
    thread = threading.Thread(target=lambda: stats.append(worker.run()))
    thread.start()
    try:
        # the suspect and the jobs behind it run while the busy run holds: nothing waits
        wait_for(
            lambda: all(live_harness.row(i).state == "done" for i in (suspect_id, *later)),
            timeout=60,
            what="the suspect and the later jobs beside the held run",
        )
        assert live_harness.row(busy_id).state == "running"
    finally:
        Ledger.objects.create(token=busy, phase="release", attempt=0, pid=0)
        thread.join(60)
    assert stats[0].outcomes == {Outcome.COMPLETED: 4}  # nothing shed, nothing waited for idle
    row = live_harness.row(suspect_id)
    assert (row.state, row.attempt, row.lease_expiries, row.lapsed_holder) == ("done", 2, 0, None)


def test_lease_19_a_suspect_goes_to_a_child_only_where_one_can_reach_its_store(harness):
    """What ``Worker._isolates`` decides: a suspect whose body would run, on a driver whose jobs
    a child can reach. A job that ends without its body (unknown here, expired, undecodable, at
    its crash bound) ends in the worker as before."""
    job_id = _suspect(harness, f"suspect-{uuid.uuid4()}")
    [claimed] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id="w"
    )
    assert (claimed.id, claimed.suspect) == (job_id, True)
    worker = Worker(queues=["default"], driver=harness.driver)

    def isolates(job, handle=jobs.ledger) -> bool:
        return worker._isolates(Run(job, "w", 30.0, handle=handle))

    reaches = harness.driver.features.supports_child_runs
    assert reaches is (harness.driver.database is not None)
    assert isolates(claimed) is reaches
    plain = replace(claimed, died_with=None)
    assert isolates(plain) is False
    assert isolates(replace(plain, lease_expiries=1)) is reaches  # a counted crash: alone again
    assert isolates(replace(plain, lease_expiries=3)) is False  # at the bound: dead-lettered
    assert isolates(claimed, handle=None) is False  # unknown here: parked, never run
    assert isolates(replace(claimed, expired=True)) is False
    assert isolates(replace(claimed, undecodable="too deep")) is False
    assert harness.driver.runs().shed(Shed(claimed.id, claimed.lease_token))


def test_a_job_shed_to_keep_its_place_is_due_at_once_in_its_old_place(harness):
    """``Shed(keep_place=True)`` keeps ``run_at`` (ahead of jobs enqueued after it); a plain
    shed moves it to now + delay, behind them (SPEC WORK-04)."""
    kept_id = jobs.ok.enqueue(n=1).id
    moved_id = jobs.ok.enqueue(n=2).id
    before = {i: harness.row(i).run_at for i in (kept_id, moved_id)}
    claimed = harness.driver.runs().claim(
        queues=["default"], limit=2, visibility_timeout=30, worker_id="w"
    )
    by_id = {job.id: job for job in claimed}
    kept, moved = by_id[kept_id], by_id[moved_id]
    assert harness.driver.runs().shed(Shed(kept.id, kept.lease_token, delay=60, keep_place=True))
    assert harness.driver.runs().shed(Shed(moved.id, moved.lease_token, delay=60))
    row = harness.row(kept_id)
    assert (row.state, row.attempt, row.run_at) == ("ready", 0, before[kept_id])
    assert harness.row(moved_id).run_at > before[moved_id]
    [again] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id="w"
    )
    assert again.id == kept_id
