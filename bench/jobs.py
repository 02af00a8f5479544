"""The benchmark's jobs (autodiscovered: ``bench`` is an installed app).

The worker runs in this process, on threads, so the latency job can report into a module-level
dict that ``bench.run`` reads.
"""

from __future__ import annotations

import threading
import time

from django_xjobs import job

_lock = threading.Lock()
_latencies: dict[int, float] = {}


@job(idempotency_key="noop:{n}")
def noop(ctx, n: int):
    return None


@job(idempotency_key="lat:{n}")
def latency(ctx, n: int, enqueued_at: float):
    """Record how long after ``enqueued_at`` (a ``time.time()``) the handler started."""
    started = time.time()
    with _lock:
        _latencies[n] = started - enqueued_at


def latencies() -> dict[int, float]:
    """A copy of the recorded latencies, in seconds, by ``n``."""
    with _lock:
        return dict(_latencies)


def reset_latencies() -> None:
    with _lock:
        _latencies.clear()
