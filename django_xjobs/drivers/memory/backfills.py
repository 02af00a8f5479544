"""The memory driver's backfill ledger: what ``postgres_backfills`` answers, in process."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING
from uuid import UUID

from ..contract import BackfillRecord

if TYPE_CHECKING:
    from .state import MemoryState


class MemoryBackfillLedger:
    def __init__(self, state: MemoryState) -> None:
        self.state = state
        self._rows: dict[UUID, BackfillRecord] = {}
        self._lock = threading.Lock()

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
        with self._lock:
            row = self._rows.get(run_id)
            if row is None:
                row = BackfillRecord(
                    run_id=run_id,
                    name=name,
                    checksum=checksum,
                    app_version=app_version,
                    status="running",
                    rows_processed=0,
                    pages=0,
                    last_cursor=None,
                    started_at=self.state._now(),
                    completed_at=None,
                    environment=environment,
                    job_id=job_id,
                    error=None,
                )
            else:
                row = replace(
                    row,
                    status="running",
                    completed_at=None,
                    error=None,
                    checksum=checksum,
                    app_version=app_version,
                    job_id=job_id,
                )
            self._rows[run_id] = row
            return row

    def progress(self, run_id: UUID, *, cursor: str | None, rows: int, pages: int) -> None:
        with self._lock:
            row = self._rows.get(run_id)
            if row is not None:
                self._rows[run_id] = replace(
                    row, last_cursor=cursor, rows_processed=rows, pages=pages
                )

    def finish(self, run_id: UUID, *, status: str, error: str | None = None) -> None:
        with self._lock:
            row = self._rows.get(run_id)
            if row is not None:
                cursor = None if status == "completed" else row.last_cursor
                self._rows[run_id] = replace(
                    row,
                    status=status,
                    error=error,
                    last_cursor=cursor,
                    completed_at=self.state._now(),
                )

    def completed(self, name: str, environment: str | None) -> BackfillRecord | None:
        with self._lock:
            done = [
                r
                for r in self._rows.values()
                if r.name == name and r.status == "completed" and r.environment == environment
            ]
        return max(done, key=lambda r: (r.started_at, r.run_id), default=None)

    def history(self, name: str, *, limit: int = 20) -> list[BackfillRecord]:
        with self._lock:
            rows = [r for r in self._rows.values() if r.name == name]
        rows.sort(key=lambda r: (r.started_at, r.run_id), reverse=True)
        return rows[:limit]

    def get(self, run_id: UUID) -> BackfillRecord | None:
        with self._lock:
            return self._rows.get(run_id)
