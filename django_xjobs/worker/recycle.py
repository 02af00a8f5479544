"""When a worker hands over to a fresh process: a supervised child past a ``--max-*-per-child``
limit, and any worker whose threads bodies past their timeout have held too long."""

from __future__ import annotations

import logging
import os
import re
import resource
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .. import log, metrics
from ..errors import InvariantError
from .worker import Worker, WorkerStats

#: the exit code a child leaves with after draining for a limit; the supervisor reads it back
EXIT_CODES = {
    "max_jobs": 81,
    "max_memory": 82,
    "max_abandoned": 83,
    "orphaned": 84,
    "abandoned_held": 85,
}
REASONS = {code: reason for reason, code in EXIT_CODES.items()}

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3}
_UNITS["gb"] = _UNITS["g"]


@dataclass(frozen=True)
class ChildLimits:
    """Past any of these a child stops claiming, drains and exits for a fresh one."""

    max_jobs: int | None = None
    #: resident memory, bytes
    max_memory: int | None = None
    #: bodies past their timeout that still run (SPEC EXEC-05): a hard time limit
    max_abandoned: int | None = None
    #: seconds bodies past their timeout may hold half a pool's threads or more (issue 25):
    #: any worker, supervised or not, checks it (XJOBS["ABANDONED_RECYCLE_AFTER"])
    abandoned_held_for: float | None = None

    def breached(self, stats: WorkerStats, rss: int) -> tuple[str, int, int] | None:
        """``(reason, limit, value)`` for the first limit passed, else ``None``."""
        runs = sum(n for outcome, n in stats.outcomes.items() if outcome != "shed")
        if self.max_jobs is not None and runs >= self.max_jobs:
            return "max_jobs", self.max_jobs, runs
        if self.max_abandoned is not None and stats.abandoned > self.max_abandoned:
            return "max_abandoned", self.max_abandoned, stats.abandoned
        if self.max_memory is not None and rss > self.max_memory:
            return "max_memory", self.max_memory, rss
        return None

    @property
    def any(self) -> bool:
        limits = (self.max_jobs, self.max_memory, self.max_abandoned, self.abandoned_held_for)
        return any(v is not None for v in limits)


class Recycler:
    """Watches a running worker from its own thread; past a limit, or once the supervisor is
    gone, it logs ``xjobs.worker.recycle`` and stops the worker (a drain, like SIGTERM)."""

    def __init__(
        self,
        worker: Worker,
        limits: ChildLimits,
        *,
        supervisor_pid: int | None = None,
        every: float = 0.2,
        rss: Callable[[], int] | None = None,
    ) -> None:
        self.worker = worker
        self.limits = limits
        self.supervisor_pid = supervisor_pid
        self.every = every
        self.rss = rss or resident_bytes
        self.reason: str | None = None
        #: monotonic time since which abandoned bodies have held half a pool or more
        self._held_since: float | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="xjobs-recycle", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.reason] if self.reason else 0

    def _watch(self) -> None:
        while not self._done.wait(self.every):
            if self.worker.draining:
                continue  # a signal got there first; the exit is an ordinary one
            verdict = self._verdict()
            if verdict is None:
                continue
            self.reason, limit, value = verdict
            metrics.inc("xjobs_worker_recycles_total", reason=self.reason)
            log.event(
                logging.WARNING if self.reason in ("orphaned", "abandoned_held") else logging.INFO,
                "xjobs.worker.recycle",
                worker=self.worker.worker_id,
                reason=self.reason,
                limit=limit,
                value=value,
            )
            self.worker.stop()
            return

    def _verdict(self) -> tuple[str, int, int] | None:
        if self.supervisor_pid is not None and os.getppid() != self.supervisor_pid:
            # the supervisor died without forwarding a signal: no one would replace this child
            return "orphaned", self.supervisor_pid, os.getppid()
        breached = self.limits.breached(
            self.worker.stats(), self.rss() if self.limits.max_memory else 0
        )
        return breached or self._held_too_long()

    def _held_too_long(self) -> tuple[str, int, int] | None:
        """Issue 25 item 3: bodies that ignore their timeout keep their threads (SPEC EXEC-05);
        once they have held half a pool or more for the bound, only a fresh process frees
        them. Less than half, the worker still makes way; a body that returns resets it."""
        bound = self.limits.abandoned_held_for
        if bound is None or not self.worker.held_by_abandoned():
            self._held_since = None
            return None
        now = time.monotonic()
        if self._held_since is None:
            self._held_since = now
        held = now - self._held_since
        return ("abandoned_held", round(bound), round(held)) if held >= bound else None


def resident_bytes() -> int:
    """This process's resident memory now (Linux), else its peak."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024  # bytes there, KiB elsewhere


def parse_size(raw: str, *, flag: str) -> int:
    """``"300MB"``, ``"1.5G"``, ``"512k"`` or bytes as a number; a one-line error otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", raw)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS or float(match.group(1)) <= 0:
        raise InvariantError(
            f"{flag} {raw!r} is not a memory size",
            hint='give a positive size such as "300MB", "1.5GB" or "512k"',
        )
    return int(float(match.group(1)) * _UNITS[unit])
