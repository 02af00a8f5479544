"""A killed worker's jobs recover under a steady stream (issue 12, item 3), with real processes.

Two workers run a steady stream of short ``ledger`` jobs; one is SIGKILLed mid-job. Its jobs are
suspects on their next claim: the survivor runs each alone in a child process, on one of its
threads, and goes on claiming beside them (issue 39 item 2). They must finish within the
visibility timeout plus a child's start-up (measured: from the survivor's claim to the body's first
line in the child) plus their own runs, plus a poll; the ledger judges, not the log.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from datetime import datetime

import pytest
from django.db.models import Count
from django.utils import timezone

from django_xjobs.models import Job
from tests import jobs
from tests.models import Ledger
from tests.support.database import sessions_of
from tests.support.process import wait_for, wait_while_progressing, worker_env

pytestmark = pytest.mark.process

VISIBILITY = 2.0
HOLD = 0.5
POLL = 0.1
RATE = 6.0  # jobs a second: more than one worker of 2 threads x 0.5 s can take alone
#: a loaded 2-core machine: process start-up, scheduling, database round trips
SLACK = 4.0


def _open_runs(pid: int, tokens: list[str]) -> set[str]:
    """Tokens whose run on ``pid`` started and has not written its end."""
    rows = Ledger.objects.filter(token__in=tokens, pid=pid).values_list("token", "phase")
    started = {token for token, phase in rows if phase == "start"}
    return started - {token for token, phase in rows if phase == "done"}


def test_a_killed_workers_jobs_finish_within_the_bound_under_a_steady_stream(workers):
    args = ("--queues", "default", "--concurrency", "2", "--poll-interval", f"{POLL * 1000:.0f}ms")
    args = (*args, "--visibility-timeout", f"{VISIBILITY:g}s")
    name = f"victim-{uuid.uuid4().hex[:8]}"  # its backends, in pg_stat_activity
    victim = workers(*args, env={**worker_env(), "PGAPPNAME": name})
    survivor = workers(*args)
    prefix = f"stream-{uuid.uuid4()}"
    tokens: list[str] = []
    ids = []
    pace = threading.Event()  # never set: its wait paces the producer, it waits for no work

    def enqueue() -> None:
        token = f"{prefix}-{len(tokens)}"
        tokens.append(token)
        ids.append(jobs.ledger.enqueue(token=token, hold=HOLD).id)

    killed_at: datetime | None = None
    deadline = time.monotonic() + 60
    while killed_at is None:  # the stream until the victim is mid-job, at least 2 s in
        assert time.monotonic() < deadline, "the victim never ran a job"
        enqueue()
        if len(tokens) >= 2 * RATE and _open_runs(victim.proc.pid, tokens):
            # frozen first: none of its runs can end between the check and the kill; a write it
            # sent before it froze lands (or not) before the last look
            victim.send(signal.SIGSTOP)
            wait_for(lambda: sessions_of(name)[1] == 0, timeout=30, what="its statements to end")
            assert sessions_of(name)[0], "the victim's sessions are not named: nothing was awaited"
            if _open_runs(victim.proc.pid, tokens):
                victim.send(signal.SIGKILL)
                victim.proc.wait(timeout=30)
                killed_at = timezone.now()
            else:
                victim.send(signal.SIGCONT)
        pace.wait(1 / RATE)
    stream_end = time.monotonic() + 10  # the load goes on well past the bound
    while time.monotonic() < stream_end:
        enqueue()
        pace.wait(1 / RATE)

    def finished() -> int:
        return Job.objects.filter(id__in=ids, state="done").count()

    # the stream's backlog takes what the machine gives it; a stuck or lost run stops the count
    wait_while_progressing(
        lambda: finished() == len(ids),
        finished,
        stall=60,
        what="every job of the stream to be done",
    )
    survivor.send(signal.SIGTERM)
    code, _, err = survivor.finish(timeout=60)
    assert code == 0, err

    suspects = sorted(_open_runs(victim.proc.pid, tokens))
    assert suspects, "the victim was killed with no job in flight"
    recovered = {}
    parts = {}
    for token in suspects:
        done = (
            Ledger.objects.filter(token=token, phase="done")
            .exclude(pid=victim.proc.pid)
            .earliest("at")
        )
        start = Ledger.objects.get(token=token, phase="start", pid=done.pid, attempt=done.attempt)
        job = Job.objects.get(id=ids[tokens.index(token)])
        claimed = job.last_attempted_at
        assert claimed and job.attempt == done.attempt, token  # the run that ended, last claimed
        # the child process's start-up (a fresh interpreter setting Django up), measured: from
        # the survivor's claim to the body's first line in the child. On a loaded machine it is
        # what the machine gives it, so the bound counts it as it was rather than guessing it
        startup = (start.at - claimed).total_seconds()
        recovered[token] = (done.at - killed_at).total_seconds() - max(0.0, startup)
        parts[token] = {
            "claimed": round((claimed - killed_at).total_seconds(), 2),
            "child start-up": round(startup, 2),
            "ran": round((done.at - start.at).total_seconds(), 2),
        }
    bound = VISIBILITY + len(suspects) * HOLD + POLL + SLACK
    assert max(recovered.values()) <= bound, (
        f"the killed worker's jobs took {recovered} s to finish, beyond their child's start-up "
        f"(bound {bound:g} s); after the kill: {parts}"
    )
    # lost = 0 and stuck = 0 (every row done, above); completed twice = 0, except a run the
    # victim finished but could not acknowledge before it died
    done_by_victim = set(
        Ledger.objects.filter(token__in=tokens, pid=victim.proc.pid, phase="done").values_list(
            "token", flat=True
        )
    )
    twice = (
        Ledger.objects.filter(token__in=tokens, phase="done")
        .exclude(token__in=done_by_victim)
        .values("token")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    assert list(twice) == []
    assert Ledger.objects.filter(token__in=tokens, phase="done").values(
        "token"
    ).distinct().count() == len(tokens)
