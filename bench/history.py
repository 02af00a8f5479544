"""HISTORY: finished jobs out of the hot table (issue 46), measured.

- **claim**: what one claim of 10 rows reads (shared buffers, by ``EXPLAIN (ANALYZE,
  BUFFERS)``) and takes (ms, the mean of ``--history-claims`` real claims through the driver),
  on a queue of 20,000 ready rows, with (a) nothing else in ``x_jobs``, (b)
  ``--history-rows`` finished rows still in ``x_jobs`` (no history; vacuumed and analyzed, the
  best case of the old way), (c) the same rows moved to ``x_job_history``.
- **move**: the batched mover's rate on those rows (1,000 per statement), and what 10 million
  would take at that rate.
- **retention**: a day of ``--history-rows`` done jobs dropped as a partition (its step delete
  included: it has none), against the batched ``DELETE`` of ``xjobs prune`` it replaces, on the
  same rows put back in ``x_jobs``.
- **fill**, **claims**, **clear**: the issue's goal at scale, in runs of their own so that only
  the timing holds the benchmark lock: ``fill`` puts ``--history-fill`` done rows straight into
  ``x_job_history`` by SQL (ten days of partitions; minutes, and it is kept), ``claims`` times
  the claim with the history as it is (its row count in the label), ``clear`` empties it. Run
  against a server of your own (``DATABASE_URL``): the embedded one goes at exit.
"""

from __future__ import annotations

import time
from typing import Any

from bench.run import Report, fill_ready, say, sql, truncate

READY = 20_000
CLAIM = 10


def fill_done(count: int, days_ago: float) -> None:
    """``count`` done ``noop`` rows that finished ``days_ago`` days ago, in one statement."""
    from bench.jobs import noop

    sql(
        """
        INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt,
                            max_attempts, state, priority, run_at, created_at, updated_at,
                            result)
        SELECT gen_random_uuid(), %(name)s, 'default', jsonb_build_object('n', g),
               'done:' || g, gen_random_uuid(), 1, 3, 'done', 0, t.at, t.at, t.at,
               '{"ok": true}'::jsonb
        FROM generate_series(1, %(count)s) AS g,
             LATERAL (SELECT date_trunc('day', now()) - make_interval(days => %(days)s)
                             + make_interval(secs => g * 0.01) AS at) AS t
        """,
        {"name": noop.name, "count": count, "days": int(days_ago)},
    )


def claim_cost(report: Report, label: str, claims: int) -> None:
    from bench.soak import claim_buffers
    from django_xjobs.drivers import get_driver

    # the same live rows in every case: only what else x_jobs holds (or held) differs
    sql("DELETE FROM x_jobs WHERE state IN ('ready', 'running')")
    fill_ready(READY, analyze=False)
    sql("VACUUM ANALYZE x_jobs")
    buffers = claim_buffers(CLAIM)
    runs = get_driver().runs()
    started = time.perf_counter()
    for _ in range(claims):
        runs.claim(
            queues=["default"],
            limit=CLAIM,
            visibility_timeout=60,
            worker_id="bench-history",
            lapsed=False,
        )
    ms = (time.perf_counter() - started) * 1000 / claims
    _add(report, f"HISTORY claim, {label}", f"{ms:.2f}", "ms/claim", f"{buffers} buffers")


def _add(report: Report, *row: str) -> None:
    """A figure in the table, and on stderr at once: a run cut short keeps what it measured."""
    report.add(*row)
    say("  " + "  ".join(row))


def history(report: Report, args: Any) -> None:
    """``--history-parts``: ``move`` (the claims, the move, the drop) and ``delete`` (the
    DELETE the drop replaces), each short enough for one run."""
    sql("TRUNCATE x_job_steps")
    if "clear" in args.history_parts:
        clear_history()
    if "fill" in args.history_parts:
        fill_history(args.history_fill)
    if "claims" in args.history_parts:
        truncate()
        [(held,)] = sql("SELECT count(*) FROM x_job_history")
        claim_cost(report, f"{held:,} in history", args.history_claims)
        truncate()
    if "move" in args.history_parts:
        move_and_drop(report, args.history_rows, args.history_claims)
    if "delete" in args.history_parts:
        delete(report, args.history_rows)


