"""Where each declared backfill stands in this environment, read from the ``x_backfills`` ledger:
its latest pass, whether it is still pending here, and a pass's section of ``inspect_job``.

``manage.py xjobs_backfill --list`` / ``--pending``, the ``X_BACKFILL_PENDING`` check and
``inspect_job`` all read it from here. Like ``django_xjobs.operations``, every answer is plain JSON.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from .. import conf
from ..declarations import registry
from ..drivers.contract import BackfillRecord
from . import Backfill, ledger_or_none, registered_backfills


def pending_backfills() -> list[Backfill]:
    """The backfills declared for this environment with no completed pass in it, by name: what
    a deploy waits for (``xjobs_backfill --pending``). With no ledger nothing is recorded as
    completed, so every one is pending."""
    environment = conf.get().environment
    ledger = ledger_or_none()
    return [
        spec
        for spec in registered_backfills()
        if spec.runs_in(environment)
        and (ledger is None or ledger.completed(spec.name, environment) is None)
    ]


def describe_backfills() -> list[dict[str, Any]]:
    """Every declared backfill, by name: its declaration, whether it runs and is pending here,
    and its latest pass in any environment (``None`` before the first)::

        >>> [(b["name"], b["pending"], b["latest"] and b["latest"]["status"])
        ...  for b in describe_backfills()]
        [('orders.fill_currency', False, 'completed'), ('orders.fill_region', True, None)]
    """
    environment = conf.get().environment
    ledger = ledger_or_none()
    found = []
    for spec in registered_backfills():
        latest = ledger.history(spec.name, limit=1) if ledger is not None else []
        runs_here = spec.runs_in(environment)
        done = None if ledger is None else ledger.completed(spec.name, environment)
        found.append(
            {
                "name": spec.name,
                "environments": None if spec.environments is None else list(spec.environments),
                "batch": spec.batch,
                "rate": spec.rate,
                "requires": None if spec.requires is None else ".".join(spec.requires),
                "queue": registry.get_job(spec.name).queue,
                "runs_here": runs_here,
                "pending": runs_here and done is None,
                "latest": pass_record(latest[0]) if latest else None,
            }
        )
    return found


def backfill_section(name: str, run_id: UUID) -> dict[str, Any] | None:
    """A job's ``backfill`` section in ``inspect_job`` (SPEC INSP-02): its pass's ledger row, or
    ``None`` when the job is no backfill's pass. A pass not started yet has no row: its status
    is ``None`` and its counts are 0."""
    handle = registry.get_job(name)
    declared = getattr(handle, "backfill", None) is not None
    if handle is not None and not declared:
        return None  # an ordinary job: no ledger read
    ledger = ledger_or_none()
    row = None if ledger is None else ledger.get(run_id)
    if row is None and not declared:
        return None
    if row is None:
        return {"name": name, **_NOT_STARTED}
    record = pass_record(row)
    del record["run_id"], record["job_id"]  # the trace has them
    return {"name": row.name, **record}


_NOT_STARTED: dict[str, Any] = {
    "status": None,
    "environment": None,
    "rows": 0,
    "pages": 0,
    "cursor": None,
    "started_at": None,
    "completed_at": None,
    "error": None,
}


def pass_record(row: BackfillRecord) -> dict[str, Any]:
    """One ledger row as plain JSON."""
    return {
        "run_id": str(row.run_id),
        "job_id": None if row.job_id is None else str(row.job_id),
        "status": row.status,
        "environment": row.environment,
        "rows": row.rows_processed,
        "pages": row.pages,
        "cursor": row.last_cursor,
        "started_at": _iso(row.started_at),
        "completed_at": _iso(row.completed_at),
        "error": row.error,
    }


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
