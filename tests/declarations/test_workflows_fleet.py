"""Batches under SIGKILL (issue 32), with real worker processes and a ledger.

Batches of members (some retry, some die) run on three workers, one of which is SIGKILLed every
few seconds and replaced. Every batch's callback job must exist exactly once, run, and start
after the last write of each of its members (ledger timestamps), with counts that match the
members' final states. ``XJOBS_WORKFLOWS_SCALE=full`` (``make workflows-full``) runs the
issue's full size, 1,000 batches; ``XJOBS_CHAOS_BATCHES`` sets any other.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections import defaultdict

import pytest
from django.db.models import Max, Min

from django_xjobs import Batch
from django_xjobs.models import Job, JobBatch
from tests import jobs
from tests.models import Ledger
from tests.support.process import wait_for

pytestmark = pytest.mark.process

FULL = os.environ.get("XJOBS_WORKFLOWS_SCALE", "") == "full"
#: 30 in `make test`: on a loaded 2-core host the kills alone cost it a minute
BATCHES = int(os.environ.get("XJOBS_CHAOS_BATCHES", "1000" if FULL else "30"))
MEMBERS = 10
KILL_EVERY = 4.0
VISIBILITY = "2s"
#: a run that writes no ledger row (no member or callback starts or ends) for this long is stuck
STALL = 60.0
#: the run's outer bound once enqueued, so that a livelock fails too (a stuck run fails sooner,
#: on STALL): a batch's eleven jobs take well under a second of an idle worker, and several
#: times that on a loaded host, where each kill's replacement and each suspect's child process
#: start Django afresh
DEADLINE = 3 * (90 + BATCHES * (0.9 if FULL else 0.5))


@pytest.mark.timeout(180 + DEADLINE)
def test_every_batch_callback_runs_once_after_its_last_member_under_sigkill(workers):
    """SPEC BATCH-07: under killed workers every batch gets its callbacks once, after its last
    member's end."""
    args = ("--queues", "default", "--concurrency", "4", "--poll-interval", "100ms")
    args = (*args, "--visibility-timeout", VISIBILITY)
    began = time.monotonic()
    running = [workers(*args) for _ in range(3)]
    prefix = uuid.uuid4().hex[:8]
    rng = random.Random(prefix)
    batches: dict[str, uuid.UUID] = {}
    for b in range(BATCHES):
        token = f"{prefix}-b{b}"
        with Batch(on_complete=jobs.batch_done, input={"token": token}) as batch:
            jobs.batch_member.enqueue_many(
                {
                    "token": f"{token}-m{m}",
                    "fail_attempts": 1 if rng.random() < 0.3 else 0,
                    "die": rng.random() < 0.1,
                    "hold": 0.2 if rng.random() < 0.1 else 0.0,
                }
                for m in range(MEMBERS)
            )
        batches[token] = batch.id

    kills = 0
    deadline = time.monotonic() + DEADLINE
    # the first kill once the workers run members (their start-up is slow on a loaded host)
    wait_for(
        lambda: Ledger.objects.filter(token__startswith=prefix).exists(),
        timeout=STALL * 2,
        what="a first member to run",
    )
    # at once: on an idle host 30 batches can all end before a first kill KILL_EVERY later
    next_kill = time.monotonic()
    tokens = list(batches)

    def callbacks_run() -> int:
        # batches whose callback ran: a callback killed after its ledger write runs again and
        # writes a second row, so rows are not batches
        runs = Ledger.objects.filter(token__startswith=prefix, phase__startswith="callback")
        return runs.values("token").distinct().count()

    def progress() -> str:
        by_state = defaultdict(int)
        for name, state in Job.objects.values_list("name", "state"):
            by_state[(name.rsplit(".", 1)[-1], state)] += 1
        pending = JobBatch.objects.filter(id__in=batches.values(), completed_at__isnull=True)
        return f"{callbacks_run()}/{BATCHES} callbacks ran; jobs {dict(by_state)}; " + (
            f"{pending.count()} batches pending, e.g. {list(pending.values()[:2])}"
        )

    def written() -> int:
        return Ledger.objects.filter(token__startswith=prefix).count()

    last_written, moved = written(), time.monotonic()
    while callbacks_run() < BATCHES:
        now = time.monotonic()
        assert now < deadline, f"not done within {DEADLINE:g}s: " + progress()
        if (rows := written()) != last_written:
            last_written, moved = rows, now
        assert now - moved < STALL, f"no ledger row written in {STALL:g}s: " + progress()
        # until every callback ran, or the next kill is due (the checks above fail the run)
        due = min(next_kill, deadline)
        wait_for(
            lambda due=due: callbacks_run() >= BATCHES or time.monotonic() >= due,
            timeout=KILL_EVERY + STALL,
            what="every callback, or the next kill",
        )
        if time.monotonic() >= next_kill and callbacks_run() < BATCHES:
            # one that is running members: a worker still starting up on a loaded host has
            # nothing to lose, and killing only those would stall the run
            working = set(
                Ledger.objects.filter(token__startswith=prefix)
                .values_list("pid", flat=True)
                .distinct()
            )
            victims = [w for w in running if w.proc.pid in working]
            if victims:
                running.remove(victims[0])
                victims[0].kill()  # SIGKILL: mid-claim, mid-run or mid-settle, wherever it was
                kills += 1
                running.append(workers(*args))
            next_kill = time.monotonic() + KILL_EVERY
    assert kills >= 1
    wall = time.monotonic() - began

    # one callback job per batch, never two, none missing
    callbacks = Job.objects.filter(name="tests.jobs.batch_done")
    by_token = defaultdict(list)
    for row in callbacks.filter(input__token__in=tokens):
        by_token[row.input["token"]].append(row)
    assert {t: len(rows) for t, rows in by_token.items() if len(rows) != 1} == {}
    assert set(by_token) == set(tokens)

    members = Job.objects.filter(name="tests.jobs.batch_member", batch_id__in=batches.values())
    states = defaultdict(lambda: defaultdict(int))
    for batch_id, state in members.values_list("batch_id", "state"):
        states[batch_id][state] += 1
    for token, batch_id in batches.items():
        [callback] = by_token[token]
        counts = callback.input["batch"]
        # the callback was given its members' final states, every member in one
        assert sum(states[batch_id].values()) == MEMBERS == counts["total"]
        assert (counts["done"], counts["dead"], counts["failed"]) == (
            states[batch_id]["done"],
            states[batch_id]["dead"],
            states[batch_id]["failed"],
        ), token
        # never before its last member's final state: its first run started after every
        # member's last ledger write (and a member's settle follows its last write)
        runs = Ledger.objects.filter(token=token, phase__startswith="callback")
        assert {r.phase.split()[1] for r in runs} == {str(callback.id)}
        first_run = runs.aggregate(at=Min("at"))["at"]
        last_member = Ledger.objects.filter(token__startswith=f"{token}-m").aggregate(at=Max("at"))[
            "at"
        ]
        assert first_run > last_member, token
    # the figures of a full-size run (`make workflows-full` shows them)
    print(
        f"\n{BATCHES} batches of {MEMBERS} members, {kills} kills, {wall:.0f}s: "
        f"{len(by_token)} callbacks once, 0 missing, 0 early"
    )
