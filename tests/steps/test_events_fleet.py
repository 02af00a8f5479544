"""Waiters released by their events under SIGKILL (issue 43), with real worker processes and a
ledger.

``WAITERS`` runs of ``tests.jobs.event_waiter`` park on three workers, each waiting for its own
event; they look for it only once an hour, so each resumes only because its publish released
it (SPEC EVT-06). The events are published in four rounds, and after each round a worker that
has run waiters is SIGKILLed and replaced, so kills land while released runs resume. Every
waiter must resume exactly once with its own event's data: one ledger row each, written in an
atomic step. ``XJOBS_EVENT_WAITERS`` sets another size (200 by default, the issue's).
"""

from __future__ import annotations

import os
import uuid

import pytest

from django_xjobs import publish_event
from django_xjobs.models import Job, JobStep
from tests import jobs
from tests.models import Ledger
from tests.support.process import wait_for

pytestmark = pytest.mark.process

WAITERS = int(os.environ.get("XJOBS_EVENT_WAITERS", "200"))
ROUNDS = 4
VISIBILITY = "2s"
#: the waits: each waiter's run takes a fraction of a second of one of twelve threads, and a
#: killed worker's runs are taken again once their lease has lapsed
PARK = 60 + WAITERS * 0.5
RESUME = 60 + WAITERS * 0.5


@pytest.mark.timeout(60 + PARK + RESUME + 30)
def test_evt_06_every_waiter_is_released_by_its_event_once_under_sigkill(workers):
    """SPEC EVT-06 under SIGKILL: each waiter resumes exactly once, with its own event's data,
    released by the publish (its own look is an hour away); none is lost."""
    args = ("--queues", "default", "--concurrency", "4", "--poll-interval", "100ms")
    args = (*args, "--visibility-timeout", VISIBILITY)
    running = [workers(*args) for _ in range(3)]
    prefix = uuid.uuid4().hex[:8]
    tokens = [f"{prefix}-w{n}" for n in range(WAITERS)]
    waiters = {t: jobs.event_waiter.enqueue(token=t).id for t in tokens}

    def parked() -> bool:
        rows = Job.objects.filter(id__in=waiters.values())
        run_ids = list(rows.filter(state="suspended").values_list("run_id", flat=True))
        if len(run_ids) < WAITERS:
            return False
        steps = JobStep.objects.filter(run_id__in=run_ids, name="released", status="waiting")
        return steps.count() == WAITERS

    wait_for(parked, timeout=PARK, what=f"{WAITERS} waiters to park")

    def finished() -> int:
        return Job.objects.filter(id__in=waiters.values(), state="done").count()

    def kill_one() -> None:
        # a worker that has run waiters: one still starting has nothing to lose
        working = set(
            Ledger.objects.filter(token__startswith=prefix).values_list("pid", flat=True).distinct()
        )
        victims = [w for w in running if w.proc.pid in working] or running[:1]
        running.remove(victims[0])
        victims[0].kill()  # SIGKILL: mid-claim, mid-wait, mid-step or mid-settle
        running.append(workers(*args))

    def resumed() -> int:
        return Ledger.objects.filter(token__startswith=prefix, phase="resumed").count()

    values = {t: n * 7 for n, t in enumerate(tokens)}
    size = -(-WAITERS // ROUNDS)
    kills = 0
    for start in range(0, WAITERS, size):
        before = resumed()
        for token in tokens[start : start + size]:
            publish_event("waiter.released", {"token": token, "value": values[token]})
        # the kill lands while this round's waiters resume: once the first of them has
        wait_for(lambda before=before: resumed() > before, timeout=RESUME, what="a resume")
        kill_one()
        kills += 1

    def report() -> str:
        ended = Job.objects.filter(id__in=waiters.values()).exclude(state="done")
        states = sorted(ended.values_list("state", flat=True))
        return f"{finished()}/{WAITERS} waiters done, {kills} kills; the others: {states}"

    try:
        wait_for(lambda: finished() >= WAITERS, timeout=RESUME, what="every waiter to resume")
    except AssertionError:
        raise AssertionError(report()) from None

    recorded = list(
        Ledger.objects.filter(token__startswith=prefix, phase="resumed").values_list(
            "token", flat=True
        )
    )
    # exactly once each, with its own event's value: no waiter lost, none resumed twice
    assert sorted(recorded) == sorted(f"{t}:{values[t]}" for t in tokens)
    for token, job_id in waiters.items():
        assert Job.objects.get(id=job_id).result == {"token": token, "value": values[token]}
    print(f"\n{WAITERS} waiters released by {WAITERS} publishes, {kills} kills: 0 lost")
