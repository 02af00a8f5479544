"""The ``x_backfills`` ledger on PostgreSQL, through the ORM: one short write per page, off the
hot path (the claim/settle SQL lives in jobs.sql)."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.db.models.functions import Now

from ..contract import BackfillRecord

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from ...models import Backfill


def _record(row: object) -> BackfillRecord:
    """A ledger model row as the driver returns it: the model's columns are the record's fields."""
    return BackfillRecord(**{f.name: getattr(row, f.name) for f in fields(BackfillRecord)})


class PostgresBackfillLedger:
    def __init__(self, using: str) -> None:
        self.using = using

    def _rows(self) -> QuerySet[Backfill]:
        from ...models import Backfill

        return Backfill.objects.using(self.using)

    def start(
        self,
        *,
        run_id: UUID,
        job_id: UUID,
        name: str,
        checksum: str,
        app_version: str,
        environment: str | None,
    ) -> BackfillRecord:
        adopted = self._rows().filter(run_id=run_id)
        if not adopted.update(
            status="running",
            completed_at=None,
            error=None,
            checksum=checksum,
            app_version=app_version,
            job_id=job_id,
        ):
            self._rows().create(
                run_id=run_id,
                name=name,
                checksum=checksum,
                app_version=app_version,
                environment=environment,
                job_id=job_id,
            )
        return _record(self._rows().get(run_id=run_id))

    def progress(self, run_id: UUID, *, cursor: str | None, rows: int, pages: int) -> None:
        self._rows().filter(run_id=run_id).update(
            last_cursor=cursor, rows_processed=rows, pages=pages
        )

    def finish(self, run_id: UUID, *, status: str, error: str | None = None) -> None:
        changes: dict[str, Any] = {"status": status, "error": error, "completed_at": Now()}
        if status == "completed":
            changes["last_cursor"] = None
        self._rows().filter(run_id=run_id).update(**changes)

    def completed(self, name: str, environment: str | None) -> BackfillRecord | None:
        row = (
            self._rows()
            .filter(name=name, status="completed", environment=environment)
            .order_by("-started_at", "-run_id")
            .first()
        )
        return None if row is None else _record(row)

    def history(self, name: str, *, limit: int = 20) -> list[BackfillRecord]:
        rows = self._rows().filter(name=name).order_by("-started_at", "-run_id")[:limit]
        return [_record(r) for r in rows]

    def get(self, run_id: UUID) -> BackfillRecord | None:
        row = self._rows().filter(run_id=run_id).first()
        return None if row is None else _record(row)
