"""Benchmark django_xjobs on PostgreSQL: enqueue rate, drain rate, enqueue-to-start latency,
backfill rate, publish-to-resumed latency.

Run from the repository root::

    python -m bench.run [--jobs 10000] [--latency-samples 200] [--concurrency 4 16 32]
    python -m bench.run --workloads W4     # only the backfill figures

DATABASE_URL selects the server; without it an embedded throwaway PostgreSQL is started.
The benchmark empties ``x_jobs`` (TRUNCATE) between workloads, W4 its step and ledger tables
too, and W5 the step and event tables: point it at a scratch database.
See bench/README.md for what each workload measures.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

DRAIN_TIMEOUT = 300.0  # seconds one W2 run may take before the worker is stopped
LATENCY_TIMEOUT = 30.0  # seconds W3 waits for the worker to be ready, and for the last sample
JOIN_TIMEOUT = 30.0  # seconds to wait for a stopped worker thread to return
LATENCY_CONCURRENCY = 4  # threads of the W3 worker
POLL = 0.05  # seconds between the progress checks of a drain by worker processes
WORKLOADS = ("W1", "W2", "FLOOR", "W3", "W4", "W5", "SOAK", "LIMITS", "BULK", "HISTORY", "INPUT10M")
# SOAK, LIMITS and BULK run only when asked for: they take minutes
DEFAULT_WORKLOADS = ("W1", "W2", "FLOOR", "W3", "W4", "W5")


@dataclass
class Row:
    workload: str
    figure: str
    unit: str
    note: str = ""
    cost: str = ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)  # printed below the main table

    def add(self, workload: str, figure: str, unit: str, note: str = "", cost: str = "") -> None:
        self.rows.append(Row(workload, figure, unit, note, cost))

    def problem(self, text: str) -> None:
        self.problems.append(text)
        say(f"  !! {text}")


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs for W1 and W2 (10000)")
    parser.add_argument(
        "--latency-samples",
        type=int,
        default=200,
        help="single enqueues timed in W3, publishes in W5 (200)",
    )
    parser.add_argument(
        "--latency-spacing",
        type=float,
        default=20.0,
        help="milliseconds between the W3 enqueues and the W5 publishes (20)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=[4, 16, 32],
        metavar="N",
        help="worker threads to try in W2 (4 16 32)",
    )
    parser.add_argument(
        "--backlog",
        type=int,
        default=30_000,
        help="jobs in the W2 backlog drained without and with ANALYZE (30000; 0 skips it)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=2,
        help="xjobs_worker --processes N for the W2 run by worker processes (2; 0 skips it)",
    )
    parser.add_argument(
        "--backfill-rows",
        type=int,
        default=100_000,
        help="rows each W4 backfill sweeps (100000)",
    )
    parser.add_argument(
        "--workloads",
        nargs="+",
        choices=WORKLOADS,
        default=list(DEFAULT_WORKLOADS),
        metavar="W",
        help="the workloads to run, of W1 W2 FLOOR W3 W4 W5 SOAK LIMITS BULK HISTORY INPUT10M "
        "(all but SOAK, LIMITS, BULK, HISTORY and INPUT10M)",
    )
    parser.add_argument(
        "--bulk-dead", type=int, default=100_000, help="BULK: dead jobs retried by filter (100000)"
    )
    parser.add_argument(
        "--bulk-drain",
        type=int,
        default=100_000,
        help="BULK: no-op runs drained alone, then during the retry (100000)",
    )
    parser.add_argument(
        "--history-rows",
        type=int,
        default=1_000_000,
        help="HISTORY: finished jobs moved, dropped and deleted (1000000)",
    )
    parser.add_argument(
        "--history-parts",
        nargs="+",
        choices=("move", "delete", "fill", "claims", "clear"),
        default=["move", "delete"],
        help="HISTORY: the claims, move and drop; the DELETE it replaces (both); or fill the "
        "history with --history-fill rows, time the claim beside it, clear it",
    )
    parser.add_argument(
        "--history-fill",
        type=int,
        default=10_000_000,
        help="HISTORY fill: done rows put straight into x_job_history (10000000)",
    )
    parser.add_argument(
        "--history-claims", type=int, default=500, help="HISTORY: claims timed per case (500)"
    )
    parser.add_argument(
        "--bulk-route",
        choices=("cli", "thread"),
        default="cli",
        help="BULK: the retry as `manage.py xjobs retry --yes` in its own process (cli), or "
        "retry_jobs on a thread of the benchmark (thread)",
    )
    parser.add_argument(
        "--input-rows",
        type=int,
        default=10_000_000,
        help="INPUT10M: rows x_jobs is filled with (10000000)",
    )
    parser.add_argument(
        "--input-repeat",
        type=int,
        default=10,
        help="INPUT10M: timed requests after the first, of which the median is shown (10)",
    )
    parser.add_argument(
        "--input-reuse",
        action="store_true",
        help="INPUT10M: keep the rows of an earlier run with --input-reuse (x_jobs holding "
        "exactly --input-rows rows), and keep them at the end",
    )
    parser.add_argument(
        "--input-index",
        choices=["full", "problem"],
        default="full",
        help="INPUT10M: the opt-in index over every row, timed by input alone (full), or "
        "migration 0033's partial index of the dead, failed and cancelled rows, timed by input "
        "and state=dead (problem)",
    )
    parser.add_argument(
        "--floor-batch", type=int, default=100, help="FLOOR: rows per claim and per ack (100)"
    )
    parser.add_argument(
        "--floor-rounds", type=int, default=2, help="FLOOR: times its three rows are measured (2)"
    )
    parser.add_argument(
        "--limit-keys", type=int, default=1000, help="LIMITS: keys the limited drain spreads over"
    )
    parser.add_argument(
        "--limit-rounds",
        type=int,
        default=2,
        help="LIMITS: drains without and with a limit, alternated (2)",
    )
    parser.add_argument(
        "--limit-backlog",
        type=int,
        default=100_000,
        help="LIMITS: runs of the one throttled key while the polls are timed (100000)",
    )
    parser.add_argument(
        "--limit-polls", type=int, default=2000, help="LIMITS: claim polls timed per case (2000)"
    )
    parser.add_argument(
        "--fair-a", type=int, default=50_000, help="LIMITS: tenant A's runs (50000)"
    )
    parser.add_argument(
        "--fair-b", type=int, default=100, help="LIMITS: tenant B's runs, enqueued after (100)"
    )
    parser.add_argument(
        "--soak-jobs", type=int, default=1_000_000, help="jobs the SOAK runs in all (1000000)"
    )
    parser.add_argument(
        "--soak-wave", type=int, default=100_000, help="jobs per SOAK wave (100000)"
    )
    parser.add_argument(
        "--soak-keep",
        type=int,
        default=5,
        help="SOAK retention: waves of finished jobs kept before they are pruned (5)",
    )
    parser.add_argument(
        "--soak-finished",
        type=int,
        default=0,
        help="SOAK: finished jobs inserted before the first wave, kept throughout (0)",
    )
    parser.add_argument(
        "--soak-naptime",
        type=int,
        default=None,
        metavar="S",
        help="SOAK: set the server's autovacuum_naptime to S seconds for the run (ALTER SYSTEM, "
        "reset afterwards; default: leave the server's)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="run even though x_jobs already holds rows (they are deleted)",
    )
    parser.add_argument(
        "--encrypt",
        action="store_true",
        help='payloads encrypted at rest (XJOBS["ENCRYPTION_KEYS"] with one key): W1 seals each '
        "input, W2 fills sealed inputs and opens each at its claim",
    )
    args = parser.parse_args(argv)
    if (
        args.jobs < 1
        or args.latency_samples < 1
        or min(args.concurrency) < 1
        or args.backfill_rows < 1
        or args.soak_jobs < 1
        or args.soak_wave < 1
        or min(args.limit_keys, args.limit_rounds, args.limit_backlog, args.limit_polls) < 1
        or min(args.fair_a, args.fair_b) < 1
    ):
        parser.error(
            "--jobs, --latency-samples, --concurrency, --backfill-rows, --soak-jobs, "
            "--soak-wave and the --limit-*/--fair-* counts must be positive"
        )
    if args.soak_naptime is not None and args.soak_naptime < 1:
        parser.error("--soak-naptime must be at least 1 (second)")
    if min(args.backlog, args.processes, args.soak_keep, args.soak_finished) < 0:
        parser.error(
            "--backlog, --processes, --soak-keep and --soak-finished must be 0 or positive"
        )
    return args


# --- helpers ---------------------------------------------------------------------------------


def sql(query: str, params: Any = None) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return list(cursor.fetchall()) if cursor.description else []


def truncate() -> None:
    sql("TRUNCATE x_jobs")


def state_counts() -> dict[str, int]:
    return dict(sql("SELECT state, count(*) FROM x_jobs GROUP BY state"))


def connect() -> Any:
    """A psycopg connection of its own to the benchmark's database (for the CPU sampler)."""
    import psycopg
    from django.db import connection

    settings = connection.settings_dict
    params = {
        "dbname": settings["NAME"],
        "user": settings["USER"],
        "password": settings["PASSWORD"],
        "host": settings["HOST"],
        "port": settings["PORT"],
    }
    return psycopg.connect(autocommit=True, **{k: v for k, v in params.items() if v})


