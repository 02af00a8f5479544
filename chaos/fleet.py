"""Three real ``manage.py xjobs_worker`` processes, a steady stream of ledger-writing jobs, and
the tally the ledger gives once the stream is drained.

Every wait is a poll with a deadline; the only fixed pauses are the stream's pace and a fault's
own length.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TypeVar

from django.db import connection
from django.db.utils import DatabaseError, InterfaceError

from django_xjobs.models import LIVE, Job
from tests.models import Ledger
from tests.support.process import ManageProcess, run_manage, worker_env

T = TypeVar("T")

#: the fleet's size and lease; CHAOS_THREADS and CHAOS_VISIBILITY run it at another size
WORKERS = 3
THREADS = int(os.environ.get("CHAOS_THREADS", "4"))
VISIBILITY = float(os.environ.get("CHAOS_VISIBILITY", "3"))  # short: a lapse shows in a scenario
HOLD = 0.5  # seconds each job holds its thread
RATE = 16.0  # jobs per second the stream enqueues
SETTINGS = "--settings=chaos.settings"  # after ManageProcess's own --settings: the last wins


def retrying(query: Callable[[], T], *, timeout: float = 30) -> T:
    """``query()``, again on a fresh connection while the database is away (a restart, an
    outage, a terminated backend), until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return query()
        except (DatabaseError, InterfaceError):
            connection.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


#: bounds the suite shortens when this checkout's worker has the option (they came with
#: issue 12): a drain or a stall that outlives them shows within one scenario
SHORT_OPTIONS = {"--shutdown-timeout": "8s", "--stall-timeout": "10s"}


@cache
def short_options() -> tuple[str, ...]:
    helped = run_manage("xjobs_worker", SETTINGS, "--help", url=os.environ["DATABASE_URL"])
    return tuple(
        f"{flag}={value}" for flag, value in SHORT_OPTIONS.items() if flag in helped.stdout
    )


@dataclass(frozen=True)
class Size:
    """A worker's threads, lease and poll: the suite's own, or a scenario's."""

    threads: int = THREADS
    visibility: float = VISIBILITY
    poll: float = 0.2


