"""LIMITS: what fleet-wide limits cost and what fair share buys (issue 31), in one run so the
figures compare.

- **drain**: W2's drain of ``--jobs`` no-op runs with no limit declared, then of as many runs of
  a job declaring ``concurrency=1, limit_key="{k}"`` spread over ``--limit-keys`` keys, same
  worker settings, alternated ``--limit-rounds`` times; the ratio of the best of each.
- **poll**: PostgreSQL CPU and statements per claim poll, ``--limit-polls`` polls made as an idle
  worker makes them (the plain poll, and the sweep an idle worker sends each pass), with a
  ``--limit-backlog`` backlog of one key whose rate window is spent, against the same polls on an
  empty queue.
- **fair share**: ``--fair-a`` runs of tenant A draining under one worker, then ``--fair-b`` runs
  of tenant B enqueued one by one; B's wait from enqueue to start, with ``FAIR_SHARE = "tenant"``
  and without it.

The two limited jobs are declared here, not in ``bench/jobs.py``: registered only when this
workload runs, they change nothing the other workloads measure (an outbox publish looks for the
limited jobs' runs to give them their keys).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from bench.run import (
    DRAIN_TIMEOUT,
    Report,
    WorkerThread,
    drain_rate,
    measured,
    percentile,
    say,
    sql,
    state_counts,
    truncate,
    wait_until,
)
from django_xjobs import job

#: rows the fair-share drain must have finished before tenant B enqueues (the worker is busy)
FAIR_HEAD_START = 500
#: polls sent before each timed window of polls
WARM_UP = 20
#: tenant B's inputs start here, clear of A's ``n`` (both are ``noop`` runs)
FAIR_B_BASE = 10_000_000


@job(idempotency_key="keyed:{n}", queue="limits", concurrency=1, limit_key="{k}")
def keyed(ctx, n: int, k: int):
    return None


@job(idempotency_key="throttled:{n}", queue="throttled", rate_limit="1/h", limit_key="{k}")
def throttled(ctx, n: int, k: int):
    return None


def fill(
    handle: Any, count: int, *, keys: int, tenant: str | None = None, fair: bool = False
) -> None:
    """``count`` ready runs of ``handle`` in one statement, run ``g`` with input ``k = g % keys``
    and keyed by it, ordered as sequential enqueues would be (``run.fill_ready``); ``keys=0``:
    no ``k``, no key. ``tenant``: the runs are that tenant's; with ``fair`` keyed by it, as
    ``FAIR_SHARE = "tenant"`` keys them at enqueue."""
    from django_xjobs.limits.keys import SEPARATOR

    if fair:
        key = "%(sep)s || %(tenant)s"
    elif keys:
        key = "%(name)s || %(sep)s || (g %% %(keys)s)::text"
    else:
        key = "NULL"
    statement = """
        INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt,
                            max_attempts, state, priority, run_at, created_at, updated_at,
                            limit_key, tenant_id)
        SELECT gen_random_uuid(), %(name)s, %(queue)s,
               jsonb_build_object('n', g) || CASE WHEN %(keys)s > 0
                   THEN jsonb_build_object('k', g %% greatest(%(keys)s, 1)) ELSE '{}' END,
               %(prefix)s || g, gen_random_uuid(), 0, %(max_attempts)s, 'ready', %(priority)s,
               t.at, t.at, t.at, KEY, %(tenant)s
        FROM generate_series(1, %(count)s) AS g,
             LATERAL (SELECT now() - make_interval(secs => (%(count)s - g) / 1e6) AS at) AS t
        """
    sql(
        statement.replace("KEY", key),
        {
            "name": handle.name,
            "queue": handle.queue,
            "max_attempts": handle.retry.attempts,
            "priority": handle.priority,
            "prefix": handle.name.rsplit(".", 1)[-1] + ":",
            "count": count,
            "keys": keys,
            "sep": SEPARATOR,
            "tenant": tenant,
        },
    )
    sql("ANALYZE x_jobs")


def reset() -> None:
    truncate()
    sql("TRUNCATE x_limit_keys")


def drain_keyed(report: Report, count: int, keys: int, concurrency: int) -> float | None:
    """W2's drain, of ``keyed`` runs over ``keys`` keys (one run per key at once)."""
    from django_xjobs.worker.worker import Worker

    reset()
    fill(keyed, count, keys=keys)
    label = f"LIMITS drain c={concurrency}, concurrency=1 per key over {keys} keys"
    say(f"{label}: {count} jobs ...")
    worker = Worker(queues=[keyed.queue], concurrency=concurrency, burst=True)
    (db_start,) = sql("SELECT clock_timestamp()")[0]
    with measured() as window:
        thread = WorkerThread(worker)
        thread.drain(report, label)
    stored = state_counts()
    done = stored.get("done", 0)
    complete = stored == {"done": count}
    if not complete:
        report.problem(f"{label}: expected {count} done rows, found {stored}")
    if not done:
        return None
    (last_ack,) = sql("SELECT max(updated_at) FROM x_jobs WHERE state = 'done'")[0]
    elapsed = (last_ack - db_start).total_seconds()
    rate = done / elapsed
    say(f"    {rate:,.0f} jobs/s ({elapsed:.2f}s to the last ack)")
    note = f"{done} jobs in {elapsed:.2f}s"
    report.add(
        label,
        f"{rate:,.0f}",
        "jobs/s",
        note if complete else f"INCOMPLETE: {note}",
        window.cost.per_job(done),
    )
    return rate if complete else None


