"""Issue 12, items 1 and 4: a worker whose connections go silent never hangs, and a run stops at
its local deadline, before any other worker may claim its job.

A ``SilentProxy`` stands between worker A and PostgreSQL and, on command, stops forwarding
without closing a socket. Worker B reaches the database directly. The handlers write a file
ledger (A cannot write to the database once cut off); the job rows tell the rest. Waits are polls
with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from django_xjobs.management.lifecycle import EXIT_SHUTDOWN_TIMEOUT
from django_xjobs.models import Job
from django_xjobs.worker.watchdog import EXIT_STUCK
from tests import jobs
from tests.support.process import wait_for, worker_env
from tests.support.proxy import SilentProxy

pytestmark = pytest.mark.process

VISIBILITY = 3.0
FLEET = ("--queues", "default", "--poll-interval", "100ms", "--visibility-timeout", "3s")


@dataclass(frozen=True)
class Mark:
    token: str
    phase: str
    attempt: int
    pid: int
    at: float


def marks(path: Path) -> list[Mark]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        token, phase, attempt, pid, at = line.split()
        rows.append(Mark(token, phase, int(attempt), int(pid), float(at)))
    return rows


def phase(path: Path, token: str, name: str) -> list[Mark]:
    return [m for m in marks(path) if m.token == token and m.phase == name]


def done(ids: list[uuid.UUID]) -> bool:
    return Job.objects.filter(id__in=ids, state="done").count() == len(ids)


@pytest.fixture
def proxy() -> Iterator[SilentProxy]:
    silent = SilentProxy(worker_env()["DATABASE_URL"])
    yield silent
    silent.close()


def test_hang_03_04_a_settle_stuck_on_a_silent_connection_lets_the_job_go_and_ends_the_worker(
    workers, proxy, tmp_path
):
    """The settler's connection goes silent after the body returned. The heartbeat (on fresh
    connections, which still pass) renews the run only for the settle deadline, so the lease
    lapses and B takes the job; the watchdog then ends A with EXIT_STUCK, with the reason logged.
    Lost 0; A's body and B's never overlap; the row is done once (SPEC HANG-03/04)."""
    path = tmp_path / "ledger.txt"
    a = workers(*FLEET, "--concurrency", "2", "--stall-timeout", "20s", env=worker_env(proxy.url))
    warm = jobs.file_ledger.enqueue(token=f"warm-{uuid.uuid4()}", path=str(path)).id
    wait_for(lambda: done([warm]), timeout=30, what="A to settle once (its settler connects)")
    token = f"hang-{uuid.uuid4()}"
    job_id = jobs.file_ledger.enqueue(token=token, path=str(path), hold=1.0).id
    wait_for(lambda: phase(path, token, "start"), timeout=30, what="A to start the run")
    proxy.freeze()  # the connections open now go silent; new ones still pass
    frozen_at = time.monotonic()
    b = workers(*FLEET, "--concurrency", "2")

    wait_for(lambda: done([job_id]), timeout=40, what="B to take and finish the job")
    assert a.proc.poll() is None, "A exited before its renewals stopped: the watchdog, not HANG-03"
    assert a.saw("xjobs.worker.settle_overdue"), "".join(a.err)
    code, _, err = a.finish(timeout=60)
    assert code == EXIT_STUCK, err
    assert "xjobs.worker.stuck" in err and "section=" in err, err
    assert time.monotonic() - frozen_at < 20 + 30  # the stall bound, plus room for a busy host

    ends = phase(path, token, "end")
    assert [(m.attempt, m.pid) for m in ends] == [(1, a.proc.pid), (2, b.proc.pid)]
    a_end, b_start = ends[0], phase(path, token, "start")[1]
    assert a_end.at < b_start.at, "A's body and B's overlapped"
    row = Job.objects.get(id=job_id)
    assert (row.state, row.attempt) == ("done", 2)
    b.send(signal.SIGTERM)
    assert b.finish(timeout=60)[0] == 0


def test_lease_15_hang_05_a_partitioned_run_stops_before_b_claims_and_sigterm_exits_in_time(
    workers, proxy, tmp_path
):
    """A is cut off entirely while two runs hold. Each run's signal is aborted at its local
    deadline (last renewal sent + timeout - margin), before B can claim the job: every "stopped"
    of A precedes B's "start" (0 overlaps). A, still cut off, gets SIGTERM and exits within
    --shutdown-timeout with EXIT_SHUTDOWN_TIMEOUT, leaving its runs to their leases. Lost 0, no
    job completed twice (SPEC LEASE-15, HANG-05)."""
    path = tmp_path / "ledger.txt"
    a = workers(
        *FLEET,
        "--concurrency",
        "2",
        "--stall-timeout",
        "120s",  # the SIGTERM bound is under test here, not the watchdog
        "--shutdown-timeout",
        "4s",
        env=worker_env(proxy.url),
    )
    tokens = [f"part-{uuid.uuid4()}" for _ in range(2)]
    ids = [jobs.file_ledger.enqueue(token=t, path=str(path), hold=60.0).id for t in tokens]
    wait_for(lambda: all(phase(path, t, "start") for t in tokens), timeout=30, what="A's two runs")
    proxy.freeze(new=True)  # a partition: nothing passes, nothing is closed
    b = workers(*FLEET, "--concurrency", "2")

    wait_for(lambda: done(ids), timeout=40, what="B to take and finish both jobs")
    for token in tokens:
        stopped = phase(path, token, "stopped")
        assert [(m.attempt, m.pid) for m in stopped] == [(1, a.proc.pid)], marks(path)
        # B runs it, in its own process or, the run having died with A (a suspect, SPEC
        # LEASE-19), in the child B isolates it in: either way not in A
        b_start = next(m for m in phase(path, token, "start") if m.pid != a.proc.pid)
        assert stopped[0].at < b_start.at, f"A's run went on after B started: {marks(path)}"
        ends = phase(path, token, "end")
        assert [(m.attempt, m.pid) for m in ends] == [(2, b_start.pid)], "completed twice"
    assert a.saw("reason=deadline"), "".join(a.err)

    asked = time.monotonic()
    a.send(signal.SIGTERM)
    code, _, err = a.finish(timeout=60)
    waited = time.monotonic() - asked
    assert code == EXIT_SHUTDOWN_TIMEOUT, err
    assert "xjobs.worker.shutdown_timeout" in err, err
    assert "(most recent call first)" in err, err  # where the drain was stuck, every thread
    assert 4 <= waited < 4 + 20, waited  # the bound, plus room for a busy host
    b.send(signal.SIGTERM)
    assert b.finish(timeout=60)[0] == 0