def measured() -> Any:
    from bench.measure import Window

    return Window(connect)


def fill_ready(count: int, *, analyze: bool = True) -> None:
    """Insert ``count`` ready ``noop`` rows in one statement, as ``noop.enqueue`` would have.

    Each row gets its own ``run_at`` a microsecond after the previous one, as sequential
    enqueues would, so the claim order is the order of ``n``. Without ``analyze`` the table
    keeps the statistics of what it held before (see ``drain_backlog``).
    """
    from bench.jobs import noop
    from django_xjobs import conf, crypt

    # with --encrypt each input is sealed as noop.enqueue seals it, here in the process: the
    # statement picks each row's from one JSON array (jsonb indexes an array in constant time)
    sealed = (
        "[" + ",".join(crypt.seal(f'{{"n":{g}}}') for g in range(1, count + 1)) + "]"
        if conf.get().encryption is not None
        else None
    )
    sql(
        """
        INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt,
                            max_attempts, state, priority, run_at, created_at, updated_at)
        SELECT gen_random_uuid(), %(name)s, %(queue)s,
               COALESCE(%(sealed)s::jsonb -> (g - 1), jsonb_build_object('n', g)),
               'noop:' || g, gen_random_uuid(), 0, %(max_attempts)s, 'ready', %(priority)s,
               t.at, t.at, t.at
        FROM generate_series(1, %(count)s) AS g,
             LATERAL (SELECT now() - make_interval(secs => (%(count)s - g) / 1e6) AS at) AS t
        """,
        {
            "name": noop.name,
            "queue": noop.queue,
            "max_attempts": noop.retry.attempts,
            "priority": noop.priority,
            "count": count,
            "sealed": sealed,
        },
    )
    if analyze:
        sql("ANALYZE x_jobs")  # a long-lived table has statistics; give the claim query the same


