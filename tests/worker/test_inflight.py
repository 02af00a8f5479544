"""One worker, two runs of the same job: the run that lost its lease, and the run this worker
claimed after it (SPEC STATE-01, LEASE-12). Runs are known by their lease token, never by the
job's id, so the old run's settle cannot settle, release or hide the new one. Both drivers.

Before, a worker keyed its runs by job id: a run that lost its lease in an outage and settled
after this worker had claimed the job again took the new run with it. The new run was no longer
renewed, and marked settled, so its local deadline never stopped it: a drain then waited for
its body past --shutdown-timeout.
"""

from __future__ import annotations

from django_xjobs.declarations.registry import get_job
from django_xjobs.drivers.contract import Complete
from django_xjobs.run.execution import Outcome
from django_xjobs.run.settle import settle
from django_xjobs.run.verdicts import failure
from django_xjobs.worker.run import Run
from django_xjobs.worker.worker import Worker
from tests import jobs


def _claimed_twice(harness, worker_id: str):
    """The same job claimed twice by ``worker_id``: its first lease lapsed before the second."""
    jobs.ok.enqueue(n=1)
    [old] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=5, worker_id=worker_id
    )
    harness.advance(6)
    [new] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id=worker_id
    )
    assert (new.id, new.attempt) == (old.id, old.attempt + 1)
    assert new.lease_token != old.lease_token
    return old, new


def test_state_01_two_acks_of_one_job_in_a_batch_land_only_for_its_holder(harness):
    old, new = _claimed_twice(harness, "w")
    values = [
        Complete(old.id, old.lease_token, '"old"'),
        Complete(new.id, new.lease_token, '"new"'),
    ]
    assert settle(harness.driver, values) == {new.lease_token}
    row = harness.row(new.id)
    assert (row.state, row.result, row.attempt) == ("done", "new", new.attempt)


def test_lease_12_the_old_runs_settle_leaves_the_new_run_held_and_stoppable(harness):
    worker = Worker(queues=["default"], driver=harness.driver, burst=True)
    old, new = _claimed_twice(harness, worker.worker_id)
    old_run = Run(old, worker.worker_id, 5)
    new_run = Run(new, worker.worker_id, 30)
    worker.runs.by_token.update({old.lease_token: old_run, new.lease_token: new_run})

    worker.settler.settle_batch(
        [failure(old, RuntimeError("its lease lapsed in an outage"), handle=get_job(old.name))]
    )

    assert worker.in_flight() == [new_run]  # still renewed by the heartbeat, still drained
    assert old_run.settled.is_set() and not new_run.settled.is_set()
    assert worker.outcomes == {Outcome.LEASE_LOST: 1}  # the old verdict was refused
    row = harness.row(new.id)
    assert (row.state, row.lease_token) == ("running", new.lease_token)
    new_run.lose("deadline")  # its local deadline still stops it
    assert new_run.signal.is_set()
