"""Failure semantics across real worker processes: fleet caps, SIGKILL, SIGSTOP, crash loops.

Each test starts real ``manage.py xjobs_worker`` processes (helpers from tests.support.process) and
judges the outcome from what the jobs wrote themselves (the Ledger) and from the job rows. Waits
are polls with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import signal
import time
import uuid
from dataclasses import dataclass, replace
from datetime import datetime

import pytest
from django.db.models.functions import Now
from django.utils import timezone

from django_xjobs import cancel_job, conf
from django_xjobs.models import Job, JobLease, JobStep, Worker
from tests import jobs
from tests.models import Ledger
from tests.support.process import WorkerProcess, ledger, wait_for

pytestmark = pytest.mark.process

FLEET = ("--queues", "default", "--poll-interval", "100ms")


@dataclass(frozen=True)
class LedgerRun:
    """One run of ``tests.jobs.exclusive`` as its own ledger rows tell it."""

    token: str
    attempt: int
    pid: int
    start: datetime
    end: datetime | None  # None: the run never reached its end (its worker died)


def exclusive_runs(tokens: list[str]) -> list[LedgerRun]:
    """Pair each run's "start" with its "end" (same token, attempt and pid), in ``at`` order."""
    rows = Ledger.objects.filter(token__in=tokens, phase__in=("start", "end")).order_by("at", "id")
    starts: dict[tuple[str, int, int], datetime] = {}
    ends: dict[tuple[str, int, int], datetime] = {}
    for row in rows:
        key = (row.token, row.attempt, row.pid)
        target = starts if row.phase == "start" else ends
        assert key not in target, f"two {row.phase!r} rows for one run {key}"
        target[key] = row.at
    assert set(ends) <= set(starts), f"an end without a start: {set(ends) - set(starts)}"
    return sorted(
        (LedgerRun(*key, start=at, end=ends.get(key)) for key, at in starts.items()),
        key=lambda run: run.start,
    )


def assert_no_overlap(runs: list[LedgerRun]) -> None:
    """SPEC SLOT-03, SE-24 with concurrency=1: for every pair of runs, one ended at or before
    the other started. Every run passed here must have an end (or an end stood in for it)."""
    for i, a in enumerate(runs):
        for b in runs[i + 1 :]:
            assert a.end is not None and b.end is not None
            assert a.end <= b.start or b.end <= a.start, f"two runs overlap:\n  {a}\n  {b}"


def all_done(ids: list[uuid.UUID]) -> bool:
    return Job.objects.filter(id__in=ids, state="done").count() == len(ids)


def live_exclusive_slots() -> list[JobLease]:
    return list(JobLease.objects.filter(lease_key="job:exclusive", expires_at__gt=Now()))


def stop_all(*processes: WorkerProcess) -> list[str]:
    """SIGTERM every live process, then require a clean drain (exit 0) from each."""
    for process in processes:
        # a replacement started a moment ago may not have its SIGTERM handler yet (a loaded
        # machine boots Django slowly): the default action would end it with -15, not a drain
        wait_for(
            lambda p=process: p.saw("xjobs.worker.started") or p.proc.poll() is not None,
            what="the worker to start before it is told to drain",
        )
        process.send(signal.SIGTERM)
    errors = []
    for process in processes:
        code, _, err = process.finish()
        assert code == 0, err
        errors.append(err)
    return errors