def drains(report: Report, count: int, keys: int, concurrency: int, rounds: int) -> None:
    """(a) no limit against a per-key limit, alternated so a slow stretch of a shared machine
    falls on both; the ratio of the best of each (the goal: at least 0.9)."""
    plain: list[float] = []
    limited: list[float] = []
    for _ in range(rounds):
        reset()
        rate = drain_rate(report, count, concurrency, title="LIMITS no limit")
        if rate:
            plain.append(rate)
        rate = drain_keyed(report, count, keys, concurrency)
        if rate:
            limited.append(rate)
    if plain and limited:
        report.add(
            f"LIMITS drain: per key / no limit (best of {rounds})",
            f"{max(limited) / max(plain):.2f}",
            "ratio",
            "goal >= 0.9",
        )


def _polls(handle: Any, polls: int, limit: int, *, sweep: bool, limited: bool) -> Any:
    """``polls`` claims from ``handle``'s queue as an idle worker sends them (its claim
    limits, ``lapsed`` on the sweep); the window's cost. A poll that claims a run is a problem
    of the setup, reported by the caller."""
    from django_xjobs.drivers import get_driver
    from django_xjobs.limits.worker import LimitPlan

    driver = get_driver()
    queues = [handle.queue]
    limits = LimitPlan(driver, queues, interval=1.0).for_queues(queues, sweep) if limited else None
    more = {} if limits is None else {"limits": limits}

    def poll() -> int:
        return len(
            driver.runs().claim(
                queues=queues,
                limit=limit,
                visibility_timeout=30.0,
                worker_id="bench-poll",
                lapsed=sweep,
                **more,
            )
        )

    claimed = sum(poll() for _ in range(WARM_UP))  # the connection's first plans are not timed
    with measured() as window:
        claimed += sum(poll() for _ in range(polls))
    return window, claimed


def _per_poll(window: Any, polls: int) -> tuple[float | None, str]:
    cpu = window.cost.backend_cpu
    ms = None if cpu is None else cpu / polls * 1000
    return ms, window.cost.per_job(polls)


def poll_cost(report: Report, backlog: int, polls: int, limit: int) -> None:
    """(b) PostgreSQL CPU per claim poll: a ``backlog`` of one key whose window is spent
    (``rate_limit="1/h"``, one start recorded) against an empty queue, for the plain poll and
    the sweep; the plain claim on an empty queue for reference. The goal: at most 2x."""
    reset()
    say(f"LIMITS poll: {polls} polls of an empty queue, without and with the limited claim ...")
    figures: dict[tuple[str, bool], float | None] = {}
    window, _ = _polls(throttled, polls, limit, sweep=False, limited=False)
    ms, cost = _per_poll(window, polls)
    report.add(
        "LIMITS poll, empty queue, plain claim",
        "n/a" if ms is None else f"{ms:.3f}",
        "PG ms/poll",
        f"{polls} polls, reference",
        cost,
    )
    for sweep in (False, True):
        window, _ = _polls(throttled, polls, limit, sweep=sweep, limited=True)
        figures[("empty", sweep)], cost = _per_poll(window, polls)
        ms = figures[("empty", sweep)]
        report.add(
            f"LIMITS {'sweep' if sweep else 'poll'}, empty queue",
            "n/a" if ms is None else f"{ms:.3f}",
            "PG ms/poll",
            f"{polls} polls",
            cost,
        )
    fill(throttled, backlog, keys=1)
    # the key's window is spent: one start now, at most one an hour
    sql(
        """
        INSERT INTO x_limit_keys (key, starts, updated_at)
        SELECT DISTINCT limit_key, ARRAY[now()], now() FROM x_jobs
        """
    )
    say(f"LIMITS poll: {polls} polls with a throttled backlog of {backlog} runs of one key ...")
    for sweep in (False, True):
        window, claimed = _polls(throttled, polls, limit, sweep=sweep, limited=True)
        if claimed:
            report.problem(f"LIMITS poll: the throttled key's runs were claimed ({claimed})")
        figures[("backlog", sweep)], cost = _per_poll(window, polls)
        ms = figures[("backlog", sweep)]
        name = "sweep" if sweep else "poll"
        report.add(
            f"LIMITS {name}, {backlog:,} throttled runs of one key",
            "n/a" if ms is None else f"{ms:.3f}",
            "PG ms/poll",
            f"{polls} polls",
            cost,
        )
        empty = figures[("empty", sweep)]
        if ms is not None and empty:
            report.add(
                f"LIMITS {name}: throttled backlog / empty queue",
                f"{ms / empty:.2f}",
                "ratio",
                "goal <= 2",
            )
    reset()