def percentile(sorted_values: list[float], pct: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    rank = (len(sorted_values) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low)


def describe_error(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


class WorkerThread(threading.Thread):
    """Run ``worker.run()`` on a thread; keep what it returned or raised."""

    def __init__(self, worker: Any) -> None:
        super().__init__(name="bench-worker", daemon=True)
        self.worker = worker
        self.stats: Any = None
        self.error: BaseException | None = None
        self.returned_at: float | None = None

    def run(self) -> None:
        try:
            self.stats = self.worker.run()
        except BaseException as error:
            self.error = error
        finally:
            self.returned_at = time.perf_counter()

    def drain(self, report: Report, label: str, *, what: str = "drained") -> None:
        """Start the thread of a burst worker and wait for ``run()`` to return; past
        ``DRAIN_TIMEOUT`` stop it. A timeout, or what ``run()`` raised, goes in the report."""
        self.start()
        self.join(DRAIN_TIMEOUT)
        if self.is_alive():
            report.problem(f"{label}: not {what} within {DRAIN_TIMEOUT:g}s; stopping the worker")
            self.finish(report, label)
        elif self.error is not None:
            report.problem(f"{label}: Worker.run() raised {describe_error(self.error)}")

    def finish(self, report: Report, label: str) -> bool:
        """Stop the worker, wait for the thread; report anything that went wrong."""
        self.worker.stop()
        self.join(JOIN_TIMEOUT)
        if self.is_alive():
            report.problem(f"{label}: the worker did not return within {JOIN_TIMEOUT:g}s of stop()")
            return False
        if self.error is not None:
            report.problem(f"{label}: Worker.run() raised {describe_error(self.error)}")
            return False
        return True


# --- workloads -------------------------------------------------------------------------------


def enqueue_rate(report: Report, count: int) -> None:
    """W1: ``noop.enqueue`` ``count`` times in autocommit, so one transaction each."""
    from bench.jobs import noop

    truncate()
    say(f"W1: enqueuing {count} jobs, one transaction each ...")
    with measured() as window:
        started = time.perf_counter()
        for n in range(count):
            noop.enqueue(n=n)
        elapsed = time.perf_counter() - started
    stored = state_counts()
    if stored != {"ready": count}:
        report.problem(f"W1: expected {count} ready rows, found {stored}")
    rate = count / elapsed
    say(f"    {rate:,.0f} jobs/s ({elapsed:.2f}s)")
    report.add(
        "W1 enqueue (1 txn/job)",
        f"{rate:,.0f}",
        "jobs/s",
        f"{count} jobs in {elapsed:.2f}s",
        window.cost.per_job(count),
    )
    report.add("W1 enqueue mean time", f"{elapsed / count * 1000:.3f}", "ms/job")
    enqueue_bulk(report, count)
    enqueue_in_atomic(report, count)


def _enqueued(report: Report, label: str, count: int, elapsed: float, window: Any) -> None:
    """One W1 row: the rate of ``count`` enqueues that took ``elapsed`` seconds, and their cost;
    a problem unless exactly ``count`` ready rows are stored."""
    stored = state_counts()
    if stored != {"ready": count}:
        report.problem(f"{label}: expected {count} ready rows, found {stored}")
    rate = count / elapsed
    say(f"    {rate:,.0f} jobs/s ({elapsed:.2f}s)")
    report.add(
        label,
        f"{rate:,.0f}",
        "jobs/s",
        f"{count} jobs in {elapsed:.2f}s",
        window.cost.per_job(count),
    )


def enqueue_bulk(report: Report, count: int) -> None:
    """W1 bulk: one ``noop.enqueue_many`` of ``count`` inputs, in autocommit (one transaction),
    then the same inside ``atomic()`` (the default outbox stages them, published at commit)."""
    from django.db import transaction

    from bench.jobs import noop

    for inside in (False, True):
        truncate()
        label = "W1 enqueue_many in atomic()" if inside else "W1 enqueue_many"
        say(f"{label}: {count} jobs in one call ...")
        inputs = [{"n": n} for n in range(count)]
        with measured() as window:
            started = time.perf_counter()
            if inside:
                with transaction.atomic():
                    noop.enqueue_many(inputs)
            else:
                noop.enqueue_many(inputs)
            elapsed = time.perf_counter() - started
        _enqueued(report, label, count, elapsed, window)


def enqueue_in_atomic(report: Report, count: int) -> None:
    """W1 txn: ``count`` single ``noop.enqueue`` calls inside one ``atomic()``, with the default
    outbox (each staged on the caller's connection, published by the on-commit fast path), then
    with ``outbox=False`` (direct inserts, one commit)."""
    from django.db import transaction

    from bench.jobs import noop

    for direct in (False, True):
        truncate()
        sql("TRUNCATE x_outbox")
        label = "W1 enqueue() x N in atomic()" + (", outbox=False" if direct else "")
        say(f"{label}: {count} jobs ...")
        handle = noop.using(outbox=False) if direct else noop
        with measured() as window:
            started = time.perf_counter()
            with transaction.atomic():
                for n in range(count):
                    handle.enqueue(n=n)
            elapsed = time.perf_counter() - started
        _enqueued(report, label, count, elapsed, window)


def drain_rate(
    report: Report, count: int, concurrency: int, *, analyze: bool = True, title: str = ""
) -> float | None:
    """W2: one burst worker drains ``count`` ready no-op jobs; jobs/s by the database clock.

    Returns the rate when every job was done, else None (the row is still reported).
    """
    from django_xjobs.worker.worker import Worker

    truncate()
    fill_ready(count, analyze=analyze)
    say(f"W2: draining {count} jobs, concurrency={concurrency} {title}...")
    label = f"W2 c={concurrency}{title and ' ' + title}"
    worker = Worker(queues=["default"], concurrency=concurrency, burst=True)
    (db_start,) = sql("SELECT clock_timestamp()")[0]
    with measured() as window:
        started = time.perf_counter()
        thread = WorkerThread(worker)
        thread.drain(report, label)
    wall = (thread.returned_at or time.perf_counter()) - started
    stored = state_counts()
    done = stored.get("done", 0)
    complete = stored == {"done": count}
    if not complete:
        report.problem(f"{label}: expected {count} done rows, found {stored}")
    if not done:
        return None
    # From just before the worker started to the last ack, both by the server's clock: the
    # worker's startup is in, its shutdown is not.
    (last_ack,) = sql("SELECT max(updated_at) FROM x_jobs WHERE state = 'done'")[0]
    elapsed = (last_ack - db_start).total_seconds()
    rate = done / elapsed
    say(
        f"    {rate:,.0f} jobs/s ({elapsed:.2f}s to the last ack, {wall:.2f}s until run() returned)"
    )
    note = f"{done} jobs in {elapsed:.2f}s; run() returned after {wall:.2f}s"
    report.add(
        f"W2 drain c={concurrency}{title and ' ' + title}",
        f"{rate:,.0f}",
        "jobs/s",
        note if complete else f"INCOMPLETE: {note}",
        window.cost.per_job(done),
    )
    return rate if complete else None


def drain_backlog(report: Report, count: int, concurrency: int) -> None:
    """W2 on a ``count`` backlog straight after the fill, then the same after ``ANALYZE``.

    The first run keeps the statistics a drained queue leaves behind (the finished table is
    analyzed before the TRUNCATE, so they say no row is claimable): the claim's plan must not
    depend on them. Autovacuum may still analyze the table during the drain, as it would in
    production.
    """
    sql("ANALYZE x_jobs")  # whatever the last workload left: all done, or empty
    stale = drain_rate(report, count, concurrency, analyze=False, title="backlog, no ANALYZE")
    fresh = drain_rate(report, count, concurrency, analyze=True, title="backlog, ANALYZE")
    if stale and fresh:
        report.add("W2 backlog: no ANALYZE / ANALYZE", f"{stale / fresh:.2f}", "ratio")


def drain_processes(report: Report, count: int, concurrency: int, processes: int) -> float | None:
    """W2 by ``manage.py xjobs_worker --processes N`` (child processes, as deployed): jobs/s by
    the database clock from just before the start to the last ack; the supervisor is then
    stopped with SIGTERM. Statements are not counted: they are sent by other processes."""
    from django_xjobs.testing.postgres import database_url

    truncate()
    fill_ready(count)
    label = f"W2 c={concurrency} --processes {processes}"
    say(f"{label}: draining {count} jobs ...")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where bench/ is
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, DATABASE_URL=database_url(), DJANGO_SETTINGS_MODULE="bench.settings")
    env["PYTHONPATH"] = path
    command = [sys.executable, "-m", "django", "xjobs_worker", "--queues", "default"]
    command += ["--concurrency", str(concurrency), "--processes", str(processes)]
    (db_start,) = sql("SELECT clock_timestamp()")[0]
    with measured() as window:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
        drained = wait_until(
            lambda: proc.poll() is not None or state_counts().get("done", 0) >= count,
            DRAIN_TIMEOUT,
            interval=POLL,
        )
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(JOIN_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
            report.problem(f"{label}: the supervisor did not exit within {JOIN_TIMEOUT:g}s")
    if not drained:
        report.problem(f"{label}: not drained within {DRAIN_TIMEOUT:g}s")
    if code != 0:
        report.problem(f"{label}: the supervisor exited with code {code}")
    stored = state_counts()
    done = stored.get("done", 0)
    if stored != {"done": count}:
        report.problem(f"{label}: expected {count} done rows, found {stored}")
    if not done:
        return None
    (last_ack,) = sql("SELECT max(updated_at) FROM x_jobs WHERE state = 'done'")[0]
    elapsed = (last_ack - db_start).total_seconds()
    rate = done / elapsed
    say(f"    {rate:,.0f} jobs/s ({elapsed:.2f}s to the last ack, process start included)")
    report.add(
        label,
        f"{rate:,.0f}",
        "jobs/s",
        f"{done} jobs in {elapsed:.2f}s, process start included",
        window.cost.per_job(done, statements=False),
    )
    return rate if stored == {"done": count} else None


def wait_until(predicate: Any, timeout: float, interval: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


# --- report ----------------------------------------------------------------------------------


def environment() -> list[tuple[str, str]]:
    import django
    import psycopg

    (server,) = sql("SHOW server_version")[0]
    durability = ", ".join(
        f"{name}={sql(f'SHOW {name}')[0][0]}"
        for name in ("fsync", "synchronous_commit", "autovacuum_naptime")
    )
    where = "DATABASE_URL" if os.environ.get("DATABASE_URL") else "embedded"
    return [
        ("PostgreSQL", f"{server} ({where}), {durability}"),
        ("Python", f"{platform.python_version()} ({platform.python_implementation()})"),
        ("Django", django.get_version()),
        ("psycopg", psycopg.__version__),
        ("machine", f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs"),
    ]


def render(report: Report, env: list[tuple[str, str]]) -> str:
    lines = [f"{key + ':':<12}{value}" for key, value in env]
    header = ("workload", "figure", "unit", "per job", "notes")
    body = [(r.workload, r.figure, r.unit, r.cost, r.note) for r in report.rows]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(4)]

    def line(cells: tuple[str, ...]) -> str:
        workload, figure, unit, cost, note = cells
        padded = (
            workload.ljust(widths[0]),
            figure.rjust(widths[1]),
            unit.ljust(widths[2]),
            cost.ljust(widths[3]),
        )
        return "  ".join((*padded, note)).rstrip()

    rule = "-" * (sum(widths) + 6 + max(len(row[4]) for row in [header, *body]) + 2)
    lines += ["", line(header), rule, *(line(row) for row in body)]
    for table in report.tables:
        lines += ["", table]
    if report.problems:
        lines += ["", "problems:", *(f"  - {p}" for p in report.problems)]
    return "\n".join(lines)


def drain_workloads(report: Report, args: argparse.Namespace) -> None:
    """W2 at each ``--concurrency``, then on the backlog, then by worker processes."""
    from django_xjobs.worker.heap import settle_heap

    settle_heap()  # as xjobs_worker does before its first claim
    best: tuple[float, int] | None = None
    for concurrency in args.concurrency:
        rate = drain_rate(report, args.jobs, concurrency)
        if rate is not None and (best is None or rate > best[0]):
            best = (rate, concurrency)
    if best is not None:
        report.add("W2 drain, best", f"{best[0]:,.0f}", "jobs/s", f"at concurrency {best[1]}")
    widest = max(args.concurrency)
    if args.backlog:
        drain_backlog(report, args.backlog, widest)
    if args.processes:
        one = drain_processes(report, args.jobs, widest, 1)
        many = drain_processes(report, args.jobs, widest, args.processes)
        if one and many:
            report.add(f"W2 --processes {args.processes} / 1", f"{many / one:.2f}", "ratio")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    if args.encrypt:  # read by bench/settings.py, here and in the worker processes it starts
        os.environ["XJOBS_BENCH_ENCRYPT"] = "1"
    from bench.measure import COUNTER

    COUNTER.install()
    if not os.environ.get("DATABASE_URL"):
        say("DATABASE_URL is unset: starting an embedded PostgreSQL (a few seconds) ...")

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    existing = sql("SELECT count(*) FROM x_jobs")[0][0]
    if existing and not args.force and not args.input_reuse:
        say(f"x_jobs is not empty ({existing} rows) and the benchmark truncates it:")
        say("point DATABASE_URL at a scratch database, or pass --force to delete them")
        return 2

    report = Report()
    env = environment()
    if "W1" in args.workloads:
        enqueue_rate(report, args.jobs)
    if "W2" in args.workloads:
        drain_workloads(report, args)
    if "FLOOR" in args.workloads:
        from bench.floor import floor

        floor(report, args.jobs, args.floor_batch, args.floor_rounds)
    if "W3" in args.workloads:
        from bench.latency import enqueue_latency

        enqueue_latency(report, args.latency_samples, args.latency_spacing)
    if "W5" in args.workloads:
        from bench.latency import event_latency

        event_latency(report, args.latency_samples, args.latency_spacing)
    if "W4" in args.workloads:
        from bench.backfill import backfill_rate

        backfill_rate(report, args.backfill_rows)
    if "SOAK" in args.workloads:
        from bench.soak import soak

        soak(
            report,
            args.soak_jobs,
            args.soak_wave,
            args.soak_keep,
            max(args.concurrency),
            naptime=args.soak_naptime,
            finished=args.soak_finished,
        )
    if "LIMITS" in args.workloads:
        from bench.limits import limits

        limits(report, args)
    if "BULK" in args.workloads:
        from bench.bulk import bulk_retry

        bulk_retry(report, args)
    if "HISTORY" in args.workloads:
        from bench.history import history

        history(report, args)
    if "INPUT10M" in args.workloads:
        from bench.inputs import input_filter

        input_filter(report, args)
    if not args.input_reuse:
        truncate()

    print(render(report, env))
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
