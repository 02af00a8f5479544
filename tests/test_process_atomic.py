"""Exactly-once database effects across real worker processes (issue 17 section 1).

2,000 jobs each write one ``Effect`` row inside each of two ``ctx.step.atomic`` blocks while
workers are SIGKILLed mid-run and SIGSTOPped past their 1 s leases, then resumed to finish what
they were doing. The ledger must end with exactly one row per (job, step): not "at least one".
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections import Counter

import pytest

from django_xjobs.models import Job
from tests import jobs
from tests.models import Effect
from tests.support.process import wait_for

pytestmark = pytest.mark.process

JOBS = 2_000
STEPS = 1
FLEET = ("--queues", "default", "--concurrency", "8", "--poll-interval", "100ms")
LEASE = ("--visibility-timeout", "1s")
#: kills and thaws, each landing on a worker with runs in flight
CHAOS = 3
#: the chaos's beat; the pace is an event nobody sets: it waits for no work
BEAT = 0.3


def running_on(worker_id: str) -> set[uuid.UUID]:
    rows = Job.objects.filter(state="running", claimed_by=worker_id)
    return set(rows.values_list("id", flat=True))


def test_atomic_steps_write_exactly_once_while_workers_are_killed_and_frozen(workers):
    fleet = {}
    thawed = []  # the workers resumed past their lease

    def start() -> None:
        worker_id = f"atomic-{uuid.uuid4().hex[:8]}"
        fleet[worker_id] = workers(*FLEET, *LEASE, "--worker-id", worker_id)

    for _ in range(3):
        start()
    prefix = uuid.uuid4().hex
    inputs = [{"token": f"{prefix}-{n}", "steps": STEPS, "hold": 0.0} for n in range(JOBS)]
    ids = [r.id for r in jobs.atomic_effects.enqueue_many(inputs)]

    def all_done() -> bool:
        return Job.objects.filter(id__in=ids, state="done").count() == len(ids)

    pace = threading.Event()  # never set
    killed = frozen = 0
    beat = 0
    deadline = time.monotonic() + 90
    while (killed < CHAOS or frozen < CHAOS) and not all_done():
        assert time.monotonic() < deadline, "the chaos never landed on a run"
        beat += 1
        worker_id = list(fleet)[beat % len(fleet)]
        victim = fleet[worker_id]
        victim.send(signal.SIGSTOP)  # frozen first: its runs cannot end between look and act
        held = running_on(worker_id)
        if held and killed < CHAOS and (beat % 2 or frozen == CHAOS):
            victim.send(signal.SIGKILL)
            victim.proc.wait(timeout=30)
            del fleet[worker_id]
            killed += 1
            start()
        elif held and frozen < CHAOS:
            # past its lease, until the others re-claimed its jobs (or a block of its own holds
            # the job row's lock, mid-commit: then no one can, and it must finish that commit)
            thaw = time.monotonic() + 4
            while running_on(worker_id) & held and time.monotonic() < thaw:
                pace.wait(0.05)
            victim.send(signal.SIGCONT)
            thawed.append(victim)
            frozen += 1
        else:
            victim.send(signal.SIGCONT)
        pace.wait(BEAT)
    assert killed == frozen == CHAOS, f"the jobs ended first: {killed} kills, {frozen} thaws"
    wait_for(all_done, timeout=60, what="every job to be done")

    rows = Effect.objects.filter(job_id__in=ids).values_list("job_id", "step")
    counts = Counter(rows)
    twice = {key: n for key, n in counts.items() if n > 1}
    assert not twice, f"{len(twice)} atomic steps wrote more than once, e.g. {list(twice)[:3]}"
    assert len(counts) == JOBS * STEPS  # and every step of every done job wrote once
    rerun = Job.objects.filter(id__in=ids, attempt__gt=1).count()
    assert rerun, "no job was run twice: nothing tested the fence"
    thawed_logs = "".join(line for w in thawed for line in w.err)
    assert "xjobs.lease.lost" in thawed_logs  # a thawed worker learned it had lost its runs
