"""A body past its timeout holds its capacity, across real ``manage.py xjobs_worker`` processes
(SPEC EXEC-05, issue 11 item 2). The handlers' own ledger rows decide; waits are polls."""

from __future__ import annotations

import signal
import uuid

import pytest

from django_xjobs.models import Job
from tests import jobs
from tests.run.test_abandoned import intervals, most_at_once
from tests.support.process import WorkerProcess, wait_for

pytestmark = pytest.mark.process

FLEET = ("--queues", "default", "--poll-interval", "100ms", "--visibility-timeout", "3s")


def stop(process: WorkerProcess) -> str:
    process.send(signal.SIGTERM)
    code, _, err = process.finish()
    assert code == 0, err
    return err


def test_exec_05_a_capped_overrun_never_overlaps_its_retry_across_two_processes(workers):
    """concurrency=1: the first attempt times out and keeps running 1 s; its retry is due at
    once, but no worker, this one or the other, starts it until the body has returned."""
    token = f"p-capped-{uuid.uuid4()}"
    job_id = jobs.overrun_capped.enqueue(token=token, hold=1.5).id
    procs = [workers(*FLEET, "--concurrency", "2") for _ in range(2)]
    wait_for(lambda: Job.objects.get(id=job_id).state == "done", timeout=60, what="the retry")
    wait_for(lambda: len(intervals([token])) == 2, what="both attempts to reach their end")
    errors = [stop(p) for p in procs]

    [(_, first, _, end_1), (_, second, start_2, _)] = intervals([token])
    assert (first, second) == (1, 2)
    assert end_1 <= start_2, "the retry started while the timed-out body still ran"
    assert Job.objects.get(id=job_id).result == 2
    assert sum("xjobs.worker.body_abandoned" in err for err in errors) == 1


def test_exec_05_a_worker_with_concurrency_2_never_runs_more_than_2_bodies(workers):
    tokens = [f"p-busy-{i}-{uuid.uuid4()}" for i in range(4)]
    ids = [jobs.overrun_busy.enqueue(token=token, hold=1.0).id for token in tokens]
    process = workers(*FLEET, "--concurrency", "2")
    wait_for(lambda: len(intervals(tokens)) == 4, timeout=60, what="all four bodies to end")
    wait_for(
        lambda: Job.objects.filter(id__in=ids, state="dead").count() == 4,
        what="all four rows to be settled",
    )
    err = stop(process)
    runs = intervals(tokens)
    assert most_at_once(runs) == 2, runs
    assert err.count("xjobs.worker.body_abandoned") == 4
    assert err.count("xjobs.worker.body_ended") == 4