def test_slot_02_03_se_24_fleet_concurrency_1_holds_across_three_processes(workers):
    """Eight ``exclusive`` jobs (concurrency=1) on three workers of four threads each: the fleet
    slot in x_job_leases, not any one process, lets exactly one run at a time. The runs that
    lost the race for the slot are shed back without spending an attempt (SPEC WORK-07/08)."""
    procs = [workers(*FLEET, "--concurrency", "4", "--visibility-timeout", "3s") for _ in range(3)]
    # all three up before the first job: a process that starts late on a busy host would find
    # the eight runs (2.4 s of work) already done by the first
    wait_for(
        lambda: Worker.objects.filter(expires_at__isnull=False).count() == 3,
        timeout=60,
        what="all three workers to be present",
    )
    tokens = [f"fleet-{i}-{uuid.uuid4()}" for i in range(8)]
    ids = [jobs.exclusive.enqueue(token=token, hold=0.3).id for token in tokens]
    wait_for(lambda: all_done(ids), timeout=60, what="all eight exclusive jobs")
    stop_all(*procs)

    runs = exclusive_runs(tokens)
    assert_no_overlap(runs)
    # exactly once: one start and one end per token, each on its first attempt
    assert sorted(run.token for run in runs) == sorted(tokens)
    for token in tokens:
        assert len(ledger(token, "end")) == 1, token
    assert {run.attempt for run in runs} == {1}
    assert set(Job.objects.filter(id__in=ids).values_list("attempt", "result")) == {(1, 1)}
    # the cap did the serialising across processes, not one worker doing everything
    pids = {run.pid for run in runs}
    assert pids <= {p.proc.pid for p in procs}
    assert len(pids) >= 2, f"every run landed on one worker ({pids}); the cap was not exercised"
    assert live_exclusive_slots() == []  # every slot released on settle (SPEC SLOT-02)


def test_slot_06_se_24_the_cap_still_holds_after_the_slot_holder_is_sigkilled(workers):
    """SIGKILL the worker holding the only slot: nobody else starts while its slot row is live;
    once slot and job lease expire (TTL = visibility timeout) the job is re-run (attempt 2) and
    the cap keeps holding for everything after it (SPEC SLOT-06: an expired slot is takeable).

    ``exclusive`` holds on every attempt, so the long job holds 3 s (not 30 s): long enough to
    be killed mid-run, short enough that its re-run does not dominate the suite's runtime."""
    long_token = f"holder-{uuid.uuid4()}"
    short_tokens = [f"short-{i}-{uuid.uuid4()}" for i in range(2)]
    long_id = jobs.exclusive.enqueue(token=long_token, hold=3.0).id
    ids = [long_id, *(jobs.exclusive.enqueue(token=t, hold=0.2).id for t in short_tokens)]
    args = (*FLEET, "--concurrency", "2", "--visibility-timeout", "2s")
    procs = [workers(*args), workers(*args)]

    [started] = wait_for(lambda: ledger(long_token, "start"), timeout=30, what="the long run")
    [victim] = [p for p in procs if p.proc.pid == started.pid]
    victim.send(signal.SIGKILL)
    victim.finish()
    killed_at = timezone.now()  # its slot (renewed < 2 s ago) is certainly still live here
    survivor = next(p for p in procs if p is not victim)
    replacement = workers(*args)

    wait_for(lambda: all_done(ids), timeout=60, what="the re-run and the short jobs")
    stop_all(survivor, replacement)

    runs = exclusive_runs([long_token, *short_tokens])
    [killed] = [run for run in runs if run.end is None]
    assert (killed.token, killed.attempt, killed.pid) == (long_token, 1, victim.proc.pid)
    # the killed run occupied the slot at least until the kill: treat that as its end
    assert_no_overlap([*(run for run in runs if run.end), replace(killed, end=killed_at)])
    rerun = [run for run in runs if run.token == long_token and run.end is not None]
    assert [
        # the re-run is a suspect's (its worker died with it): alone, in a child of the worker
        # that took it (SPEC LEASE-19), so only the pid it did not run in is known
        (run.attempt, run.pid != victim.proc.pid)
        for run in rerun
    ] == [(2, True)]
    for token in (long_token, *short_tokens):
        assert len(ledger(token, "end")) == 1, token
    row = Job.objects.get(id=long_id)
    assert (row.state, row.attempt, row.result) == ("done", 2, 2)
    assert live_exclusive_slots() == []


