"""The benchmark's jobs and backfills (autodiscovered: ``bench`` is an installed app).

The worker runs in this process, on threads, so the latency job can report into a module-level
dict that ``bench.run`` reads.
"""

from __future__ import annotations

import threading
import time

from django_xjobs import backfill, job

from .models import Row

#: rows per page of the W4 backfills
BACKFILL_BATCH = 1000

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


@job(idempotency_key="evt:{n}")
def event_waiter(ctx, n: int):
    """Wait for ``bench.released`` of ``n`` (the default event_poll, 30 s), then record how long
    after its publisher's ``sent_at`` (a ``time.time()``) the handler went on."""
    data = ctx.step.wait_for_event("released", "bench.released", match={"n": n})
    resumed = time.time()
    with _lock:
        _latencies[n] = resumed - data["sent_at"]


def latencies() -> dict[int, float]:
    """A copy of the recorded latencies, in seconds, by ``n``."""
    with _lock:
        return dict(_latencies)


def reset_latencies() -> None:
    with _lock:
        _latencies.clear()


@backfill(
    name="bench.backfill_noop",
    queryset=lambda: Row.unchanged.all(),
    batch=BACKFILL_BATCH,
    rate=1e6,  # no pace: the figure is the pass's own
)
def backfill_noop(ctx, rows):
    """Changes nothing: a page costs only what the pass does around the handler."""


@backfill(
    name="bench.backfill_update",
    queryset=lambda: Row.objects.filter(value__isnull=True),
    batch=BACKFILL_BATCH,
    rate=1e6,
)
def backfill_update(ctx, rows):
    """Fills ``value`` the way the backfill how-to does: one bulk_update per page."""
    for row in rows:
        row.value = row.pk
    Row.objects.bulk_update(rows, ["value"])