def move_and_drop(report: Report, rows: int, claims: int) -> None:
    from django_xjobs.drivers import get_driver

    driver = get_driver()
    truncate()
    claim_cost(report, "empty table", claims)
    truncate()
    say(f"HISTORY: {rows:,} done rows in x_jobs ...")
    fill_done(rows, days_ago=2)
    claim_cost(report, f"{rows:,} finished in x_jobs", claims)

    say("HISTORY: moving them to x_job_history ...")
    started = time.perf_counter()
    moved = driver.history().move_finished(grace=3600)
    elapsed = time.perf_counter() - started
    _add(
        report, "HISTORY move", f"{moved / elapsed:,.0f}", "rows/s", f"{moved:,} in {elapsed:.1f} s"
    )
    _add(report, "HISTORY move, 10 M rows", f"{10_000_000 / (moved / elapsed) / 60:.1f}", "min")
    claim_cost(report, f"{moved:,} in history", claims)

    say("HISTORY: retention as a partition drop ...")
    started = time.perf_counter()
    dropped = driver.history().drop_partitions({"done": 86400})
    elapsed = time.perf_counter() - started
    _add(
        report,
        "HISTORY retention, drop",
        f"{elapsed:.3f}",
        "s",
        f"{len(dropped)} day(s), {moved:,} jobs",
    )
    truncate()
    for day in driver.history().partitions():  # leave no partition behind
        sql(f"DROP TABLE IF EXISTS {day.name}")


def delete(report: Report, rows: int) -> None:
    from django_xjobs.drivers import get_driver

    driver = get_driver()
    truncate()
    fill_done(rows, days_ago=2)
    sql("ANALYZE x_jobs")
    say("HISTORY: retention as the DELETE it replaces ...")
    started = time.perf_counter()
    deleted = driver.jobs().prune(older_than=86400, states=["done"])["done"]
    elapsed = time.perf_counter() - started
    _add(report, "HISTORY retention, DELETE", f"{elapsed:.3f}", "s", f"{deleted:,} jobs")
    truncate()


#: the days ``fill`` spreads its rows over (a partition each)
FILL_DAYS = 10


def fill_history(count: int) -> None:
    """``count`` done ``noop`` jobs straight into x_job_history (as the mover leaves them),
    spread over the ``FILL_DAYS`` days before today, a day's statement at a time; nothing when
    it already holds that many."""
    from datetime import timedelta

    from bench.jobs import noop
    from django_xjobs.drivers.postgres.archive import _create, partition_name

    [(held,)] = sql("SELECT count(*) FROM x_job_history")
    if held == count:
        say(f"HISTORY: x_job_history already holds {count:,} rows")
        return
    clear_history()
    [(today,)] = sql("SELECT (now() AT TIME ZONE 'UTC')::date")
    per_day = count // FILL_DAYS
    for back in range(FILL_DAYS, 0, -1):
        day = today - timedelta(days=back)
        for statement in _create("done", partition_name("done", day), day):
            sql(statement)
        rows = per_day if back > 1 else count - per_day * (FILL_DAYS - 1)
        say(f"HISTORY: {rows:,} done rows into {partition_name('done', day)} ...")
        sql(
            """
            INSERT INTO x_job_history (id, name, queue, input, idempotency_key, run_id, attempt,
                                       max_attempts, state, priority, run_at, created_at,
                                       updated_at, result, finished_at)
            SELECT gen_random_uuid(), %(name)s, 'default', jsonb_build_object('n', g),
                   'done:' || %(day)s || ':' || g, gen_random_uuid(), 1, 3, 'done', 0,
                   t.at, t.at, t.at, '{"ok": true}'::jsonb, t.at
            FROM generate_series(1, %(count)s) AS g,
                 LATERAL (SELECT %(day)s::timestamptz
                                 + make_interval(secs => g * 86000.0 / %(count)s)) AS t(at)
            """,
            {"name": noop.name, "count": rows, "day": day.isoformat() + " 00:00+00"},
        )
    sql("VACUUM ANALYZE x_job_history")


def clear_history() -> None:
    """The history emptied: every day's partition dropped."""
    from django_xjobs.drivers import get_driver

    for day in get_driver().history().partitions():
        sql(f"DROP TABLE IF EXISTS {day.name}")