@pytest.mark.parametrize("resume", ["after_b_finished", "while_b_runs"])
def test_lease_09_11_q_01_a_resumed_worker_writes_nothing_to_the_job_row(workers, resume):
    """Worker A is SIGSTOPped mid-run past its 1 s lease; B re-claims (attempt 2). A is resumed
    either once B has finished, or while B is still holding the row (the harder case, DESIGN
    Q-01: there only the lease token tells A's settle from B's, since the row is ``running``).
    A's lease is reported lost or its settle refused, and nothing it sends lands: the row ends
    with B's result and attempt, and no later write (updated_at) follows B's ack (SPEC
    LEASE-09/11, STATE-01); A's slot renewal revives no slot (SE-08). A's own "end" ledger row
    does land: that is the job body's direct ORM write, which no lease can fence."""
    token = f"stopped-{uuid.uuid4()}"
    # while_b_runs: B's run holds the row until this test has judged A's late writes
    gated = resume == "while_b_runs"
    job_id = jobs.exclusive.enqueue(token=token, hold=3.0, rerun_gated=gated).id
    a = workers(*FLEET, "--visibility-timeout", "1s", "--worker-id", f"a-{token}")
    wait_for(lambda: ledger(token, "start"), timeout=30, what="A to start")
    a.send(signal.SIGSTOP)
    try:
        # B's own lease is longer: it runs the job as a suspect, in a child (SPEC LEASE-19),
        # which a cancel stops a third of a lease later, and its step two must run by then
        b = workers(*FLEET, "--visibility-timeout", "6s", "--worker-id", f"b-{token}")
        if resume == "after_b_finished":
            wait_for(lambda: Job.objects.get(id=job_id).state == "done", what="B's run")
        else:
            wait_for(lambda: ledger(token, "start")[1:], what="B to start")
    finally:
        a.send(signal.SIGCONT)
    wait_for(lambda: [r for r in ledger(token, "end") if r.pid == a.proc.pid], what="A's late end")
    err_a = stop_all(a)[0]  # the drain returns once A's settle was tried
    if resume == "while_b_runs":
        row = Job.objects.get(id=job_id)
        assert not [r for r in ledger(token, "end") if r.pid != a.proc.pid], "B ended first"
        assert (row.state, row.attempt, row.claimed_by) == ("running", 2, f"b-{token}")
        assert row.result is None and row.last_error is None
        Ledger.objects.create(token=token, phase="release", attempt=0, pid=0)  # B may end now
        wait_for(lambda: Job.objects.get(id=job_id).state == "done", what="B's run")
    stop_all(b)

    assert "xjobs.lease.lost" in err_a or "xjobs.job.settle_refused" in err_a, err_a
    row = Job.objects.get(id=job_id)
    fields = ("state", "attempt", "result", "last_error", "stop_reason", "claimed_by")
    assert [getattr(row, f) for f in fields] == ["done", 2, 2, None, None, None]
    # B's run is a suspect's (A stalled past its lease with it): it ran in a child of B (SPEC
    # LEASE-19), so B's rows are the ones A did not write
    b_end = next(r for r in ledger(token, "end") if r.pid != a.proc.pid)
    a_end = next(r for r in ledger(token, "end") if r.pid == a.proc.pid)
    assert row.updated_at >= b_end.at  # B's ack is the row's last write ...
    if resume == "after_b_finished":
        assert row.updated_at < a_end.at  # ... and nothing A sent after resuming landed
    runs = exclusive_runs([token])
    assert [(run.attempt, run.pid == a.proc.pid) for run in runs] == [(1, True), (2, False)]
    assert live_exclusive_slots() == []