def fair_wait(report: Report, first: int, second: int, concurrency: int, *, fair: bool) -> None:
    """(c) tenant A's ``first`` runs draining under one burst worker; once it has finished
    ``FAIR_HEAD_START`` of them, tenant B's ``second`` runs are enqueued one by one. B's wait is
    each run's ``started_at - created_at`` on the server's clock."""
    from django.conf import settings
    from django.test import override_settings

    from bench.jobs import noop
    from django_xjobs.worker.worker import Worker

    share = {**getattr(settings, "XJOBS", {}), "FAIR_SHARE": "tenant"} if fair else None
    label = f"LIMITS fair share {'on' if fair else 'off'}"
    reset()
    with override_settings(XJOBS=share) if share else contextlib.nullcontext():
        fill(noop, first, keys=0, tenant="A", fair=fair)
        say(f"{label}: tenant A {first} runs, then tenant B {second} ...")
        worker = Worker(queues=[noop.queue], concurrency=concurrency, burst=True)
        thread = WorkerThread(worker)
        thread.start()
        head = min(FAIR_HEAD_START, first // 2)
        busy = wait_until(lambda: state_counts().get("done", 0) >= head, DRAIN_TIMEOUT, 0.05)
        if not busy:
            report.problem(f"{label}: tenant A's runs did not start within {DRAIN_TIMEOUT:g}s")
        handle = noop.using(tenant_id="B")
        for n in range(second):
            handle.enqueue(n=FAIR_B_BASE + n)

        def b_done() -> bool:
            rows = sql("SELECT count(*) FROM x_jobs WHERE tenant_id = 'B' AND state = 'done'")
            return rows[0][0] >= second or not thread.is_alive()

        if not wait_until(b_done, DRAIN_TIMEOUT, 0.1):
            report.problem(f"{label}: tenant B's runs not done within {DRAIN_TIMEOUT:g}s")
        thread.finish(report, label)
    if fair:
        unkeyed = sql("SELECT count(*) FROM x_jobs WHERE tenant_id = 'B' AND limit_key IS NULL")
        if unkeyed[0][0]:
            report.problem(f"{label}: {unkeyed[0][0]} of tenant B's runs carry no fair-share key")
    waits = sorted(
        row[0]
        for row in sql(
            """
            SELECT EXTRACT(EPOCH FROM started_at - created_at)::float8 FROM x_jobs
            WHERE tenant_id = 'B' AND started_at IS NOT NULL
            """
        )
    )
    a_left = sql("SELECT count(*) FROM x_jobs WHERE tenant_id = 'A' AND state <> 'done'")[0][0]
    if len(waits) < second:
        report.problem(f"{label}: only {len(waits)} of tenant B's {second} runs started")
    if waits:
        p50, p95 = percentile(waits, 50), percentile(waits, 95)
        say(f"    B's wait p50 {p50:.3f}s p95 {p95:.3f}s max {waits[-1]:.3f}s")
        report.add(
            f"{label}: B's wait p95",
            f"{p95:.3f}",
            "s",
            f"p50 {p50:.3f}, max {waits[-1]:.3f}; A had {a_left:,} of {first:,} left"
            + (", goal <= 2 s" if fair else ""),
        )
    reset()


def limits(report: Report, args: Any) -> None:
    from django_xjobs.worker.heap import settle_heap

    settle_heap()  # as xjobs_worker does before its first claim
    widest = max(args.concurrency)
    started = time.perf_counter()
    drains(report, args.jobs, args.limit_keys, widest, args.limit_rounds)
    poll_cost(report, args.limit_backlog, args.limit_polls, widest)
    fair_wait(report, args.fair_a, args.fair_b, widest, fair=True)
    fair_wait(report, args.fair_a, args.fair_b, widest, fair=False)
    say(f"LIMITS took {time.perf_counter() - started:.0f}s")
