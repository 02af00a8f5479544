"""The operator's view of backfills: each declared backfill with where it stands here, and a
pass's section of ``inspect_job``, read from the ``x_backfills`` ledger. ``manage.py
xjobs_backfill --list`` / ``--pending`` and ``inspect_job`` read them from here; what a deploy
waits for (``pending_backfills``) stays with the backfills."""

from __future__ import annotations

from uuid import UUID

from .. import conf
from ..backfills import declared_backfill, declared_backfills, ledger_or_none
from ..declarations import registry
from ..drivers.contract import BackfillRecord
from .answers import BackfillPass, BackfillReport, BackfillSection
from .shared import iso


def describe_backfills() -> list[BackfillReport]:
    """Every declared backfill, by name: its declaration, whether it runs and is pending here,
    and its latest pass in any environment (``None`` before the first)::

        >>> [(b["name"], b["pending"], b["latest"] and b["latest"]["status"])
        ...  for b in describe_backfills()]
        [('orders.fill_currency', False, 'completed'), ('orders.fill_region', True, None)]
    """
    environment = conf.get().environment
    ledger = ledger_or_none()
    found = []
    for declared in declared_backfills():
        spec = declared.spec
        latest = ledger.history(spec.name, limit=1) if ledger is not None else []
        runs_here = spec.runs_in(environment)
        done = None if ledger is None else ledger.completed(spec.name, environment)
        found.append(
            BackfillReport(
                name=spec.name,
                environments=None if spec.environments is None else list(spec.environments),
                batch=spec.batch,
                rate=spec.rate,
                requires=None if spec.requires is None else ".".join(spec.requires),
                queue=declared.handle.queue,
                runs_here=runs_here,
                pending=runs_here and done is None,
                latest=pass_record(latest[0]) if latest else None,
            )
        )
    return found


def backfill_section(name: str, run_id: UUID) -> BackfillSection | None:
    """A job's ``backfill`` section in ``inspect_job`` (SPEC INSP-02): its pass's ledger row, or
    ``None`` when the job is no backfill's pass. A pass not started yet has no row: its status
    is ``None`` and its counts are 0."""
    declared = declared_backfill(name) is not None
    if not declared and registry.get_job(name) is not None:
        return None  # an ordinary job: no ledger read
    ledger = ledger_or_none()
    row = None if ledger is None else ledger.get(run_id)
    if row is None and not declared:
        return None
    if row is None:
        return BackfillSection(
            name=name,
            status=None,
            environment=None,
            rows=0,
            pages=0,
            cursor=None,
            started_at=None,
            completed_at=None,
            error=None,
        )
    record = pass_record(row)
    return BackfillSection(
        name=row.name,
        status=record.status,
        environment=record.environment,
        rows=record.rows,
        pages=record.pages,
        cursor=record.cursor,
        started_at=record.started_at,
        completed_at=record.completed_at,
        error=record.error,
    )


def pass_record(row: BackfillRecord) -> BackfillPass:
    """One ledger row as the operator surfaces show it."""
    return BackfillPass(
        run_id=str(row.run_id),
        job_id=None if row.job_id is None else str(row.job_id),
        status=row.status,
        environment=row.environment,
        rows=row.rows_processed,
        pages=row.pages,
        cursor=row.last_cursor,
        started_at=iso(row.started_at),
        completed_at=iso(row.completed_at),
        error=row.error,
    )