def test_step_17_cancel_05_q_01_a_resumed_worker_writes_no_step_while_b_holds_the_job(workers):
    """``step_then_wait`` records step "one", then waits on its signal. A is SIGSTOPped in that
    wait past its 1 s lease; B re-claims (attempt 2), replays "one" and waits in turn. A is
    resumed while B still holds the row: A's heartbeat reports the lapse (LEASE-06/11), its
    signal wakes the body, whose step "two" runs but whose write is refused (STEP-17, SE-21),
    and whose settle is refused by the lease token (Q-01). The row and the step records stay
    exactly as B left them. B is then cancelled; its step "two" is refused too (CANCEL-05)."""
    token = f"stopped-steps-{uuid.uuid4()}"
    job_id = jobs.step_then_wait.enqueue(token=token).id
    a = workers(*FLEET, "--visibility-timeout", "1s", "--worker-id", f"a-{token}")
    run_id = Job.objects.get(id=job_id).run_id  # stable across attempts (SPEC STEP-19)
    wait_for(lambda: ledger(token, "one"), timeout=30, what="A's step one")
    wait_for(lambda: JobStep.objects.filter(run_id=run_id).exists(), what="step one's record")
    a.send(signal.SIGSTOP)
    try:
        b = workers(*FLEET, "--visibility-timeout", "1s", "--worker-id", f"b-{token}")
        held_by_b = wait_for(
            lambda: Job.objects.filter(id=job_id, claimed_by=f"b-{token}", attempt=2).first(),
            what="B to re-claim",
        )
        steps_before = list(JobStep.objects.filter(run_id=run_id).values())
    finally:
        a.send(signal.SIGCONT)
    wait_for(lambda: ledger(token, "two"), what="A's step two to run after resuming")
    err_a = stop_all(a)[0]

    assert "xjobs.lease.lost" in err_a, err_a
    after = Job.objects.get(id=job_id)
    fields = ("state", "attempt", "claimed_by", "lease_token", "last_error", "result")
    assert [getattr(after, f) for f in fields] == [getattr(held_by_b, f) for f in fields]
    assert after.state == "running"
    assert list(JobStep.objects.filter(run_id=run_id).values()) == steps_before
    assert [(s["name"], s["status"]) for s in steps_before] == [("one", "completed")]
    assert [(r.attempt, r.pid) for r in ledger(token, "two")] == [(1, a.proc.pid)]

    # B runs it as a suspect, in a child (SPEC LEASE-19): its rows are those A did not write.
    # Cancelled once its body waits (a child starts a fresh interpreter first), its step two
    # runs and its write is refused
    wait_for(lambda: [r for r in ledger(token, "waiting") if r.attempt == 2], what="B's wait")
    cancel_job(job_id, reason="test over")
    wait_for(lambda: [r for r in ledger(token, "two") if r.pid != a.proc.pid], what="B to stop")
    stop_all(b)
    assert Job.objects.get(id=job_id).state == "cancelled"
    assert [s.name for s in JobStep.objects.filter(run_id=run_id)] == ["one"]
    assert [(r.attempt, r.pid) for r in ledger(token, "one")] == [(1, a.proc.pid)]  # B replayed


class Supervisor:
    """Keeps ``size`` workers alive: each one that has exited is counted and replaced."""

    def __init__(self, start, args: tuple[str, ...], size: int = 2) -> None:
        self.start, self.args, self.size = start, args, size
        self.started: list[WorkerProcess] = []
        self.live: list[WorkerProcess] = []
        self.deaths: list[int | None] = []

    def reap(self) -> None:
        for process in list(self.live):
            if process.proc.poll() is not None:
                self.live.remove(process)
                self.deaths.append(process.proc.returncode)

    def keep_up(self) -> None:
        self.reap()
        while len(self.live) < self.size:
            process = self.start(*self.args)
            self.started.append(process)
            self.live.append(process)

    def run_until(self, condition, *, timeout: float, max_started: int, what: str) -> None:
        """Supervise until ``condition()``; fail past ``timeout`` or ``max_started`` workers."""
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {self.deaths}"
            self.keep_up()
            assert len(self.started) <= max_started, f"a crash loop: {self.deaths}"
            time.sleep(0.05)
        self.reap()  # a worker killed just before the condition held

    def stop(self) -> None:
        stop_all(*self.live)


