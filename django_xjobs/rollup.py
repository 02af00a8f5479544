"""The rollup: what ended, per minute, queue, job name and outcome, with counts and run-time and
wait buckets, written by the settle statement itself (no extra round trip per job, no scan of
``x_jobs`` per page view). The overview page, ``xjobs stats --history`` style reads and their
percentiles come from here; ``XJOBS["ROLLUP_RETENTION"]`` bounds it (worker/retention.py).

Run time is the attempt's claim to its settle; wait is the attempt's due time (``run_at``: the
enqueue, the scheduled time or the retry's backoff end) to its claim.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

#: bucket lower bounds, in seconds, shared by the SQL (``width_bucket``) and the memory driver:
#: bucket 0 is below the first bound, bucket i is [BOUNDS[i-1], BOUNDS[i]), the last is open
BOUNDS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)
#: how each settle is counted; a suspension, a shed run and a hand-back without a failure are not
OUTCOMES = ("done", "retried", "failed", "dead")


def bucket_of(seconds: float) -> int:
    """The bucket of ``seconds``: what PostgreSQL's ``width_bucket(seconds, BOUNDS)`` answers."""
    return bisect_right(BOUNDS, seconds)


@dataclass(frozen=True)
class RollupRow:
    """One minute of one queue, job name and outcome (summed over the writers' shards)."""

    minute: datetime
    queue: str
    name: str
    outcome: str
    count: int
    run_seconds: float
    wait_seconds: float
    run_buckets: tuple[int, ...]
    wait_buckets: tuple[int, ...]


def merged(rows: Iterable[RollupRow]) -> RollupRow | None:
    """The rows added together (their minute, queue, name and outcome those of the first)."""
    total: RollupRow | None = None
    for row in rows:
        if total is None:
            total = row
            continue
        total = RollupRow(
            total.minute,
            total.queue,
            total.name,
            total.outcome,
            total.count + row.count,
            total.run_seconds + row.run_seconds,
            total.wait_seconds + row.wait_seconds,
            _add(total.run_buckets, row.run_buckets),
            _add(total.wait_buckets, row.wait_buckets),
        )
    return total


def _add(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def quantile(buckets: Sequence[int], q: float) -> float | None:
    """The ``q`` quantile (0..1) of the counts in ``buckets``, as the upper bound of the bucket
    it falls in (the last, open bucket answers its lower bound); None when nothing was counted.
    The answer is a bucket bound, as Prometheus's ``histogram_quantile`` without interpolation."""
    total = sum(buckets)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for index, count in enumerate(buckets):
        seen += count
        if seen >= rank and count:
            return BOUNDS[min(index, len(BOUNDS) - 1)]
    return BOUNDS[-1]  # pragma: no cover - the loop always reaches the rank


def combine(rows: Iterable[RollupRow]) -> list[RollupRow]:
    """``rows`` with those of the same minute, queue, name and outcome (one per writer's shard)
    added together, in (minute, queue, name, outcome) order."""
    groups: dict[tuple[datetime, str, str, str], list[RollupRow]] = {}
    for row in rows:
        groups.setdefault((row.minute, row.queue, row.name, row.outcome), []).append(row)
    return [total for key in sorted(groups) if (total := merged(groups[key])) is not None]


def ended(
    minute: datetime, queue: str, name: str, outcome: str, run: float, wait: float
) -> RollupRow:
    """One run's row, as the settle statement counts it."""
    run, wait = max(run, 0.0), max(wait, 0.0)
    runs = [0] * (len(BOUNDS) + 1)
    waits = [0] * (len(BOUNDS) + 1)
    runs[bucket_of(run)] += 1
    waits[bucket_of(wait)] += 1
    return RollupRow(minute, queue, name, outcome, 1, run, wait, tuple(runs), tuple(waits))
