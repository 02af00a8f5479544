"""SOAK: many jobs enqueued and drained in waves on one table that is not emptied between
them, with retention pruning what finished more than ``--soak-keep`` waves earlier.

A queue table in production is mostly finished rows (a 7-day retention at a steady rate keeps 7
days of them) plus the dead tuples every claim, ack and prune leaves until a vacuum. The soak
grows that table wave by wave and reports, per wave, what the queue costs on it: enqueue and
drain throughput, the table's and its indexes' sizes, dead tuples, HOT updates, and the buffers
one claim reads, on a full queue and on a drained one (the idle worker's poll). The goal is a
last wave as fast as the first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

ENQUEUE_BATCH = 1000  # inputs per enqueue_many call: a bulk producer's transaction
CLAIM_LIMIT = 16  # the claim measured with EXPLAIN takes this many rows (a worker's batch)


@dataclass
class Wave:
    number: int
    enqueue_rate: float
    drain_rate: float
    claim_full: int  # buffers of one claim on the wave's full queue
    claim_idle: int  # buffers of one claim on the drained queue
    pruned: int
    prune_seconds: float
    heap_mb: float
    index_mb: float
    live: int
    dead: int
    hot_pct: float  # HOT updates among this wave's updates, in %
    vacuums: int  # autovacuum runs on x_jobs during the wave


def claim_buffers(limit: int = CLAIM_LIMIT) -> int:
    """Shared buffers (hit + read) one claim of ``limit`` rows reads, by ``EXPLAIN (ANALYZE,
    BUFFERS)``; the claim runs for real inside a transaction that is then rolled back."""
    from django.db import connection, transaction

    from django_xjobs.drivers.postgres import STATEMENTS

    params = {"queues": ["default"], "limit": limit, "worker_id": "soak-explain"}
    params["visibility_timeout"] = 60
    params["versions"] = "{}"
    params["paused"] = []
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + STATEMENTS["claim"], params)
            top = cursor.fetchone()[0][0]["Plan"]
        transaction.set_rollback(True)
    return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])


def table_stats() -> dict[str, Any]:
    from bench.run import sql

    row = sql(
        """
        SELECT pg_relation_size('x_jobs'), pg_indexes_size('x_jobs'), n_live_tup, n_dead_tup,
               n_tup_upd, n_tup_hot_upd, autovacuum_count
        FROM pg_stat_user_tables WHERE relname = 'x_jobs'
        """
    )[0]
    keys = ("heap", "index", "live", "dead", "upd", "hot", "vacuums")
    return dict(zip(keys, row, strict=True))


def index_sizes() -> list[tuple[str, float]]:
    from bench.run import sql

    rows = sql(
        """
        SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes
        WHERE relname = 'x_jobs' ORDER BY indexrelname
        """
    )
    return [(name, size / 2**20) for name, size in rows]


def settle_stats() -> None:
    """Make this wave's counters visible in pg_stat_user_tables (they are flushed lazily)."""
    from bench.run import sql

    sql("SELECT pg_stat_force_next_flush()")
    sql("SELECT pg_stat_clear_snapshot()")


def enqueue_wave(first: int, count: int) -> float:
    """``noop.enqueue_many`` in batches of ENQUEUE_BATCH, autocommit: jobs per second."""
    from bench.jobs import noop

    started = time.perf_counter()
    for start in range(first, first + count, ENQUEUE_BATCH):
        stop = min(start + ENQUEUE_BATCH, first + count)
        noop.enqueue_many([{"n": n} for n in range(start, stop)])
    return count / (time.perf_counter() - started)


