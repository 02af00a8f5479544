"""INPUT10M: finding jobs by what they carry at 10 million rows (issue 45), only when named.

``x_jobs`` is filled in the benchmark's own database with ``--input-rows`` rows in one
``INSERT ... SELECT generate_series`` per million (not through the API): an input such as
``{"order_id": 4711, "customer": "c4711", "kind": "charge", "amount": 17}`` (three jobs an
order: ``charge``, ``email``, ``ship``; 100 jobs a customer), states mixed as a table with a
retention holds them (mostly done; dead, failed, cancelled, some waiting), ``created_at`` over
30 days. The input index (``x_jobs_input_idx``, opt-in) is dropped before the fill and
built again after it with ``CREATE INDEX CONCURRENTLY``, as a site creates it (docs/howto/incidents.md): its build
time is a row. Then ``VACUUM ANALYZE``.

Timed, each a first request (a fresh database connection, the statement's pages perhaps not in
the server's cache) and the median of ``--input-repeat`` more:

- **the admin's job list filtered by input** — ``GET /admin/django_xjobs/job/?input=...`` through
  Django's test client, logged in as a superuser: the whole view with its count and page
  queries and the template, as an operator's browser gets it. The statements it sent and the
  slowest of them are in the notes.
- **``xjobs ls --input``** — ``list_jobs(input=...)``, what the command calls.

``--input-reuse`` keeps a filled table between runs: the fill is skipped when ``x_jobs`` holds
exactly ``--input-rows`` rows of this workload's job, and the table is not emptied at the end.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.run import Report, say, sql

#: what the input filter is timed with: an order (3 jobs), a customer (100 jobs), a kind (a third)
CASES = (
    ("one order", {"order_id": 4711}),
    ("one customer", {"customer": "c4711"}),
    ("one kind (a third of the table)", {"kind": "email"}),
)
NAME = "bench.jobs.noop"
FILL = """
INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                    state, stop_reason, last_error, priority, run_at, created_at, updated_at)
SELECT gen_random_uuid(), %(name)s, q.queue,
       jsonb_build_object('order_id', g / 3, 'customer', 'c' || (g %% 100000),
                          'kind', (ARRAY['charge', 'email', 'ship'])[g %% 3 + 1],
                          'amount', g %% 500),
       'in:' || g, gen_random_uuid(), 1, 3, s.state,
       CASE s.state WHEN 'dead' THEN 'terminal' WHEN 'failed' THEN 'attempts-exhausted'
                    WHEN 'cancelled' THEN 'cancelled' END,
       CASE WHEN s.state IN ('dead', 'failed') THEN 'X_TERMINAL: the partner answered 503' END,
       0, t.at, t.at, t.at
FROM generate_series(%(low)s, %(high)s) AS g
CROSS JOIN LATERAL (SELECT CASE WHEN g %% 100 < 85 THEN 'done' WHEN g %% 100 < 90 THEN 'dead'
                                WHEN g %% 100 < 94 THEN 'failed'
                                WHEN g %% 100 < 96 THEN 'cancelled'
                                WHEN g %% 100 < 99 THEN 'ready' ELSE 'delayed' END AS state) AS s
CROSS JOIN LATERAL (SELECT (ARRAY['default', 'emails', 'partner-sync'])[g %% 3 + 1] AS queue) AS q
CROSS JOIN LATERAL (SELECT now() - make_interval(secs => (%(high)s - g) * 0.26) AS at) AS t
"""
INDEX = "CREATE INDEX CONCURRENTLY x_jobs_input_idx ON x_jobs USING gin (input jsonb_path_ops)"
#: ``--input-index problem``: migration 0033's partial index, timed by input and state=dead,
#: with an order, a customer and a kind whose rows are dead (the fill's g % 100 in 85..89)
PROBLEM_INDEX = (
    "CREATE INDEX CONCURRENTLY x_jobs_problem_input_idx ON x_jobs USING gin "
    "(input jsonb_path_ops) WHERE state IN ('dead', 'failed', 'cancelled')"
)
PROBLEM_CASES = (
    ("one order, dead (2 of its 3 jobs)", {"order_id": 4728}),
    ("one customer, dead (100 jobs)", {"customer": "c4785"}),
    ("one kind, dead (a third of the dead)", {"kind": "email"}),
)
CHUNK = 1_000_000


def input_filter(report: Report, args: Any) -> None:
    rows = args.input_rows
    held = sql("SELECT count(*) FROM x_jobs")[0][0]
    problem = args.input_index == "problem"
    if args.input_reuse and held == rows:
        say(f"INPUT10M: reusing the {rows:,} rows x_jobs holds")
    else:
        _fill(report, rows, problem)
    if problem:
        sql("DROP INDEX IF EXISTS x_jobs_input_idx")  # the partial index alone answers
    cases = PROBLEM_CASES if problem else CASES
    state = "dead" if problem else None
    _time_admin(report, args.input_repeat, cases, state)
    _time_ls(report, args.input_repeat, cases, state)


def _fill(report: Report, rows: int, problem: bool = False) -> None:
    sql("TRUNCATE x_jobs")
    sql("DROP INDEX IF EXISTS x_jobs_input_idx")
    sql("DROP INDEX IF EXISTS x_jobs_problem_input_idx")  # built after the fill, as INDEX is
    started = time.perf_counter()
    for low in range(1, rows + 1, CHUNK):
        high = min(low + CHUNK - 1, rows)
        sql(FILL, {"name": NAME, "low": low, "high": high})
        say(f"INPUT10M: {high:,} of {rows:,} rows inserted ({time.perf_counter() - started:.0f}s)")
    filled = time.perf_counter() - started
    report.add("INPUT10M fill", f"{filled:.0f}", "s", f"{rows:,} rows, no input index")
    for name, statement in (
        ("x_jobs_problem_input_idx", PROBLEM_INDEX),
        ("x_jobs_input_idx", INDEX),
    ):
        if name == "x_jobs_input_idx" and problem:
            continue
        say(f"INPUT10M: building {name} CONCURRENTLY ...")
        started = time.perf_counter()
        sql(statement)
        built = time.perf_counter() - started
        (size,) = sql(f"SELECT pg_size_pretty(pg_relation_size('{name}'))")[0]
        (table,) = sql("SELECT pg_size_pretty(pg_relation_size('x_jobs'))")[0]
        report.add(
            f"INPUT10M {name} build (CONCURRENTLY)",
            f"{built:.0f}",
            "s",
            f"{name} {size} on {rows:,} rows (heap {table})",
        )
    started = time.perf_counter()
    sql("VACUUM ANALYZE x_jobs")
    say(f"INPUT10M: VACUUM ANALYZE {time.perf_counter() - started:.0f}s")


def _fresh_connection() -> None:
    from django.db import connection

    connection.close()


def _timed(call: Any, repeat: int) -> tuple[float, float, list[tuple[float, str]]]:
    """(first, median of the rest) in ms, and the first call's statements with their ms."""
    from django.db import connection

    statements: list[tuple[float, str]] = []

    def record(execute: Any, query: str, params: Any, many: bool, context: Any) -> Any:
        began = time.perf_counter()
        try:
            return execute(query, params, many, context)
        finally:
            statements.append(((time.perf_counter() - began) * 1000, query))

    _fresh_connection()
    with connection.execute_wrapper(record):
        began = time.perf_counter()
        call()
        first = (time.perf_counter() - began) * 1000
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        times.append((time.perf_counter() - began) * 1000)
    return first, statistics.median(times), statements


def _time_admin(report: Report, repeat: int, cases: Any = CASES, state: str | None = None) -> None:
    import json
    from urllib.parse import urlencode

    from django.contrib.auth import get_user_model
    from django.test import Client

    user_model = get_user_model()
    user_model.objects.filter(username="bench-admin").delete()
    user = user_model.objects.create_superuser("bench-admin", "bench@example.com", "x")
    client = Client()
    client.force_login(user)
    try:
        for label, wanted in cases:
            query = {"input": json.dumps(wanted)} | ({"state__exact": state} if state else {})
            url = "/admin/django_xjobs/job/?" + urlencode(query)

            def get(url: str = url) -> None:
                response = client.get(url)
                if response.status_code != 200:
                    raise RuntimeError(f"{url}: HTTP {response.status_code}")

            first, warm, statements = _timed(get, repeat)
            slow_ms, slow = max(statements)
            say(f"INPUT10M admin {label}: first {first:.0f} ms, warm {warm:.0f} ms")
            report.add(
                f"INPUT10M admin list, input {label}",
                f"{warm:.0f}",
                "ms",
                f"median of {repeat}; first {first:.0f} ms; {len(statements)} statements, "
                f"slowest {slow_ms:.0f} ms: {' '.join(slow.split())[:160]}",
            )
    finally:
        user.delete()


def _time_ls(report: Report, repeat: int, cases: Any = CASES, state: str | None = None) -> None:
    from django_xjobs import operations

    for label, wanted in cases:
        first, warm, statements = _timed(
            lambda wanted=wanted: operations.list_jobs(input=wanted, state=state, limit=100),
            repeat,
        )
        say(f"INPUT10M ls {label}: first {first:.0f} ms, warm {warm:.0f} ms")
        report.add(
            f"INPUT10M xjobs ls --input, {label}",
            f"{warm:.0f}",
            "ms",
            f"median of {repeat}; first {first:.0f} ms; list_jobs(input=..., limit=100), "
            f"{len(statements)} statements",
        )
