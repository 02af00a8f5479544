"""A fleet of two real ``xjobs_worker`` processes and ``manage.py xjobs pause / resume``
(issue 29, SPEC CTRL-02/03/04). The ledger the handlers write decides what ran, never a log.

The workers poll every 30 s, so a change seen within a few seconds was told by NOTIFY.
"""

from __future__ import annotations

import signal
import time
import uuid

import pytest

from django_xjobs import inspect_queues, inspect_workers
from django_xjobs.models import Job
from tests import jobs
from tests.support.process import ledger, run_manage, wait_for

pytestmark = pytest.mark.process

#: far longer than any wait below: only a notification can make them see a change in time
POLL = "30s"
#: a change told by NOTIFY reaches every worker well within this
TOLD = 10


def xjobs(*args: str) -> None:
    done = run_manage("xjobs", *args, "--settings=tests.settings")
    assert done.returncode == 0, done.stderr


def paused() -> set[str]:
    return {q["queue"] for q in inspect_queues()["queues"] if q["paused"]}


def test_ctrl_02_a_paused_queue_starts_nothing_on_any_worker_until_resumed(workers):
    run = uuid.uuid4().hex[:8]
    fleet = [
        workers("--queues", "default,emails", "--concurrency", "2", "--poll-interval", POLL)
        for _ in range(2)
    ]
    wait_for(lambda: len(inspect_workers()) == 2, what="both workers present")
    in_flight = f"flight-{run}"
    jobs.emails_ledger.enqueue(token=in_flight, hold=1.5)
    wait_for(lambda: ledger(in_flight, "start"), timeout=TOLD, what="the emails run to start")

    xjobs("pause", "emails")
    # each worker re-reads the paused set when told: its next claim leaves emails out
    for worker in fleet:
        wait_for(lambda w=worker: w.saw("paused=emails"), timeout=TOLD, what="the pause told")

    # enqueued first, so an unfiltered claim (priority, then run_at) would take them first
    held = [jobs.emails_ledger.enqueue(token=f"held-{run}-{n}").id for n in range(3)]
    main = [jobs.ledger.enqueue(token=f"main-{run}-{n}").id for n in range(4)]
    wait_for(
        lambda: all(Job.objects.get(id=i).state == "done" for i in main),
        timeout=TOLD,
        what="default's jobs to run while emails is paused",
    )
    # a run in flight when the pause came finishes (its hold may outlast default's four runs)
    wait_for(lambda: ledger(in_flight, "done"), timeout=TOLD, what="the run in flight to finish")
    assert [t for n in range(3) for t in ledger(f"held-{run}-{n}", "start")] == []
    assert {Job.objects.get(id=i).state for i in held} == {"ready"}

    xjobs("resume", "emails")
    # timed from the commit, not from the command's start: a loaded machine can take seconds to
    # start manage.py, which says nothing about how the workers were told
    resumed_at = time.monotonic()
    wait_for(
        lambda: all(Job.objects.get(id=i).state == "done" for i in held),
        timeout=TOLD,
        what="the held emails to run once resumed",
    )
    assert time.monotonic() - resumed_at < TOLD  # told, not found at the next 30 s poll

    # a worker that drains on SIGTERM leaves every queue as it found it (CTRL-04)
    fleet[0].send(signal.SIGTERM)
    code, _, err = fleet[0].finish()
    assert code == 0, err
    assert paused() == set()
    after = jobs.emails_ledger.enqueue(token=f"after-{run}").id
    wait_for(
        lambda: Job.objects.get(id=after).state == "done",
        timeout=TOLD,
        what="the other worker to keep claiming emails",
    )
    fleet[1].send(signal.SIGKILL)  # a crash pauses nothing either
    fleet[1].finish()
    assert paused() == set()
