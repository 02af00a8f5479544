"""Metrics: in-process counters, and a Prometheus collector that adds the database's numbers.

The counters are named and labelled as the Prometheus series they are exported as
(``xjobs_job_leases_lost_total{queue=...}``): thread-safe, cheap enough for hot paths, and kept
whether or not ``prometheus-client`` is installed.

``collector()`` / ``registry()`` need the optional extra (the ``metrics`` extra, or ``pip install prometheus-client``).
At scrape time the collector reads queue depths, the outbox and the scheduler leader through
``django_xjobs.inspect`` — the same functions the admin and ``manage.py xjobs`` use — at most
once per ``STATS_INTERVAL`` seconds per process (SPEC MET-01)::

    from prometheus_client import generate_latest
    generate_latest(metrics.registry())  # b'# HELP xjobs_queue_depth ...'

See docs/reference/metrics.md for every series.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import log

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

#: Seconds a database read is reused for: two scrapes within this read the database once.
STATS_INTERVAL = 15.0

#: How to install what ``collector()`` needs; the view and ``--metrics-port`` say the same.
MISSING = (
    "prometheus-client is not installed: pip install 'prometheus-client>=0.20' (the metrics extra) "
    "(or prometheus-client>=0.20) to export metrics"
)

# --- in-process counters ----------------------------------------------------------------------

_counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
_lock = threading.Lock()

#: The counters the collector exports, with their help text and label names.
COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "xjobs_jobs_total": (
        "Runs settled by workers in this process, by outcome (ok, failed, dead, cancelled, "
        "lease_lost)",
        ("queue", "outcome"),
    ),
    "xjobs_worker_recycles_total": (
        "Workers in this process that drained to start afresh, by reason (abandoned_held: "
        "bodies past their timeout held half a pool too long)",
        ("reason",),
    ),
    "xjobs_job_leases_lost_total": (
        "Runs in this process whose lease was reported lost (including a cancel reaching a "
        "running job)",
        ("queue",),
    ),
    "xjobs_backfill_rows_total": (
        "Rows handed to backfill handlers by passes in this process",
        ("backfill",),
    ),
    "xjobs_backfill_pages_total": (
        "Backfill pages handled by passes in this process",
        ("backfill",),
    ),
    "xjobs_outbox_quarantined_total": (
        "Outbox rows this process quarantined: their publish failed for a reason that fails the "
        "same way again, by SQLSTATE or error code",
        ("code",),
    ),
}


def inc(name: str, amount: float = 1, **labels: str) -> None:
    key = (name, tuple(sorted(labels.items())))
    with _lock:
        _counters[key] = _counters.get(key, 0.0) + amount


def value(name: str, **labels: str) -> float:
    with _lock:
        return _counters.get((name, tuple(sorted(labels.items()))), 0.0)


def snapshot() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with _lock:
        return dict(_counters)


# --- in-process gauges ------------------------------------------------------------------------

_gauges: dict[str, float] = {}

#: The process gauges the collector exports, with their help text.
GAUGES: dict[str, str] = {
    "xjobs_worker_abandoned_bodies": (
        "Bodies in this process that passed their timeout and still run; each keeps its fleet "
        "slot, its limit and a worker thread until it returns"
    ),
}


def gauge_add(name: str, amount: float) -> None:
    with _lock:
        _gauges[name] = _gauges.get(name, 0.0) + amount


def gauge_value(name: str) -> float:
    with _lock:
        return _gauges.get(name, 0.0)


# --- what the database says, read at most once per STATS_INTERVAL ---------------------------


@dataclass
class DatabaseStats:
    """One read of the database; a part that could not be read is ``None``."""

    queues: list[dict[str, Any]] | None = None
    outbox: dict[str, Any] | None = None
    leaders: list[str] | None = None
    read_at: float = field(default=0.0)


_cache: DatabaseStats | None = None
_cache_lock = threading.Lock()


def database_stats(*, close_connections: bool = False) -> DatabaseStats:
    """The queue, outbox and leader numbers, from the database at most once per
    ``STATS_INTERVAL`` seconds (SPEC MET-01); a failed read is reused for as long, so a
    database that is down is not asked again on every scrape either."""
    global _cache
    with _cache_lock:
        now = time.monotonic()
        if _cache is not None and now - _cache.read_at < STATS_INTERVAL:
            return _cache
        try:
            _cache = _read_database(now)
        finally:
            if close_connections:
                # a scrape served off the request cycle (``--metrics-port``) runs on a fresh
                # thread each time: hand its connection back rather than leave it to the GC
                from django.db import connections

                connections.close_all()
        return _cache


def clear_cache() -> None:
    """Forget the last database read, so the next scrape reads again (for tests)."""
    global _cache
    with _cache_lock:
        _cache = None


def _read_database(now: float) -> DatabaseStats:
    from . import inspect
    from .errors import DriverUnavailableError

    stats = DatabaseStats(read_at=now)
    try:
        stats.queues = inspect.inspect_queues()["queues"]
    except Exception as error:
        log.event(logging.WARNING, "xjobs.metrics.depth_failed", error=error)
    try:
        stats.outbox = inspect.inspect_outbox()
    except DriverUnavailableError as error:  # no x_outbox table there: nothing to report
        log.event(logging.DEBUG, "xjobs.metrics.outbox_failed", error=error)
    except Exception as error:
        log.event(logging.WARNING, "xjobs.metrics.outbox_failed", error=error)
    try:
        stats.leaders = scheduler_leaders()
    except Exception as error:
        log.event(logging.WARNING, "xjobs.metrics.leader_failed", error=error)
    return stats


def scheduler_leaders() -> list[str]:
    """The holder of the unexpired scheduler leadership, if any (a list of at most one).

    Read from the driver's scheduler store, on its clock (on PostgreSQL the database's, the
    one the scheduler's lease is judged by).
    """
    from .drivers import get_driver
    from .scheduler.role import LEADER_KEY

    holder = get_driver().scheduler_store().leader(LEADER_KEY)
    return [] if holder is None else [holder]


# --- the Prometheus side ----------------------------------------------------------------------

#: Per-queue gauges: series name, the ``inspect_queues`` field, help text.
QUEUE_GAUGES = (
    ("xjobs_queue_depth", "ready", "Jobs ready and due to run, per queue"),
    (
        "xjobs_queue_oldest_ready_seconds",
        "oldest_ready_seconds",
        "Age of the oldest ready-and-due job (now - run_at); 0 when none",
    ),
    ("xjobs_queue_dead_jobs", "dead", "Dead-lettered jobs, per queue"),
    (
        "xjobs_queue_delayed_jobs",
        "delayed",
        "Jobs waiting for their run_at (delayed, or ready but not yet due)",
    ),
    ("xjobs_queue_running_jobs", "running", "Jobs claimed by a worker and running"),
    ("xjobs_queue_suspended_jobs", "suspended", "Jobs parked in a step sleep or event wait"),
    ("xjobs_queue_paused", "paused", "1 while an operator has the queue paused, else 0"),
)


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError as error:
        raise ImportError(MISSING) from error
    return prometheus_client


class XJobsCollector:
    """Yields every ``xjobs_*`` series at scrape time (a ``prometheus_client`` collector)."""

    def __init__(self, *, close_connections: bool = False) -> None:
        self.close_connections = close_connections

    def describe(self) -> list[Metric]:
        return []  # registering must not touch the database

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        stats = database_stats(close_connections=self.close_connections)
        if stats.queues is not None:
            for name, key, text in QUEUE_GAUGES:
                gauge = GaugeMetricFamily(name, text, labels=["queue"])
                for row in stats.queues:
                    gauge.add_metric([row["queue"]], float(row[key]))
                yield gauge
        if stats.outbox is not None:
            yield GaugeMetricFamily(
                "xjobs_outbox_pending",
                "Outbox rows staged and not yet published, over every outbox database",
                value=float(stats.outbox["pending"]),
            )
            yield GaugeMetricFamily(
                "xjobs_outbox_oldest_pending_seconds",
                "Age of the oldest unpublished outbox row; 0 when none",
                value=float(stats.outbox["oldest_pending_seconds"]),
            )
            yield GaugeMetricFamily(
                "xjobs_outbox_quarantined",
                "Outbox rows in quarantine, waiting for an operator to retry or discard them",
                value=float(stats.outbox.get("quarantined", 0)),
            )
        if stats.leaders is not None:
            leader = GaugeMetricFamily(
                "xjobs_scheduler_leader",
                "1 for the scheduler holding unexpired leadership; no sample when none does",
                labels=["holder"],
            )
            for holder in stats.leaders:
                leader.add_metric([holder], 1.0)
            yield leader
        for name, text in GAUGES.items():
            yield GaugeMetricFamily(name, text, value=gauge_value(name))
        counted = snapshot()
        for name, (text, labels) in COUNTERS.items():
            counter = CounterMetricFamily(name, text, labels=list(labels))
            for (series, pairs), amount in sorted(counted.items()):
                if series == name:
                    values = dict(pairs)
                    counter.add_metric([values.get(label, "") for label in labels], amount)
            yield counter


def collector(*, close_connections: bool = False) -> XJobsCollector:
    """A ``prometheus_client`` collector of every ``xjobs_*`` series.

    Raises ``ImportError`` with the install command when prometheus-client is missing.
    ``close_connections=True`` closes the scraping thread's database connections after each
    read (for a server off Django's request cycle, such as ``xjobs_worker --metrics-port``).
    """
    _prometheus()
    return XJobsCollector(close_connections=close_connections)


def registry(*, close_connections: bool = False) -> CollectorRegistry:
    """A new ``CollectorRegistry`` holding only ``collector()``::

    prometheus_client.start_http_server(9100, registry=metrics.registry())
    """
    prometheus_client = _prometheus()
    result: CollectorRegistry = prometheus_client.CollectorRegistry()
    result.register(collector(close_connections=close_connections))
    return result
