"""W4: backfill rate. A burst worker runs one pass of each bench backfill over fresh rows."""

from __future__ import annotations

from typing import Any

from bench.run import WorkerThread, measured, say, sql


def backfill_rate(report: Any, rows: int) -> None:
    """W4: a burst worker runs one pass of each bench backfill over ``rows`` fresh rows at no
    pace; rows/s by the database clock, from the pass's ledger row (its start to its end)."""
    from bench.jobs import BACKFILL_BATCH, backfill_noop, backfill_update
    from django_xjobs.models import Backfill, Job
    from django_xjobs.worker.worker import Worker

    for handle, handler in ((backfill_noop, "no-op"), (backfill_update, "bulk_update")):
        label = f"W4 backfill, {handler}"
        # a completed pass would refuse the next one (X_BACKFILL_APPLIED): the ledger goes too
        sql("TRUNCATE x_jobs, x_job_steps, x_backfills, bench_row RESTART IDENTITY")
        sql("INSERT INTO bench_row (value) SELECT NULL FROM generate_series(1, %s)", [rows])
        sql("ANALYZE bench_row")
        say(f"{label}: {rows} rows, batch {BACKFILL_BATCH} ...")
        job_id = handle.enqueue().id
        worker = Worker(queues=[handle.queue], concurrency=1, burst=True)
        with measured() as window:
            WorkerThread(worker).drain(report, label, what="done")
        job = Job.objects.get(id=job_id)
        ledger = Backfill.objects.filter(job_id=job_id).first()
        if job.state != "done" or ledger is None or ledger.status != "completed":
            status = ledger and ledger.status
            report.problem(f"{label}: the pass is {job.state} ({job.last_error}), ledger {status}")
            continue
        left = sql("SELECT count(*) FROM bench_row WHERE value IS NULL")[0][0]
        if ledger.rows_processed != rows or (handle is backfill_update and left):
            report.problem(
                f"{label}: {ledger.rows_processed} of {rows} rows handled, {left} left NULL"
            )
        elapsed = (ledger.completed_at - ledger.started_at).total_seconds()
        rate = ledger.rows_processed / elapsed
        say(f"    {rate:,.0f} rows/s ({ledger.pages} pages in {elapsed:.2f}s)")
        report.add(
            label,
            f"{rate:,.0f}",
            "rows/s",
            f"{ledger.rows_processed} rows, batch {BACKFILL_BATCH}: {ledger.pages} pages in "
            f"{elapsed:.2f}s; cost per page",
            window.cost.per_job(ledger.pages),
        )
    sql("TRUNCATE x_job_steps, x_backfills, bench_row")