def drain_wave(report: Any, count: int, concurrency: int, label: str) -> float | None:
    """A burst worker drains the queue: jobs per second by the database clock, from just
    before the worker starts to the wave's last ack."""
    from bench.run import WorkerThread, sql
    from django_xjobs.worker.worker import Worker

    (db_start,) = sql("SELECT clock_timestamp()")[0]
    WorkerThread(Worker(queues=["default"], concurrency=concurrency, burst=True)).drain(
        report, label
    )
    done, last_ack = sql(
        "SELECT count(*), max(updated_at) FROM x_jobs WHERE state = 'done' AND updated_at >= %s",
        [db_start],
    )[0]
    if done != count:
        report.problem(f"{label}: expected {count} jobs done, found {done}")
    if not done:
        return None
    return done / (last_ack - db_start).total_seconds()


def prune_before(cutoff: Any) -> tuple[int, float]:
    """Retention: delete the done jobs last updated before ``cutoff`` (a server timestamp) with
    the driver's own prune, as a worker's RETENTION would. (rows deleted, seconds)"""
    from bench.run import sql
    from django_xjobs.drivers import get_driver

    (age,) = sql("SELECT EXTRACT(EPOCH FROM clock_timestamp() - %s)", [cutoff])[0]
    started = time.perf_counter()
    deleted = get_driver().jobs().prune(older_than=float(age), states=["done"])["done"]
    return deleted, time.perf_counter() - started


def prefill(count: int) -> None:
    """``count`` finished jobs from before the soak, inserted in one statement and vacuumed, as
    a long-lived table holds them. They are ``failed``, so the soak's retention (which prunes
    ``done`` jobs) keeps them: a claim reads no finished row whatever its state."""
    from bench.run import say, sql

    (version,) = sql("SHOW server_version_num")[0]
    new_id = "uuidv7()" if int(version) >= 180000 else "gen_random_uuid()"  # in key order
    say(f"SOAK: {count:,} finished jobs first (one INSERT, then VACUUM ANALYZE) ...")
    started = time.perf_counter()
    sql(
        f"""
        INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt,
                            max_attempts, state, priority, run_at, created_at, updated_at,
                            last_error, stop_reason)
        SELECT {new_id}, 'bench.jobs.noop', 'default', jsonb_build_object('n', -g),
               'noop:-' || g, gen_random_uuid(), 3, 3, 'failed', 0, now(), now(), now(),
               'RuntimeError: gave up', 'attempts-exhausted'
        FROM generate_series(1, %s) AS g
        """,
        [count],
    )
    sql("VACUUM (ANALYZE) x_jobs")
    say(f"    {time.perf_counter() - started:.0f}s")


def soak(
    report: Any,
    jobs: int,
    wave_size: int,
    keep: int,
    concurrency: int,
    *,
    naptime: int | None = None,
    finished: int = 0,
) -> None:
    from bench.run import sql, wait_until

    if naptime is None:
        run_waves(report, jobs, wave_size, keep, concurrency, finished)
        return
    # autovacuum visits a database once per naptime whatever a table's own settings say: the
    # one server-wide setting that bounds how many dead entries a claim can meet
    sql(f"ALTER SYSTEM SET autovacuum_naptime = '{naptime}s'")
    sql("SELECT pg_reload_conf()")
    setting = "SELECT setting::float FROM pg_settings WHERE name = 'autovacuum_naptime'"
    wait_until(lambda: sql(setting)[0][0] == naptime, 10.0)  # the reload is asynchronous
    try:
        run_waves(report, jobs, wave_size, keep, concurrency, finished)
    finally:
        sql("ALTER SYSTEM RESET autovacuum_naptime")
        sql("SELECT pg_reload_conf()")


