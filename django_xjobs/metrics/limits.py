"""The limits' series of a scrape: a capped queue's cap, and per limited job its runs now, its keys
used within a day and those a partner paused (the collector in ``metrics`` yields them)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

#: The limits' series (limit_gauges): a capped queue's cap, then per limited job
#: (not per key: a key per customer would be a series per customer) its runs now, its keys used
#: within a day, and those a partner paused (RateLimited).
QUEUE_LIMIT_GAUGE = ("xjobs_queue_limit", "An operator's cap on a queue's runs at once, fleet-wide")
LIMIT_GAUGES = (
    ("xjobs_limit_running", "Runs of a limited job now, over all its keys", "running"),
    ("xjobs_limit_keys", "Limit keys of a job used within a day", None),
    ("xjobs_limit_keys_paused", "Limit keys of a job paused by RateLimited now", "paused_until"),
)


def limit_gauges(
    queues: list[dict[str, Any]], keys: list[dict[str, Any]], *, labels: Sequence[str] = ("queue",)
) -> Iterator[Any]:
    """The limits' series: each capped queue's cap (by ``labels``: its queue, and its alias with
    jobs in several databases), and per limited job (not per key: a key per customer would be a
    series per customer) its runs now, its keys seen within a day, and how many of them an
    operator's partner paused (``RateLimited``) — with jobs in several databases, per job and
    alias, each key row carrying the ``alias`` it was read from (SPEC SHARD-55)."""
    from prometheus_client.core import GaugeMetricFamily

    cap = GaugeMetricFamily(*QUEUE_LIMIT_GAUGE, labels=list(labels))
    for row in queues:
        if row.get("limit") is not None:
            cap.add_metric([row[label] for label in labels], float(row["limit"]))
    yield cap
    by = ["job", "alias"] if "alias" in labels else ["job"]
    by_job: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for key in keys:
        by_job.setdefault(tuple(key[label] for label in by), []).append(key)
    for name, text, column in LIMIT_GAUGES:
        gauge = GaugeMetricFamily(name, text, labels=by)
        for group, rows in sorted(by_job.items()):
            if column is None:
                amount = len(rows)
            elif column == "paused_until":
                amount = sum(1 for r in rows if r["paused_until"])
            else:
                amount = sum(r[column] for r in rows)
            gauge.add_metric(list(group), float(amount))
        yield gauge
