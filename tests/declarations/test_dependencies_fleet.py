"""Dependencies under SIGKILL (issue 32), with real worker processes and a ledger.

Chains of three jobs (each ``using(after=[the previous])``) run on three workers, one of which
is SIGKILLed every few seconds and replaced. Every link of a healthy chain must end done and
begin only after the link before it was done (ledger times against the settle's time); in a
chain whose head fails, the other links must end ``dependency_failed`` without ever running
(SPEC DEP-02/04). ``XJOBS_CHAOS_CHAINS`` scales it.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import defaultdict

import pytest

from django_xjobs.models import Job
from tests import jobs
from tests.models import Ledger
from tests.support.process import wait_for

pytestmark = pytest.mark.process

CHAINS = int(os.environ.get("XJOBS_CHAOS_CHAINS", "24"))
KILL_EVERY = 3.0
KILLS = int(os.environ.get("XJOBS_CHAOS_KILLS", "4"))
VISIBILITY = "2s"


@pytest.mark.timeout(150 + CHAINS)
def test_each_link_runs_after_the_one_before_is_done_and_none_is_stranded_under_sigkill(workers):
    args = ("--queues", "default", "--concurrency", "4", "--poll-interval", "100ms")
    args = (*args, "--visibility-timeout", VISIBILITY)
    running = [workers(*args) for _ in range(3)]
    prefix = uuid.uuid4().hex[:8]
    chains: dict[str, list] = {}
    failing = set()
    for c in range(CHAINS):
        token = f"{prefix}-c{c}"
        fail = c % 6 == 0  # a head that fails for good: the rest of its chain never runs
        if fail:
            failing.add(token)
        ids = [jobs.chained.enqueue(token=token, link=0, fail=fail).id]
        for link in (1, 2):
            ids.append(jobs.chained.using(after=[ids[-1]]).enqueue(token=token, link=link).id)
        chains[token] = ids
    every = [job_id for ids in chains.values() for job_id in ids]

    def ended() -> int:
        return Job.objects.filter(id__in=every, state__in=("done", "dead")).count()

    wait_for(lambda: Ledger.objects.filter(token__startswith=prefix).exists(), timeout=60)
    kills = 0
    next_kill = time.monotonic()
    while kills < KILLS and ended() < len(every):
        wait_for(lambda due=next_kill: time.monotonic() >= due, timeout=KILL_EVERY + 1)
        working = set(Ledger.objects.filter(token__startswith=prefix).values_list("pid", flat=True))
        victims = [w for w in running if w.proc.pid in working]
        if victims:
            running.remove(victims[0])
            victims[0].kill()  # SIGKILL: mid-claim, mid-run or mid-settle
            kills += 1
            running.append(workers(*args))
        next_kill = time.monotonic() + KILL_EVERY

    def report() -> str:
        states = defaultdict(int)
        for state, reason in Job.objects.filter(id__in=every).values_list("state", "stop_reason"):
            states[(state, reason)] += 1
        return f"{ended()}/{len(every)} ended; {dict(states)}"

    try:
        wait_for(lambda: ended() >= len(every), timeout=90 + CHAINS)
    except AssertionError:
        raise AssertionError(report()) from None
    assert kills >= 1

    rows = {row.id: row for row in Job.objects.filter(id__in=every)}
    began = defaultdict(list)
    for entry in Ledger.objects.filter(token__startswith=prefix):
        began[entry.token].append(entry.at)
    for token, ids in chains.items():
        links = [rows[i] for i in ids]
        if token in failing:
            assert (links[0].state, links[0].stop_reason) == ("dead", "terminal"), token
            for link in (1, 2):
                assert (links[link].state, links[link].stop_reason) == (
                    "dead",
                    "dependency_failed",
                ), token
                assert not began[f"{token}-{link}"], token  # never ran
            continue
        assert [r.state for r in links] == ["done"] * 3, report()
        for link in (1, 2):
            # every run of a link began after the settle that made the one before done
            assert min(began[f"{token}-{link}"]) >= links[link - 1].updated_at, token