def settled(ids: list[uuid.UUID]) -> bool:
    """No job of ``ids`` is live any more (done, dead, failed or cancelled)."""
    live = ("ready", "delayed", "running", "suspended")
    return not Job.objects.filter(id__in=ids, state__in=live).exists()


def crashed(row: Job) -> None:
    """The row was dead-lettered by the crash bound: its runs died alone, in the child process
    each was isolated in, ``MAX_LEASE_EXPIRIES`` times (SPEC LEASE-17)."""
    assert (row.state, row.stop_reason) == ("dead", "terminal"), row.last_error
    assert row.last_error.startswith("X_JOB_CRASHED"), row.last_error
    assert "died alone in a child process" in row.last_error, row.last_error


def test_a_job_that_kills_every_worker_is_dead_lettered_and_the_rest_keep_flowing(workers):
    """A poison job SIGKILLs each process that runs it; this test supervises two workers and
    replaces each that dies. Its first run takes one worker down; from then on it is a suspect,
    run alone in a child process, whose death is its own crash: after MAX_LEASE_EXPIRIES of them
    it is dead-lettered as X_JOB_CRASHED, and no other worker died (SPEC LEASE-17/19). The ten
    ``ok`` jobs enqueued behind it all finish."""
    poison_id = jobs.kills_its_worker.enqueue(n=int(uuid.uuid4().int % 10**9)).id
    ok_ids = [jobs.ok.enqueue(n=int(uuid.uuid4().int % 10**9)).id for _ in range(10)]
    fleet = Supervisor(workers, (*FLEET, "--concurrency", "2", "--visibility-timeout", "2s"))
    fleet.run_until(
        lambda: Job.objects.get(id=poison_id).state == "dead",
        timeout=90,
        max_started=4,
        what="the poison job to be dead-lettered",
    )
    wait_for(lambda: settled(ok_ids), timeout=30, what="the ok jobs to settle")
    fleet.reap()
    fleet.stop()

    crashed(Job.objects.get(id=poison_id))
    expiries = conf.get().max_lease_expiries
    assert f"the last {expiries} run(s)" in Job.objects.get(id=poison_id).last_error
    # one worker process died, the one its first run shared; every later run died in a child
    assert fleet.deaths == [-signal.SIGKILL], fleet.deaths
    not_done = list(
        Job.objects.filter(id__in=ok_ids).exclude(state="done").values_list("state", "last_error")
    )
    assert not_done == [], f"ok jobs that did not finish: {not_done}"


def test_a_bystander_claimed_with_the_poison_job_is_not_dead_lettered_with_it(workers):
    """The deterministic form of the bystander case: a ``ledger`` job that holds 2 s on every
    attempt is claimed in the same claim as the poison job (both due, ``--concurrency 2``), so
    it is in flight each time the poison kills the worker, and the two leases lapse together.
    The bystander never misbehaved; it must not share the poison's X_JOB_CRASHED verdict: it runs
    alone once, in a child, and completes (SPEC LEASE-18)."""
    poison_id = jobs.kills_its_worker.enqueue(n=int(uuid.uuid4().int % 10**9)).id
    token = f"bystander-{uuid.uuid4()}"
    bystander_id = jobs.ledger.enqueue(token=token, hold=2.0, hold_attempts=10).id
    # 3 s of lease for a 2 s hold: on a loaded machine a 1 s lease can lapse under a live run,
    # and a run whose lease keeps lapsing is (rightly) counted as stalling
    fleet = Supervisor(workers, (*FLEET, "--concurrency", "2", "--visibility-timeout", "3s"))
    fleet.run_until(
        lambda: settled([poison_id, bystander_id]),
        timeout=60,
        max_started=6,
        what="both jobs to settle",
    )
    fleet.stop()

    crashed(Job.objects.get(id=poison_id))
    row = Job.objects.get(id=bystander_id)
    assert row.state == "done", f"the bystander ended {row.state}: {row.last_error}"
    assert row.lease_expiries == 0
    assert len(ledger(token, "done")) == 1
