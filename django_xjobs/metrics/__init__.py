"""Metrics: in-process counters, and a Prometheus collector that adds the database's numbers.

The counters are named and labelled as the Prometheus series they are exported as
(``xjobs_job_leases_lost_total{queue=...}``): thread-safe, cheap enough for hot paths, and kept
whether or not ``prometheus-client`` is installed.

``collector()`` / ``registry()`` need the optional extra (the ``metrics`` extra, or ``pip install prometheus-client``).
At scrape time the collector reads queue depths, the outbox and the scheduler leader from the
driver — the same rows the admin and ``manage.py xjobs`` show — at most once per
``STATS_INTERVAL`` seconds per process (SPEC MET-01)::

    from prometheus_client import generate_latest
    generate_latest(metrics.registry())  # b'# HELP xjobs_queue_depth ...'

See docs/reference/metrics.md for every series.
"""

from __future__ import annotations

import logging
import threading
import time
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .. import conf, log
from ..drivers.contract import LEADER_KEY, JobDriver
from ..drivers.reading import ReadSource, read_driver, reading
from ..limits.keys import SEPARATOR
from ..rollup import BOUNDS
from .depths import queue_depths as queue_depths
from .limits import limit_gauges

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
    "xjobs_jobs_expired_total": (
        "Jobs workers in this process found expired at their first claim and settled dead "
        "(stop reason expired) without running them",
        ("queue",),
    ),
    "xjobs_jobs_dependency_failed_total": (
        "Jobs workers in this process settled dead (stop reason dependency_failed) without "
        "running them: a job they waited for ended dead, failed or cancelled",
        ("queue",),
    ),
    "xjobs_jobs_snoozed_total": (
        "Runs in this process that snoozed (ctx.snooze): put back without spending an attempt; "
        "not counted as failures",
        ("queue",),
    ),
    "xjobs_jobs_old_runs_total": (
        "Claims, by workers in this process, of runs started under an older version of their "
        "job's code, by the job's old_runs: replay (each resume counts), restart or park",
        ("queue", "policy"),
    ),
    "xjobs_jobs_run_now_total": (
        "Waiting jobs an operator made due now in this process (run_job_now: the admin's Run "
        "now, xjobs run-now)",
        ("queue",),
    ),
    "xjobs_operator_actions_total": (
        "Operator actions this process recorded in the audit trail (x_operator_actions), by "
        "verb: retry, cancel, delete, requeue (one job or a filter's), pause, resume, ...",
        ("verb",),
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
    "xjobs_decrypt_failures_total": (
        "Claimed runs whose input no key in XJOBS['ENCRYPTION_KEYS'] opens: each parked unrun, "
        "its attempt given back",
        ("queue",),
    ),
    "xjobs_history_moved_total": (
        "Finished jobs this process moved from x_jobs to the history (XJOBS HISTORY)",
        (),
    ),
    "xjobs_history_dropped_total": (
        "Days of the history this process dropped past RETENTION, by state",
        ("state",),
    ),
    # counted by metrics/events.py, which bounds the event label's values
    "xjobs_events_published_total": (
        "Events published by this process and committed, by event name",
        ("event",),
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
    "xjobs_worker_isolated_runs": (
        "Suspect runs this process runs alone in a child process now (their last run died with "
        "its worker, or died alone); its other threads keep claiming"
    ),
}


def gauge_add(name: str, amount: float) -> None:
    with _lock:
        _gauges[name] = _gauges.get(name, 0.0) + amount


def gauge_value(name: str) -> float:
    with _lock:
        return _gauges.get(name, 0.0)


# --- in-process histograms -------------------------------------------------------------------

#: The histograms the collector exports, with their help text; each is per queue. Their bucket
#: bounds are the rollup's (rollup.BOUNDS), so a dashboard and the admin overview agree.
HISTOGRAMS: dict[str, str] = {
    "xjobs_job_duration_seconds": (
        "Run time of the runs settled by workers in this process (claim to settle), per queue"
    ),
    "xjobs_job_wait_seconds": (
        "Wait of the runs settled by workers in this process (due time to claim), per queue"
    ),
    "xjobs_event_wait_seconds": (
        "Publish of an event to the waiting step in this process receiving it, on the store's "
        "clock, per queue of the waiting run"
    ),
}
#: name -> queue -> [count per bound (le), +Inf count, sum]
_histograms: dict[str, dict[str, list[float]]] = {}


def observe(name: str, seconds: float, *, queue: str) -> None:
    """Count ``seconds`` in the histogram ``name`` of ``queue``."""
    with _lock:
        series = _histograms.setdefault(name, {}).get(queue)
        if series is None:
            series = _histograms[name][queue] = [0.0] * (len(BOUNDS) + 2)
        series[bisect_left(BOUNDS, seconds)] += 1  # the first bound it is not above: le
        series[-1] += seconds


def histogram(name: str, queue: str) -> tuple[list[tuple[str, float]], float]:
    """The cumulative ``(le, count)`` buckets of ``name`` for ``queue`` (the last is "+Inf",
    the total) and the sum of what was observed."""
    with _lock:
        series = list(_histograms.get(name, {}).get(queue, [0.0] * (len(BOUNDS) + 2)))
    return _cumulative(series)


def _cumulative(series: list[float]) -> tuple[list[tuple[str, float]], float]:
    buckets, seen = [], 0.0
    for bound, count in zip([*map(repr, BOUNDS), "+Inf"], series[:-1], strict=True):
        seen += count
        buckets.append((bound, seen))
    return buckets, series[-1]


# --- what the database says, read at most once per STATS_INTERVAL ---------------------------


@dataclass
class DatabaseStats:
    """One read of the database; a part that could not be read is ``None``."""

    queues: list[dict[str, Any]] | None = None
    outbox: dict[str, Any] | None = None
    leaders: list[str] | None = None
    #: each declared cron's name and whether an operator paused it (``pause_cron``)
    crons: list[tuple[str, bool]] | None = None
    #: the operators' pauses in force per job, its name's and its keys' (``pause_jobs``)
    job_pauses: dict[str, int] | None = None
    #: limit keys used within a day (``key_use``)
    limits: list[dict[str, Any]] | None = None
    batches_open: int | None = None
    #: with jobs in several databases, the open batches of each that answered (SHARD-55)
    batches_by_alias: dict[str, int] | None = None
    #: with jobs in several databases: whether each alias answered the queues' read (SPEC
    #: SHARD-20), and each row of ``queues`` carries its ``alias``; None on one database
    databases: dict[str, bool] | None = None
    #: where the figures above were read, and how old they are (SPEC READ-03)
    source: ReadSource | None = None
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
    stats = DatabaseStats(read_at=now)
    try:  # one database for every figure of the scrape: the read database's, or said why not
        with reading(fallback=True) as stats.source:
            return _read_figures(stats)
    except Exception as error:
        log.event(logging.WARNING, "xjobs.metrics.depth_failed", error=error)
        return stats


def _read_figures(stats: DatabaseStats) -> DatabaseStats:
    from ..drivers.routing.surface import per_alias
    from ..errors import DriverUnavailableError

    driver = read_driver()[0]
    try:
        split = per_alias(driver, queue_depths)
        if split is None:
            stats.queues = queue_depths(driver)
        else:  # per database, one that is down said as down, never as its queues at 0
            stats.databases = {each.alias: each.answer is not None for each in split}
            stats.queues = [
                {**row, "alias": each.alias} for each in split for row in each.answer or []
            ]
    except Exception as error:
        log.event(logging.WARNING, "xjobs.metrics.depth_failed", error=error)
    try:
        stats.outbox = _outbox_totals(driver)
    except DriverUnavailableError as error:  # no x_outbox table there: nothing to report
        log.event(logging.DEBUG, "xjobs.metrics.outbox_failed", error=error)
    except Exception as error:
        log.event(logging.WARNING, "xjobs.metrics.outbox_failed", error=error)
    try:  # with jobs in several databases, each that answers under its alias (SHARD-55)
        keys = per_alias(driver, key_use)
        stats.limits = (
            key_use(driver)
            if keys is None
            else [{**row, "alias": each.alias} for each in keys for row in each.answer or []]
        )
    except Exception as error:
        log.event(logging.WARNING, "xjobs.metrics.limits_failed", error=error)
    try:
        stats.leaders = scheduler_leaders()
    except Exception as error:
        log.event(logging.WARNING, "xjobs.metrics.leader_failed", error=error)
    try:
        stats.crons = cron_pauses()
    except Exception as error:
        log.event(logging.WARNING, "xjobs.metrics.crons_failed", error=error)
    try:
        names = [pause.name for pause in driver.limits().job_pauses()]  # SPEC PAUSE-08
        stats.job_pauses = {name: names.count(name) for name in names}
    except Exception as error:
        log.event(logging.WARNING, "xjobs.metrics.pauses_failed", error=error)
    try:
        opened = per_alias(driver, lambda each: each.batches().open_count())
        if opened is None:
            stats.batches_open = driver.batches().open_count()
        else:  # SHARD-55: a database that is down has no sample, never 0
            stats.batches_by_alias = {a.alias: a.answer for a in opened if a.answer is not None}
    except Exception as error:
        log.event(logging.WARNING, "xjobs.metrics.batches_failed", error=error)
    return stats


def key_use(driver: JobDriver, limit: int = 500) -> list[dict[str, Any]]:
    """Each limit key used within a day, as the limits' series count it: its job, its runs now,
    and a pause (``RateLimited``) not yet over. ``inspect_limits`` answers operators the same
    keys, with what each job declares; the metrics need only these, read from the driver."""
    now = datetime.now(UTC)
    return [
        {
            "job": key.partition(SEPARATOR)[0],
            "running": running,
            "paused_until": paused_until
            if paused_until is not None and paused_until > now
            else None,
        }
        for key, paused_until, running, _starts in driver.limits().key_usage(limit)
    ]


def _outbox_totals(driver: JobDriver) -> dict[str, Any]:
    pending, oldest, quarantined = 0, 0.0, 0
    jobs_database = conf.get().database
    for alias in conf.get().outbox_databases:  # the jobs database's own: where driver reads
        store = driver.outbox(None if alias == jobs_database else alias)
        count, age = store.pending()
        pending, oldest = pending + count, max(oldest, age)
        quarantined += store.quarantine.count()
    return {"pending": pending, "oldest_pending_seconds": oldest, "quarantined": quarantined}


def scheduler_leaders() -> list[str]:
    """The holder of the unexpired scheduler leadership, if any (a list of at most one).

    Read from the driver's scheduler store, on its clock (on PostgreSQL the database's, the
    one the scheduler's lease is judged by).
    """
    holder = read_driver()[0].scheduler().leader(LEADER_KEY)
    return [] if holder is None else [holder]


def cron_pauses() -> list[tuple[str, bool]]:
    """Each declared cron, by name, with whether it is paused (``xjobs_cron_paused``)."""
    from ..declarations import registry

    paused = read_driver()[0].scheduler().paused_crons()
    return [(c.name, c.name in paused) for c in registry.crons.all()]


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


#: With jobs in several databases (SPEC SHARD-20): whether each answered the scrape.
DATABASE_GAUGE = (
    "xjobs_database_up",
    "With jobs in several databases: 1 while the alias answered the scrape's read of its "
    "queues, 0 when it did not (its queues then have no samples, never zeros)",
)


BATCHES_GAUGE = (
    "xjobs_batches_open",
    "Batches whose callbacks are not queued yet: open, or closed with members "
    "still to end (docs/concepts/workflows.md)",
)


#: Where a scrape's database figures came from (SPEC READ-03): their age, and whether
#: ``XJOBS["READ_DATABASE"]`` answered (a scrape reads the primary instead when it did not).
READ_GAUGES = (
    ("xjobs_read_lag_seconds", "Age of the scrape's database figures: a standby's replay lag"),
    ("xjobs_read_database_up", "1 while READ_DATABASE answers; 0 when the primary was read"),
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
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        stats = database_stats(close_connections=self.close_connections)
        # with jobs in several databases each queue's series carry its alias; never otherwise
        by: tuple[str, ...] = ("queue",) if stats.databases is None else ("queue", "alias")
        if stats.queues is not None:
            for name, key, text in QUEUE_GAUGES:
                gauge = GaugeMetricFamily(name, text, labels=list(by))
                for row in stats.queues:
                    gauge.add_metric([row[label] for label in by], float(row[key]))
                yield gauge
        if stats.databases is not None:
            up = GaugeMetricFamily(*DATABASE_GAUGE, labels=["alias"])
            for database, answered in stats.databases.items():
                up.add_metric([database], 1.0 if answered else 0.0)
            yield up
        if stats.queues is not None or stats.limits is not None:
            yield from limit_gauges(stats.queues or [], stats.limits or [], labels=by)
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
        if stats.crons is not None:
            cron_paused = GaugeMetricFamily(
                "xjobs_cron_paused",
                "1 while an operator has the cron paused, else 0",
                labels=["cron"],
            )
            for cron_name, is_paused in stats.crons:
                cron_paused.add_metric([cron_name], 1.0 if is_paused else 0.0)
            yield cron_paused
        if stats.job_pauses is not None:
            job_paused = GaugeMetricFamily(
                "xjobs_job_paused",
                "An operator's pauses in force on the job: its name's, and its limit keys' "
                "until resumed (pause_jobs); no sample for a job not paused",
                labels=["job"],
            )
            for job_name, count in sorted(stats.job_pauses.items()):
                job_paused.add_metric([job_name], float(count))
            yield job_paused
        if stats.batches_open is not None:
            yield GaugeMetricFamily(*BATCHES_GAUGE, value=float(stats.batches_open))
        if stats.batches_by_alias is not None:
            opened = GaugeMetricFamily(*BATCHES_GAUGE, labels=["alias"])
            for database, count in stats.batches_by_alias.items():
                opened.add_metric([database], float(count))
            yield opened
        source, alias = stats.source, conf.get().read_database  # SPEC READ-03
        lag = GaugeMetricFamily(*READ_GAUGES[0])
        if source is not None and source.lag_seconds is not None:
            lag.add_metric([], source.lag_seconds)
        up = GaugeMetricFamily(*READ_GAUGES[1], labels=["database"])
        if alias is not None and source is not None:  # no sample without READ_DATABASE
            up.add_metric([alias], 0.0 if source.problem else 1.0)
        yield from (lag, up)
        counted, gauges, histograms = self.local()
        for name, text in HISTOGRAMS.items():
            family = HistogramMetricFamily(name, text, labels=["queue"])
            for queue in sorted(histograms.get(name, {})):
                buckets, total = _cumulative(histograms[name][queue])
                family.add_metric([queue], buckets, total)
            yield family
        for name, (text, labels) in COUNTERS.items():
            counter = CounterMetricFamily(name, text, labels=list(labels))
            for (series, pairs), amount in sorted(counted.items()):
                if series == name:
                    values = dict(pairs)
                    counter.add_metric([values.get(label, "") for label in labels], amount)
            yield counter
        for name, text in GAUGES.items():
            yield GaugeMetricFamily(name, text, value=gauges.get(name, 0.0))

    def local(
        self,
    ) -> tuple[
        dict[tuple[str, tuple[tuple[str, str], ...]], float],
        dict[str, float],
        dict[str, dict[str, list[float]]],
    ]:
        """The process's own counters, gauges and histograms (metrics/shared.py adds up those
        of every child of a supervisor instead)."""
        with _lock:
            histograms = {n: {q: list(v) for q, v in qs.items()} for n, qs in _histograms.items()}
            return dict(_counters), dict(_gauges), histograms


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
