"""Child jobs from a step under SIGKILL (issue 32), with real worker processes and a ledger.

Parents that each call three children run on three workers, one of which is SIGKILLed every
few seconds and replaced. Every child must be enqueued exactly once (one row per index, the ids
the parent's step recorded) and every parent must end with its three results in input order
(SPEC CHILD-01/02/03). ``XJOBS_WORKFLOWS_SCALE=full`` (``make workflows-full``) runs 1,000
parents killed every few seconds until the last resumes; ``XJOBS_CHAOS_PARENTS`` and
``XJOBS_CHAOS_KILLS`` set any other size.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import defaultdict

import pytest

from django_xjobs.models import Job, JobStep
from tests import jobs
from tests.models import Ledger
from tests.support.process import wait_for

pytestmark = pytest.mark.process

FULL = os.environ.get("XJOBS_WORKFLOWS_SCALE", "") == "full"
PARENTS = int(os.environ.get("XJOBS_CHAOS_PARENTS", "1000" if FULL else "30"))
KILL_EVERY = 3.0
#: the kills land while parents fan out and wait; the rest of the run shows none is lost (at
#: full size they go on until every parent is done)
KILLS = int(os.environ.get("XJOBS_CHAOS_KILLS", "1000000" if FULL else "4"))
VISIBILITY = "2s"
#: the wait once the kills stop: a parent's four runs take well under a second of a worker
SETTLE = 90 + PARENTS * (0.6 if FULL else 1.0)


@pytest.mark.timeout(120 + SETTLE * (2 if FULL else 1) + 30)
def test_each_child_is_enqueued_once_and_each_parent_resumes_with_its_results_under_sigkill(
    workers,
):
    """SPEC CHILD-01/02/03 under SIGKILL: each child is enqueued once, under the id its parent's
    step recorded, and each parent resumes with its results in input order."""
    args = ("--queues", "default", "--concurrency", "4", "--poll-interval", "100ms")
    args = (*args, "--visibility-timeout", VISIBILITY)
    began = time.monotonic()
    running = [workers(*args) for _ in range(3)]
    prefix = uuid.uuid4().hex[:8]
    tokens = [f"{prefix}-p{p}" for p in range(PARENTS)]
    parents = {t: jobs.chaos_parent.enqueue(token=t).id for t in tokens}

    def finished() -> int:
        return Job.objects.filter(id__in=parents.values(), state="done").count()

    wait_for(lambda: Ledger.objects.filter(token__startswith=prefix).exists(), timeout=60)
    kills = 0
    next_kill = time.monotonic()  # the first kill at once, while the first parents fan out
    while kills < KILLS and finished() < PARENTS and time.monotonic() - began < SETTLE:
        wait_for(lambda due=next_kill: time.monotonic() >= due, timeout=KILL_EVERY + 1)
        # a worker that has run parents or children: one still starting has nothing to lose
        working = set(
            Ledger.objects.filter(token__startswith=prefix).values_list("pid", flat=True).distinct()
        )
        victims = [w for w in running if w.proc.pid in working]
        if victims:
            running.remove(victims[0])
            victims[0].kill()  # SIGKILL: mid-claim, mid-step, mid-enqueue or mid-settle
            kills += 1
            running.append(workers(*args))
        next_kill = time.monotonic() + KILL_EVERY

    def report() -> str:
        states = defaultdict(int)
        for name, state in Job.objects.values_list("name", "state"):
            states[(name.rsplit(".", 1)[-1], state)] += 1
        ended = Job.objects.filter(id__in=parents.values()).exclude(state="done")
        why = [
            (str(j.id), j.state, j.attempt, j.stop_reason, (j.last_error or "")[:300], j.errors)
            for j in ended
        ]
        return f"{finished()}/{PARENTS} parents done; jobs {dict(states)}; not done: {why}"

    try:
        wait_for(lambda: finished() >= PARENTS, timeout=SETTLE)
    except AssertionError:
        raise AssertionError(report()) from None
    assert kills >= 1
    wall = time.monotonic() - began

    children = defaultdict(list)
    for row in Job.objects.filter(name="tests.jobs.chaos_child", input__token__in=tokens):
        children[row.input["token"]].append(row)
    for token, parent_id in parents.items():
        rows = children[token]
        # each child enqueued once: three rows, one per index, and exactly the recorded ids
        assert sorted(r.input["i"] for r in rows) == [0, 1, 2], token
        parent = Job.objects.get(id=parent_id)
        [step] = JobStep.objects.filter(run_id=parent.run_id, name__startswith="call_many:")
        assert step.status == "completed"
        assert sorted(step.output["children"]) == sorted(str(r.id) for r in rows), token
        # resumed with the right results, in input order
        assert parent.result == {"results": [{"token": token, "i": i} for i in range(3)]}
        assert Ledger.objects.filter(token=token, phase="resumed").exists()
    # a parent's run after its step completed writes "resumed"; a kill between that write and
    # its settle runs it again (runs are at least once), with the same recorded results
    resumed = defaultdict(int)
    for token in Ledger.objects.filter(token__in=tokens, phase="resumed").values_list(
        "token", flat=True
    ):
        resumed[token] += 1
    once = sum(1 for t in tokens if resumed[t] == 1)
    # the figures of a full-size run (`make workflows-full` shows them)
    print(
        f"\n{PARENTS} parents of 3 children, {kills} kills, {wall:.0f}s: "
        f"{sum(len(rows) for rows in children.values())} children enqueued once, "
        f"{len(parents)} parents resumed with their results ({once} in one run, "
        f"{len(parents) - once} run again after a kill)"
    )
