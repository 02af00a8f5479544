"""What a limited claim is told, and the rules both drivers decide it by (SPEC LIMIT-10..16).

``claim(limits=ClaimLimits(...))`` takes only runs within their limits: a run over one is never
claimed, so nothing is handed back. The limits are declared in code (``@job(limit_key=...,
concurrency=..., rate_limit=...)``), so every worker of a deploy passes the same ones; an
operator's cap on a queue (``set_queue_limit``) and a key's pause (``RateLimited``) are stored,
and read by the claim itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

#: seconds a limit key stays listed (``key_usage``) after its last use; retention prunes an idle
#: key's row only after it (``prune_limit_keys``), so what operators see is never cut short
KEY_SHOWN_FOR = 86400.0


@dataclass(frozen=True)
class JobLimit:
    """One job's limits, per key: at most ``concurrency`` runs at once, at most ``rate`` starts
    in any ``window`` seconds (None: no such cap)."""

    name: str
    concurrency: int | None = None
    rate: int | None = None
    window: float | None = None


@dataclass(frozen=True)
class ClaimLimits:
    """``jobs``: the limits of the jobs whose runs carry a key. ``plain_queues``: the queues
    in which runs with no key are looked for too; a queue every job of which declares a key is
    left out (its runs without one are only those enqueued before the key was declared, looked
    for on the worker's sweep among the first waiting rows: ``stray_queues``), so a throttled
    backlog is never walked row by row."""

    jobs: tuple[JobLimit, ...] = ()
    plain_queues: tuple[str, ...] = ()
    #: queues of keyed jobs where runs with no key are looked for among the first ``scan()``
    #: waiting rows (the worker's sweep)
    stray_queues: tuple[str, ...] = ()
    #: XJOBS["FAIR_SHARE"]: take the keys' runs in turns (each key's first, then each key's
    #: second...), priority and run_at deciding within a turn, instead of priority first
    fair: bool = False

    @staticmethod
    def scan(limit: int) -> int:
        """How many waiting rows a stray search reads at most."""
        return 10 * limit + 100

    def params(self) -> dict[str, list[object]]:
        return {
            "names": [j.name for j in self.jobs],
            "concurrency": [j.concurrency for j in self.jobs],
            "rates": [j.rate for j in self.jobs],
            "windows": [j.window for j in self.jobs],
        }

    def of(self, key: str) -> JobLimit | None:
        name = key.partition("\x1f")[0]
        for job in self.jobs:
            if job.name == name:
                return job
        return None


@dataclass(frozen=True)
class KeyUsage:
    """One limit key as an operator sees it: its runs now, its starts still in its window, and
    a pause (``RateLimited``) still to run out."""

    key: str
    running: int
    starts: int
    paused_until: datetime | None = None
    last_start: datetime | None = None


def room(
    limit: JobLimit | None, running: int, starts: Sequence[datetime], now: datetime
) -> int | None:
    """How many more runs of a key may start now; None: no cap."""
    if limit is None:
        return None
    rooms = []
    if limit.concurrency is not None:
        rooms.append(limit.concurrency - running)
    if limit.rate is not None and limit.window is not None:
        rooms.append(limit.rate - in_window(starts, limit.window, now))
    return min(rooms) if rooms else None


def in_window(starts: Sequence[datetime], window: float, now: datetime) -> int:
    """Starts newer than ``now - window``: a start counts for exactly ``window`` seconds."""
    return sum(1 for at in starts if (now - at).total_seconds() < window)
