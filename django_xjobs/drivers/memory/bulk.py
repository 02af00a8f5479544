"""The memory driver's verbs on many jobs and the operators' audit trail (issue 45): the same
answers as ``drivers/postgres/bulk.sql``, each batch under the driver's lock and made of the
single-job verbs, so a bulk action does to each job exactly what its single verb does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from ...errors import JobDuplicateError, JobNotRetryableError
from ...states import FINISHED_STATES, WAITING_STATES, shown_state
from ..contract import BulkAction, JobFilter, JobSnapshot, OperatorRecord

if TYPE_CHECKING:
    from .jobs import MemoryJobs
    from .state import MemoryState


def contains(have: object, want: object) -> bool:
    """PostgreSQL's ``jsonb @>``: an object contains each key of ``want`` with a value that
    contains its value there; an array contains each element of ``want`` somewhere in it; a
    scalar contains an equal scalar (``1`` equals ``1.0``, never ``true``)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(
            key in have and contains(have[key], value) for key, value in want.items()
        )
    if isinstance(want, list):
        if not isinstance(have, list):
            return False
        return all(any(contains(h, w) for h in have) for w in want)
    if isinstance(have, dict | list):
        return False
    if isinstance(want, bool) or isinstance(have, bool):
        return type(want) is type(have) and want == have
    return bool(have == want)


def admits(where: JobFilter, row: JobSnapshot, states: Sequence[str], now: datetime) -> bool:
    """Whether ``row`` is one the filter admits, in one of the stored ``states`` (bulk.sql's
    ``admits`` fragment)."""
    if row.state not in states or (where.ids and row.id not in where.ids):
        return False
    if where.state and shown_state(row.state, row.run_at, now) not in where.state:
        return False
    for name in ("queue", "name", "tenant_id", "stop_reason"):
        wanted = getattr(where, name)
        if wanted is not None and getattr(row, name) != wanted:
            return False
    code = where.error_code
    if code is not None and not (
        row.last_error == code or (row.last_error or "").startswith(f"{code}:")
    ):
        return False
    for field, low, high in (
        ("created_at", where.created_after, where.created_before),
        ("updated_at", where.updated_after, where.updated_before),
    ):
        value = getattr(row, field)
        if (low is not None and value < low) or (high is not None and value >= high):
            return False
    return where.input is None or contains(row.input, dict(where.input))


class MemoryBulkStore:
    """``BulkStore`` in process; handed the driver's job verbs, whose lock it takes."""

    def __init__(self, jobs: MemoryJobs) -> None:
        self._jobs = jobs

    def _admitted(self, where: JobFilter, states: Sequence[str]) -> list[JobSnapshot]:
        now = self._jobs._now()
        rows = [*self._jobs._rows.values(), *self._jobs._archived.values()]  # HIST-09
        return sorted((r for r in rows if admits(where, r, states, now)), key=lambda r: r.id)

    def match(
        self, where: JobFilter, *, states: Sequence[str], after: UUID | None, limit: int
    ) -> list[UUID]:
        with self._jobs._lock:
            rows = self._admitted(where, states)
        return [r.id for r in rows if after is None or r.id > after][:limit]

    def count(self, where: JobFilter, *, states: Sequence[str]) -> int:
        with self._jobs._lock:
            return len(self._admitted(where, states))

    def act(
        self, action: BulkAction, ids: Sequence[UUID], where: JobFilter
    ) -> tuple[int, list[UUID]]:
        jobs = self._jobs
        with jobs._lock:
            now = jobs._now()
            rows = [
                r
                for i in sorted(set(ids))
                if (r := jobs._rows.get(i) or jobs._archived.get(i)) is not None  # HIST-09
            ]
            rows = [r for r in rows if admits(where, r, action.states, now)]
            if action.verb == "cancel":
                for row in rows:
                    jobs.cancel(row.id, action.reason)
                return len(rows), [r.id for r in rows if r.state in ("suspended", "running")]
            if action.verb == "delete":
                return self._delete(rows), []
            changed = 0
            if action.verb == "requeue":
                changed += self._move([r for r in rows if r.state in WAITING_STATES], action)
                rows = [r for r in rows if r.state not in WAITING_STATES]
            return changed + self._retry(rows, action.queue), []

    def _retry(self, rows: list[JobSnapshot], queue: str | None) -> int:
        """Each as ``requeue`` does it; one whose key a live job holds (a row retried just
        before it in this batch included) is left, as the live-key index leaves it."""
        changed = 0
        order = sorted(rows, key=lambda r: (r.name, r.tenant_id or "", r.idempotency_key, r.id))
        for row in order:
            try:
                done = self._jobs.requeue(row.id, from_step=None, force=True)
            except (JobDuplicateError, JobNotRetryableError):
                continue
            if queue is not None and done.queue != queue:
                self._jobs._rows[done.id] = replace(done, queue=queue)
                self._wake(queue)
            changed += 1
        return changed

    def _move(self, rows: list[JobSnapshot], action: BulkAction) -> int:
        queue = action.queue
        if queue is None:
            return 0
        moved = [r for r in rows if r.queue != queue]
        now = self._jobs._now()
        for row in moved:
            self._jobs._rows[row.id] = replace(row, queue=queue, updated_at=now)
        if moved:
            self._wake(queue)
        return len(moved)

    def _delete(self, rows: list[JobSnapshot]) -> int:
        jobs = self._jobs
        gone = [r for r in rows if r.state in FINISHED_STATES and not jobs._awaited(r)]
        for row in gone:
            jobs._rows.pop(row.id, None)
            jobs._archived.pop(row.id, None)  # HIST-10: deleted in the history too
            jobs._steps.pop(row.run_id, None)
            jobs._limit_keys.pop(row.id, None)
        return len(gone)

    def _wake(self, queue: str) -> None:
        for sub in [s for s in self._jobs._subscriptions if queue in s.queues]:
            sub.callback()


class MemoryAuditStore:
    """``AuditStore`` in process: the records in a list, newest last."""

    def __init__(self, state: MemoryState) -> None:
        self._state = state
        self._records: list[OperatorRecord] = []

    def record(self, entry: OperatorRecord) -> None:
        with self._state._lock:
            self._records.append(replace(entry, at=self._state._now()))

    def recent(self, *, limit: int = 100, verb: str | None = None) -> list[OperatorRecord]:
        with self._state._lock:
            kept = [r for r in self._records if verb is None or r.verb == verb]
        return sorted(kept, key=lambda r: (r.at, r.id), reverse=True)[:limit]

    def get(self, record_id: UUID) -> OperatorRecord | None:
        with self._state._lock:
            return next((r for r in self._records if r.id == record_id), None)

    def progress(
        self,
        record_id: UUID,
        *,
        status: str,
        counts: tuple[int, int, int],
        error: str | None = None,
        by_job: str | None = None,
    ) -> None:
        with self._state._lock:
            now = self._state._now()
            for i, r in enumerate(self._records):
                if r.id != record_id:
                    continue
                self._records[i] = replace(
                    r,
                    status=status,
                    matched=counts[0],
                    changed=counts[1],
                    skipped=counts[2],
                    error=error,
                    by_job=by_job if by_job is not None else r.by_job,
                    started_at=r.started_at or (now if status == "running" else None),
                    finished_at=now if status in ("done", "failed") else None,
                )

    def shift(self, seconds: float) -> None:
        """Test support: every record ``seconds`` earlier (``age``'s jobs family)."""
        with self._state._lock:
            self._records = [
                replace(r, at=r.at - timedelta(seconds=seconds)) for r in self._records
            ]

    def prune(self, older_than: float) -> int:
        cutoff = self._state._now() - timedelta(seconds=older_than)
        with self._state._lock:
            kept = [r for r in self._records if r.at >= cutoff]
            gone = len(self._records) - len(kept)
            self._records = kept
        return gone
