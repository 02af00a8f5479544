"""A default worker recovers from handlers that ignore their timeout (issue 25 item 3), with a
real ``manage.py xjobs_worker`` process, started as the README starts it (no ``--processes``,
no supervisor) and real bodies that ignore their signal.

Hung bodies keep their threads (SPEC EXEC-05), so once they hold every thread nothing else runs.
Past ``XJOBS["ABANDONED_RECYCLE_AFTER"]`` (10 s by default) with half a pool or more held, the
worker drains and replaces its own process image, which ends the hung bodies: the ledger proves
every no-op ran once, no hung body recorded an end, and nothing was lost.
"""

from __future__ import annotations

import signal
import time
import uuid

import pytest

from django_xjobs.models import Job
from tests import jobs
from tests.models import Ledger
from tests.support.process import wait_for

pytestmark = pytest.mark.process


def test_a_default_worker_whose_threads_hung_bodies_hold_starts_afresh_and_runs_the_rest(
    workers,
):
    hung = [f"hung-{uuid.uuid4()}-{i}" for i in range(4)]
    noops = [f"noop-{uuid.uuid4()}-{i}" for i in range(60)]
    # the hung jobs first, so they take every thread; each ignores its 300 ms timeout for 10 min
    hung_ids = [jobs.overrun_busy.enqueue(token=t, hold=600).id for t in hung]
    worker = workers("--queues", "default", "--concurrency", "4")
    wait_for(
        lambda: Ledger.objects.filter(token__in=hung, phase="start").count() == len(hung),
        timeout=60,
        what="the hung bodies to hold every thread",
    )
    held_at = time.monotonic()
    noop_ids = [jobs.ledger.enqueue(token=t).id for t in noops]
    wait_for(
        lambda: Job.objects.filter(id__in=noop_ids, state="done").count() == len(noops),
        timeout=60,
        what="every no-op to run beside the hung bodies",
    )
    took = time.monotonic() - held_at
    assert worker.proc.poll() is None, "".join(worker.err)  # the same process, a fresh image
    worker.send(signal.SIGTERM)
    code, _, err = worker.finish(timeout=60)

    assert code == 0, err
    assert "xjobs.worker.recycle" in err and "reason=abandoned_held" in err
    assert "xjobs.worker.restarting" in err
    # the default bound (10 s) and a restart, with room for a loaded machine
    assert took < 45, took
    assert [len(Ledger.objects.filter(token=t, phase="done")) for t in noops] == [1] * len(noops)
    assert not Ledger.objects.filter(token__in=hung, phase="end").exists()  # ended by the exec
    # each hung run was settled (timed out, one attempt: dead) before its process image went
    assert set(Job.objects.filter(id__in=hung_ids).values_list("state", flat=True)) == {"dead"}