class Worker(ManageProcess):
    def __init__(
        self,
        name: str,
        url: str,
        *,
        default: bool = False,
        size: Size | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        if default:  # as the README runs it: no --concurrency, no bounds, no --processes
            super().__init__("xjobs_worker", SETTINGS, f"--worker-id={name}", env=worker_env(url))
            return
        size = size or Size()
        super().__init__(
            "xjobs_worker",
            SETTINGS,
            "--queues=default",
            f"--concurrency={size.threads}",
            f"--visibility-timeout={size.visibility:g}s",
            f"--poll-interval={size.poll * 1000:g}ms",
            f"--worker-id={name}",
            *short_options(),
            *extra,  # after the suite's own options: the last of a flag wins
            env=worker_env(url),
        )


@dataclass
class Fleet:
    """The workers of one scenario; ``url`` is what they connect to (the proxy's, for some)."""

    scenario: str
    url: str
    workers: list[Worker] = field(default_factory=list)
    retired: list[Worker] = field(default_factory=list)
    exits: list[str] = field(default_factory=list)

    def start(
        self,
        count: int = WORKERS,
        url: str | None = None,
        size: Size | None = None,
        extra: tuple[str, ...] = (),
    ) -> list[Worker]:
        started = [
            Worker(
                f"{self.scenario}-w{len(self.workers) + len(self.retired) + i + 1}",
                url or self.url,
                size=size,
                extra=extra,
            )
            for i in range(count)
        ]
        self.workers.extend(started)
        return started

    def start_default(self) -> Worker:
        """One worker started with its defaults only."""
        worker = Worker(
            f"{self.scenario}-w{len(self.workers) + len(self.retired) + 1}", self.url, default=True
        )
        self.workers.append(worker)
        return worker

    def busiest(self, prefix: str) -> Worker:
        """The worker holding the most running jobs of the stream now (the first if none)."""
        holders = Counter(
            retrying(
                lambda: list(
                    Job.objects.filter(
                        idempotency_key__startswith=f"chaos:{prefix}", state="running"
                    ).values_list("claimed_by", flat=True)
                )
            )
        )
        by_name = {w.name: w for w in self.workers}
        for name, _ in holders.most_common():
            if name in by_name:
                return by_name[name]
        return self.workers[0]

    def kill(self, worker: Worker) -> None:
        worker.kill()
        self.workers.remove(worker)
        self.retired.append(worker)

    def stop(self, grace: float = 12) -> None:
        """SIGTERM each live worker; one still there after ``grace`` s is sent SIGABRT (its
        threads' stacks land in its log) and then killed, and the exit says so."""
        for worker in self.workers:
            if worker.proc.poll() is None:
                worker.send(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for worker in self.workers:
            try:
                worker.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                code = worker.proc.returncode
                self.exits.append(f"{worker.name}:{code}" if code else "")
            except subprocess.TimeoutExpired:
                worker.send(signal.SIGABRT)
                try:
                    worker.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    worker.kill()
                self.exits.append(f"{worker.name}:hung>{grace:.0f}s")
            worker._join()
        self.retired.extend(self.workers)
        self.workers.clear()

    def log_lines(self) -> int:
        return sum(len(w.err) for w in self.retired + self.workers)

    def save_logs(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for worker in self.retired + self.workers:
            (directory / f"{worker.name}.log").write_text("".join(worker.err))


class Stream(threading.Thread):
    """Enqueues ``RATE`` jobs a second until stopped. A token counts as enqueued once its
    enqueue returned; one that raised may still have committed, so the tally also reads rows."""

    def __init__(self, prefix: str, rate: float = RATE) -> None:
        super().__init__(name=f"stream-{prefix}", daemon=True)
        self.prefix = prefix
        self.interval = 1 / rate
        self.tokens: list[str] = []
        self.failures = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        from chaos.jobs import stream

        try:
            while not self.stopping.wait(self.interval):
                token = f"{self.prefix}{uuid.uuid4().hex[:12]}"
                try:
                    stream.enqueue(token=token, hold=HOLD)
                except Exception:  # X_DRIVER_UNAVAILABLE and kin: the database is away
                    self.failures += 1
                    connection.close()
                    continue
                self.tokens.append(token)
        finally:
            connection.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=30)


def drain(prefix: str, timeout: float) -> bool:
    """Wait until no job of the stream is live; False past ``timeout`` (some are stuck)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = retrying(
            lambda: Job.objects.filter(
                idempotency_key__startswith=f"chaos:{prefix}", state__in=LIVE
            ).exists()
        )
        if not live:
            return True
        time.sleep(0.2)
    return False


@dataclass(frozen=True)
class Tally:
    """What the ledger and the rows say about one scenario's stream."""

    jobs: int
    done: int
    lost: int  # enqueued, and not done: no row, or a terminal row that is not done
    rerun: int  # jobs whose body started more than once
    twice: int  # jobs whose body recorded its end more than once
    stuck: int  # still live once the drain gave up
    crashes: int  # runs the rows counted as crashes (attempt history "crashed": died alone)
    recovery: (
        float | None
    )  # seconds, see ``tally``; None while a job pending at the fault is not done
    lost_reasons: tuple[str, ...] = ()
    stuck_holders: tuple[str, ...] = ()


def tally(prefix: str, enqueued: list[str], fault_at: float) -> Tally:
    """Count the stream's jobs. Recovery: the longest time from the fault's start (``fault_at``,
    a Unix time) until a job that was pending then (created before, done after) was done."""
    rows = retrying(
        lambda: list(
            Job.objects.filter(idempotency_key__startswith=f"chaos:{prefix}").values(
                "idempotency_key",
                "state",
                "created_at",
                "updated_at",
                "last_error",
                "claimed_by",
                "errors",
            )
        )
    )
    marks = retrying(
        lambda: list(Ledger.objects.filter(token__startswith=prefix).values_list("token", "phase"))
    )
    by_token = {row["idempotency_key"].removeprefix("chaos:"): row for row in rows}
    tokens = set(by_token) | set(enqueued)
    starts = Counter(token for token, phase in marks if phase == "start")
    ends = Counter(token for token, phase in marks if phase == "done")
    live = {str(state) for state in LIVE}
    stuck = {t for t, row in by_token.items() if row["state"] in live}
    done = {t for t, row in by_token.items() if row["state"] == "done" and ends[t] >= 1}
    lost = tokens - done - stuck  # no row, or a terminal row whose body never recorded its end
    fault = datetime.fromtimestamp(fault_at, UTC)
    pending = [row for row in rows if row["created_at"] <= fault]
    recovery: float | None = max(
        [
            (row["updated_at"] - fault).total_seconds()
            for row in pending
            if row["state"] == "done" and row["updated_at"] > fault
        ],
        default=0.0,
    )
    if any(row["state"] != "done" for row in pending):
        recovery = None
    reasons = Counter(
        "no row"
        if t not in by_token
        else f"{by_token[t]['state']}: {(by_token[t]['last_error'] or '').splitlines()[:1]}"
        for t in lost
    )
    return Tally(
        jobs=len(tokens),
        done=len(done),
        lost=len(lost),
        rerun=sum(1 for t in tokens if starts[t] > 1),
        twice=sum(1 for t in tokens if ends[t] > 1),
        stuck=len(stuck),
        crashes=sum(
            1 for row in rows for entry in row["errors"] or () if entry.get("outcome") == "crashed"
        ),
        recovery=recovery,
        lost_reasons=tuple(f"lost {n}: {reason}" for reason, n in reasons.most_common(3)),
        stuck_holders=tuple(
            f"stuck {n}: {state} held by {holder}"
            for (state, holder), n in Counter(
                (by_token[t]["state"], by_token[t]["claimed_by"]) for t in stuck
            ).most_common(3)
        ),
    )