def run_waves(
    report: Any, jobs: int, wave_size: int, keep: int, concurrency: int, finished: int
) -> None:
    from bench.run import say, sql, truncate

    (naptime,) = sql("SHOW autovacuum_naptime")[0]

    truncate()  # a new table, as a fresh deployment has: no statistics until autovacuum's
    if finished:
        prefill(finished)
    waves: list[Wave] = []
    ends: list[Any] = []  # the server time each wave's drain ended
    before = table_stats()
    count = (jobs + wave_size - 1) // wave_size
    say(
        f"SOAK: {jobs} jobs in {count} waves of {wave_size}, retention keeps {keep} waves, "
        f"autovacuum_naptime {naptime} ..."
    )
    for number in range(1, count + 1):
        size = min(wave_size, jobs - (number - 1) * wave_size)
        label = f"SOAK wave {number}"
        enqueue = enqueue_wave((number - 1) * wave_size, size)
        full = claim_buffers()
        drain = drain_wave(report, size, concurrency, label)
        ends.append(sql("SELECT clock_timestamp()")[0][0])
        idle = claim_buffers()
        pruned, prune_seconds = prune_before(ends[-1 - keep]) if len(ends) > keep else (0, 0.0)
        settle_stats()
        after = table_stats()
        updates = after["upd"] - before["upd"]
        wave = Wave(
            number=number,
            enqueue_rate=enqueue,
            drain_rate=drain or 0.0,
            claim_full=full,
            claim_idle=idle,
            pruned=pruned,
            prune_seconds=prune_seconds,
            heap_mb=after["heap"] / 2**20,
            index_mb=after["index"] / 2**20,
            live=after["live"],
            dead=after["dead"],
            hot_pct=100 * (after["hot"] - before["hot"]) / updates if updates else 0.0,
            vacuums=after["vacuums"] - before["vacuums"],
        )
        before = after
        waves.append(wave)
        say(
            f"    wave {number}: enqueue {enqueue:,.0f}/s, drain {wave.drain_rate:,.0f}/s, "
            f"claim {full}/{idle} buffers, heap {wave.heap_mb:.0f} MB, "
            f"indexes {wave.index_mb:.0f} MB, dead {wave.dead:,}, pruned {pruned:,}"
        )
    if not waves:
        return
    first, last = waves[0], waves[-1]
    for what, a, b in (
        ("enqueue", first.enqueue_rate, last.enqueue_rate),
        ("drain", first.drain_rate, last.drain_rate),
    ):
        if a:
            note = f"wave 1 {a:,.0f}/s, wave {last.number} {b:,.0f}/s"
            report.add(f"SOAK {what}: last wave / first", f"{b / a:.2f}", "ratio", note)
    report.tables.append(render_waves(waves, wave_size, keep, concurrency, naptime, finished))
    report.tables.append(
        "x_jobs indexes at the end (MB): "
        + ", ".join(f"{name} {size:.1f}" for name, size in index_sizes())
    )
    truncate()


def render_waves(
    waves: list[Wave], wave_size: int, keep: int, concurrency: int, naptime: str, finished: int
) -> str:
    header = (
        "wave",
        "enqueue/s",
        "drain/s",
        "claim bufs full/idle",
        "heap MB",
        "index MB",
        "live rows",
        "dead rows",
        "HOT %",
        "autovac",
        "pruned (s)",
    )
    rows = [
        (
            str(w.number),
            f"{w.enqueue_rate:,.0f}",
            f"{w.drain_rate:,.0f}",
            f"{w.claim_full}/{w.claim_idle}",
            f"{w.heap_mb:,.0f}",
            f"{w.index_mb:,.0f}",
            f"{w.live:,}",
            f"{w.dead:,}",
            f"{w.hot_pct:.0f}",
            str(w.vacuums),
            f"{w.pruned:,} ({w.prune_seconds:.1f})",
        )
        for w in waves
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        f"SOAK: {finished:,} finished jobs first, then waves of {wave_size:,} jobs (enqueue_many by {ENQUEUE_BATCH}, then a burst "
        f"worker, concurrency {concurrency}); retention prunes what finished {keep} waves "
        f"earlier; autovacuum_naptime {naptime}; claim buffers: one claim of {CLAIM_LIMIT}",
        "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    for row in rows:
        cells = [
            row[0].ljust(widths[0]),
            *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
