"""BULK: an incident's retry by filter (issue 45), and what it costs a worker draining another
queue while it runs.

- **alone**: W2's drain of ``--bulk-drain`` no-op runs on queue ``default``, one burst worker at
  the widest ``--concurrency``, with nothing else running: jobs/s by the database clock.
- **retry**: ``--bulk-dead`` dead jobs of queue ``incident``, each with ``last_error``
  ``"X_TERMINAL: ..."``, retried by ``retry_jobs(state="dead", queue="incident",
  error_code="X_TERMINAL")`` — 1,000 per statement — while the same drain runs on ``default``:
  the retry's wall time and rate, and the drain's rate over the retry's window by the database
  clock, against the drain alone (the goal: within 20 %).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from bench.run import Report, WorkerThread, drain_rate, say, sql, state_counts, truncate


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
    fill_ready(args.bulk_drain)  # ANALYZEs the table with both kinds of rows in it
    say(f"BULK: retrying {args.bulk_dead} dead jobs by filter while a worker drains ...")
    worker = Worker(queues=["default"], concurrency=widest, burst=True)
    thread = WorkerThread(worker)
    thread.start()
    time.sleep(0.2)  # the drain is under way before the retry starts: its rate is steady
    (db_start,) = sql("SELECT clock_timestamp()")[0]
    started = time.perf_counter()
    answer: list[Any] = []
    retrier = threading.Thread(
        target=lambda: answer.append(
            retry_jobs(state="dead", queue="incident", error_code="X_TERMINAL", by="bench")
        )
    )
    retrier.start()
    retrier.join()
    seconds = time.perf_counter() - started
    (db_end,) = sql("SELECT clock_timestamp()")[0]
    drained_meanwhile = sql(
        "SELECT count(*) FROM x_jobs WHERE queue = 'default' AND state = 'done'"
        " AND updated_at >= %s AND updated_at <= %s",
        [db_start, db_end],
    )[0][0]
    thread.join(600)
    if thread.is_alive():
        thread.finish(report, "BULK drain")
    counts = state_counts()
    result = answer[0] if answer else None
    if result is None or result.changed != args.bulk_dead:
        report.problem(
            f"BULK: expected {args.bulk_dead} retried, got {result and result.to_json()}"
        )
    window = (db_end - db_start).total_seconds()
    during = drained_meanwhile / window if window > 0 else 0.0
    say(
        f"    retried {result and result.changed} in {seconds:.2f}s; drain {during:,.0f} jobs/s meanwhile"
    )
    report.add(
        "BULK retry_jobs by filter",
        f"{seconds:.2f}",
        "s",
        f"{args.bulk_dead} dead jobs, {result and result.batches} batches "
        f"({args.bulk_dead / seconds:,.0f} jobs/s); rows after: {counts}",
    )
    report.add(
        "BULK drain during the retry",
        f"{during:,.0f}",
        "jobs/s",
        f"{drained_meanwhile} jobs in the retry's {window:.2f}s",
    )
    if alone:
        report.add("BULK drain during / alone", f"{during / alone:.2f}", "ratio", "goal >= 0.80")
    truncate()
