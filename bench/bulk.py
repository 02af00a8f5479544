"""BULK: an incident's retry by filter (issue 45), and what it costs a worker draining another
queue while it runs.

- **alone**: W2's drain of ``--bulk-drain`` no-op runs on queue ``default``, one burst worker at
  the widest ``--concurrency``, with nothing else running: jobs/s by the database clock.
- **retry**: ``--bulk-dead`` dead jobs of queue ``incident``, each with ``last_error``
  ``"X_TERMINAL: ..."``, retried by filter while the same drain runs on ``default``: the
  retry's wall time and rate, and the drain's rate over the retry's window by the database
  clock, against the drain alone (the goal: within 20 %). The retry runs as an operator runs
  it, in a process of its own: ``manage.py xjobs retry --state dead --queue incident
  --error-code X_TERMINAL --yes --json`` (``--bulk-route cli``, the default), so its Python
  does not share the worker's interpreter; ``--bulk-route thread`` calls ``retry_jobs`` on a
  thread of the benchmark process instead, as the first measurement did.
- **beside**: the same drain's rate in the ``BRACKET`` seconds just before the retry starts and
  just after it ends, by the database clock: the drain alone on the very table, process and
  moment of the retry. The goal's ratio is taken against it (``during / beside``); the ratio to
  the separate run above is printed too. A drain alone minutes before moved by a third between
  runs on a shared 2-core machine, more than the retry's own effect, so a ratio against it said
  more of the machine than of the retry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

from bench.run import Report, WorkerThread, drain_rate, say, sql, state_counts, truncate

#: seconds of the drain measured alone just before and just after the retry
BRACKET = 3.0

#: the operator's command: the same filter as the thread route's ``retry_jobs`` call
RETRY_COMMAND = [
    "xjobs",
    "retry",
    "--state",
    "dead",
    "--queue",
    "incident",
    "--error-code",
    "X_TERMINAL",
    "--yes",
    "--json",
]


def fill_dead(count: int) -> None:
    """``count`` dead rows of queue ``incident``, as a terminal failure leaves them."""
    from bench.jobs import noop

    sql(
        """
        INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt,
                            max_attempts, state, stop_reason, last_error, priority, run_at,
                            created_at, updated_at)
        SELECT gen_random_uuid(), %(name)s, 'incident',
               jsonb_build_object('n', g, 'order_id', g %% 1000),
               'dead:' || g, gen_random_uuid(), 1, 3, 'dead', 'terminal',
               'X_TERMINAL: the partner answered 503', 0, now(), now(), now()
        FROM generate_series(1, %(count)s) AS g
        """,
        {"name": noop.name, "count": count},
    )


def bulk_retry(report: Report, args: Any) -> None:
    from bench.run import fill_ready
    from django_xjobs import retry_jobs
    from django_xjobs.worker.worker import Worker

    widest = max(args.concurrency)
    alone = drain_rate(report, args.bulk_drain, widest, title="alone (BULK)")
    truncate()
    fill_dead(args.bulk_dead)
    # twice the backlog: the drain must outlast the window before, the retry and the window after
    fill_ready(2 * args.bulk_drain)  # ANALYZEs the table with both kinds of rows in it
    say(f"BULK: retrying {args.bulk_dead} dead jobs by filter while a worker drains ...")
    worker = Worker(queues=["default"], concurrency=widest, burst=True)
    thread = WorkerThread(worker)
    thread.start()
    time.sleep(0.5)  # past the worker's start: its threads are claiming
    (before_start,) = sql("SELECT clock_timestamp()")[0]
    time.sleep(BRACKET)  # the drain alone, just before the retry
    (db_start,) = sql("SELECT clock_timestamp()")[0]
    started = time.perf_counter()
    answer: list[Any] = []
    if args.bulk_route == "cli":
        answer.append(_retry_by_command(report))
    else:
        retrier = threading.Thread(
            target=lambda: answer.append(
                retry_jobs(
                    state="dead", queue="incident", error_code="X_TERMINAL", by="bench"
                ).to_json()
            )
        )
        retrier.start()
        retrier.join()
    seconds = time.perf_counter() - started
    (db_end,) = sql("SELECT clock_timestamp()")[0]
    time.sleep(BRACKET)  # the drain alone again, just after it
    (after_end,) = sql("SELECT clock_timestamp()")[0]
    left = sql("SELECT count(*) FROM x_jobs WHERE queue = 'default' AND state = 'ready'")[0][0]
    if not left:
        report.problem("BULK: the drain's backlog ran out before the window after the retry")
    # the batches' own window by the server's clock: the first batch's transaction start (the
    # retried rows' updated_at) to the audit row written after the last batch
    (first_batch, recorded) = sql(
        "SELECT (SELECT min(updated_at) FROM x_jobs WHERE queue = 'incident'),"
        " (SELECT max(at) FROM x_operator_actions WHERE verb = 'retry_jobs')"
    )[0]
    batches_window = (
        (recorded - first_batch).total_seconds() if first_batch and recorded else float("nan")
    )
    drained_meanwhile = sql(
        "SELECT count(*) FROM x_jobs WHERE queue = 'default' AND state = 'done'"
        " AND updated_at >= %s AND updated_at <= %s",
        [db_start, db_end],
    )[0][0]
    beside_done = sql(
        "SELECT count(*) FROM x_jobs WHERE queue = 'default' AND state = 'done'"
        " AND (updated_at >= %s AND updated_at < %s OR updated_at > %s AND updated_at <= %s)",
        [before_start, db_start, db_end, after_end],
    )[0][0]
    beside_window = (db_start - before_start + after_end - db_end).total_seconds()
    beside = beside_done / beside_window if beside_window > 0 else 0.0
    thread.finish(report, "BULK drain")  # the rest of the backlog is not measured
    counts = state_counts()
    result = answer[0] if answer else None
    changed = result.get("changed") if result else None
    if changed != args.bulk_dead:
        report.problem(f"BULK: expected {args.bulk_dead} retried, got {result}")
    window = (db_end - db_start).total_seconds()
    during = drained_meanwhile / window if window > 0 else 0.0
    say(
        f"    retried {changed} in {seconds:.2f}s ({batches_window:.2f}s of batches);"
        f" drain {during:,.0f} jobs/s meanwhile"
    )
    route = "its own process, startup included" if args.bulk_route == "cli" else "a thread"
    report.add(
        "BULK retry by filter",
        f"{seconds:.2f}",
        "s",
        f"{args.bulk_dead} dead jobs on {route}, {result and result.get('batches')} batches "
        f"({args.bulk_dead / seconds:,.0f} jobs/s); batches {batches_window:.2f}s by the "
        f"server's clock; rows after: {counts}",
    )
    report.add(
        "BULK drain during the retry",
        f"{during:,.0f}",
        "jobs/s",
        f"{drained_meanwhile} jobs in the retry's {window:.2f}s",
    )
    report.add(
        "BULK drain just before and after",
        f"{beside:,.0f}",
        "jobs/s",
        f"{beside_done} jobs in the {beside_window:.2f}s around the retry, on the same table",
    )
    if beside:
        report.add("BULK drain during / beside", f"{during / beside:.2f}", "ratio", "goal >= 0.80")
    if alone:
        report.add(
            "BULK drain during / alone", f"{during / alone:.2f}", "ratio", "the separate run above"
        )
    truncate()


def _retry_by_command(report: Report) -> dict[str, Any] | None:
    """``manage.py xjobs retry ... --yes --json`` in a child process: its answer, or None."""
    from django_xjobs.testing.postgres import database_url

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where bench/ is
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, DATABASE_URL=database_url(), DJANGO_SETTINGS_MODULE="bench.settings")
    env["PYTHONPATH"] = path
    done = subprocess.run(
        [sys.executable, "-m", "django", *RETRY_COMMAND],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        report.problem(f"BULK: the retry command exited {done.returncode}: {done.stderr[-500:]}")
        return None
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer
