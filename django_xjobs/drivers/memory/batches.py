"""The memory driver's batches: the PostgreSQL store's answers, in process.

Batch rows live in a dict under the driver's lock. The driver's settles (complete, finish, cancel)
call ``ended`` under that same lock, so a member's final state, its batch's count and the
callbacks the last member queues change together, as the database's one statement does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING
from uuid import UUID

from ...errors import BatchClosedError
from ...payload import dumps
from ...states import LIVE_STATES
from ..contract import BatchCallback, BatchRecord, EnqueueRequest, EnqueueResult, JobSnapshot

if TYPE_CHECKING:
    from ..contract import JobStore
    from .state import MemoryState

#: the batch count each final state adds to
_COUNTED = ("done", "dead", "failed", "cancelled")


class MemoryBatchStore:
    def __init__(self, state: MemoryState, jobs: JobStore) -> None:
        self.state = state
        self.jobs = jobs  # a member's enqueue and cancel, which the settles count here
        self._batches: dict[UUID, BatchRecord] = {}
        self._members: dict[UUID, list[UUID]] = {}

    def open(
        self, batch_id: UUID, *, input: Mapping[str, object], callbacks: Sequence[BatchCallback]
    ) -> None:
        with self.state._lock:
            if batch_id in self._batches:
                return
            self._batches[batch_id] = BatchRecord(
                id=batch_id,
                input=json.loads(json.dumps(input)),
                callbacks=tuple(callbacks),
                total=0,
                pending=0,
                done=0,
                dead=0,
                failed=0,
                cancelled=0,
                created_at=self.state._now(),
                closed_at=None,
                completed_at=None,
            )
            self._members[batch_id] = []

    def add(self, batch_id: UUID, requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
        if not requests:
            return []
        with self.state._lock:
            batch = self._batches.get(batch_id)
            if batch is None or batch.closed_at is not None:
                raise BatchClosedError(
                    f"batch {batch_id} is closed or unknown: no member was added"
                )
            results = []
            for request in requests:
                result = self.jobs.enqueue(request)
                if not result.deduped:
                    rows = self.state._rows
                    rows[result.id] = replace(rows[result.id], batch_id=batch_id)
                    self._members[batch_id].append(result.id)
                    batch = replace(batch, total=batch.total + 1, pending=batch.pending + 1)
                results.append(result)
            self._batches[batch_id] = batch
            return results

    def close(self, batch_id: UUID) -> bool:
        with self.state._lock:
            batch = self._batches.get(batch_id)
            if batch is None or batch.closed_at is not None:
                return False
            now = self.state._now()
            batch = replace(batch, closed_at=now)
            self._batches[batch_id] = batch
            if batch.pending:
                return False
            self._complete(batch)
            return True

    def ended(self, row: JobSnapshot) -> None:
        """``row`` just reached a final state: count it in its batch (the caller holds the
        driver's lock, as the settle's statement holds the batch row)."""
        batch = self._batches.get(row.batch_id) if row.batch_id is not None else None
        if batch is None or batch.completed_at is not None or row.state not in _COUNTED:
            return
        batch = replace(
            batch,
            pending=batch.pending - 1,
            **{row.state: getattr(batch, row.state) + 1},
        )
        self._batches[batch.id] = batch
        if batch.pending == 0 and batch.closed_at is not None:
            self._complete(batch)

    def reopened(self, batch_id: UUID, was: str) -> None:
        """A member that ended in ``was`` is live again (an operator's retry): uncounted, so
        its next final state counts once. A completed batch stays completed."""
        batch = self._batches.get(batch_id)
        if batch is None or batch.completed_at is not None or was not in _COUNTED:
            return
        changes = {was: getattr(batch, was) - 1}
        self._batches[batch_id] = replace(batch, pending=batch.pending + 1, **changes)

    def _complete(self, batch: BatchRecord) -> None:
        batch = replace(batch, completed_at=self.state._now())
        self._batches[batch.id] = batch
        counts = {
            "id": str(batch.id),
            "total": batch.total,
            "done": batch.done,
            "dead": batch.dead,
            "failed": batch.failed,
            "cancelled": batch.cancelled,
        }
        success = batch.done == batch.total
        for callback in batch.callbacks:
            if callback.kind != "complete" and (callback.kind == "success") != success:
                continue
            inputs = {**batch.input, "batch": counts}
            request = EnqueueRequest(
                name=callback.name,
                queue=callback.queue,
                input=inputs,
                input_json=dumps(inputs),
                idempotency_key=callback.key,
                max_attempts=callback.max_attempts,
                priority=callback.priority,
                tenant_id=callback.tenant_id,
                id=callback.id,
            )
            result = self.jobs.enqueue(request)
            rows = self.state._rows
            if not result.deduped:
                rows[result.id] = replace(rows[result.id], run_id=callback.run_id)

    def get(self, batch_id: UUID) -> BatchRecord | None:
        with self.state._lock:
            return self._batches.get(batch_id)

    def recent(self, *, limit: int = 100, open_only: bool = False) -> list[BatchRecord]:
        with self.state._lock:
            rows = [b for b in self._batches.values() if not open_only or b.completed_at is None]
        rows.sort(key=lambda b: (b.created_at, b.id), reverse=True)
        return rows[:limit]

    def cancel(self, batch_id: UUID, reason: str | None) -> int:
        with self.state._lock:
            self.close(batch_id)
            live = [
                job_id
                for job_id in self._members.get(batch_id, [])
                if self.state._rows[job_id].state in LIVE_STATES
            ]
            for job_id in live:  # each counted in the batch as it ends (the driver's cancel)
                self.jobs.cancel(job_id, reason)
            return len(live)

    def open_count(self) -> int:
        with self.state._lock:
            return sum(b.completed_at is None for b in self._batches.values())

    def members(self, batch_id: UUID, *, limit: int = 1000) -> list[UUID]:
        with self.state._lock:
            return sorted(self._members.get(batch_id, []))[:limit]
