"""The outbox store in memory: the database store's lease, order and fences, in one process.

Published rows are deleted at once, so memory stays bounded (SPEC OUTBOX-16, SE-36); the
database keeps them for ``OUTBOX_RETENTION`` as an audit trail. Memory cannot take part in a
database transaction, so the memory driver stages a row only once the caller's transaction
commits (``transactional = False``).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from uuid import UUID

from ... import conf
from ...clock import Clock, SystemClock
from ...ids import uuid7
from ..bounds import size
from ..contract import EnqueueRequest, EnqueueResult, OutboxRow, PublishTarget, QuarantinedRow

#: how many collapsed ids the store remembers (the database keeps them for OUTBOX_RETENTION)
COLLAPSED_KEPT = 10_000


class MemoryOutboxStore:
    transactional = False

    def __init__(self, claim_lease: object = None, clock: Clock | None = None) -> None:
        self.claim_lease = (
            conf.get().outbox_claim_lease if claim_lease is None else conf.claim_lease(claim_lease)
        )
        self.clock = clock or SystemClock()
        self._rows: dict[UUID, OutboxRow] = {}
        self._claimed_at: dict[UUID, datetime] = {}
        self._collapsed: OrderedDict[UUID, UUID] = OrderedDict()
        self._lock = threading.Lock()
        self.quarantine = MemoryQuarantine(self)

    def stage(self, request: EnqueueRequest, *, notify: bool = True) -> UUID:
        now = self.clock.now()
        row = OutboxRow(
            id=request.id or uuid7(),
            job=request.name,
            queue=request.queue,
            input=json.loads(request.input_json),
            idempotency_key=request.idempotency_key,
            max_attempts=request.max_attempts,
            priority=request.priority,
            run_at=request.run_at or now + timedelta(seconds=request.delay or 0.0),
            staged_at=now,
            tenant_id=request.tenant_id,
            traceparent=request.traceparent,
            enqueued_by=request.enqueued_by,
            expires_at=request.expires_at,
            expires_in=request.expires_in,
            replace=request.replace,
            after=request.after,
            run_anyway=request.run_anyway,
        )
        with self._lock:
            self._rows[row.id] = row
        return row.id

    def notify_on_staged(self, callback: Callable[[], None]) -> None:
        return None  # nothing to listen to: a relay over memory polls

    def stage_many(self, requests: Sequence[EnqueueRequest]) -> None:
        for request in requests:
            self.stage(request)

    def publish_ids(self, driver: PublishTarget, ids: Sequence[UUID], token: str) -> int:
        # Row by row, in order. Staging (run/enqueue.py) hands a memory store's commits to
        # publish_batch (run/publish.py) instead, which also quarantines a refused row: a store
        # never calls up into the layer that drives it (issue 27).
        published = 0
        for row in self.claim_ids(ids, token):
            published += self.publish(driver, row, token)[1]
        return published

    def claim(self, limit: int, token: str) -> list[OutboxRow]:
        return self._claim(None, limit, token)

    def claim_ids(self, ids: Sequence[UUID], token: str) -> list[OutboxRow]:
        return self._claim(set(ids), len(ids), token) if ids else []

    def _claim(self, ids: set[UUID] | None, limit: int, token: str) -> list[OutboxRow]:
        with self._lock:
            now = self.clock.now()
            expired = now - timedelta(seconds=self.claim_lease)
            free = sorted(
                (
                    r
                    for r in self._rows.values()
                    if (ids is None or r.id in ids)
                    and (r.claimed_by is None or self._claimed_at[r.id] <= expired)
                ),
                key=lambda r: (r.staged_at, r.id),
            )[:limit]
            claimed = []
            for row in free:
                row = replace(row, claimed_by=token)
                self._rows[row.id] = row
                self._claimed_at[row.id] = now
                claimed.append(row)
            return claimed

    def release(self, ids: Sequence[UUID], token: str) -> int:
        released = 0
        with self._lock:
            for row_id in ids:
                row = self._rows.get(row_id)
                if row is not None and row.claimed_by == token:
                    self._rows[row_id] = replace(row, claimed_by=None)
                    self._claimed_at.pop(row_id, None)
                    released += 1
        return released

    def mark_published(self, row_id: UUID, token: str, job_id: UUID | None = None) -> bool:
        with self._lock:
            row = self._rows.get(row_id)
            if row is None or row.claimed_by != token:
                return False
            del self._rows[row_id]
            self._claimed_at.pop(row_id, None)
            if job_id is not None and job_id != row_id:
                self._collapsed[row_id] = job_id
                while len(self._collapsed) > COLLAPSED_KEPT:
                    self._collapsed.popitem(last=False)
            return True

    def publishes_together(self, driver: PublishTarget) -> bool:
        return False  # nothing here joins a transaction: the relay publishes row by row

    def publish_claimed(
        self, driver: PublishTarget, rows: Sequence[OutboxRow], token: str
    ) -> set[UUID]:
        raise NotImplementedError("the memory outbox publishes row by row")

    def publish(
        self, driver: PublishTarget, row: OutboxRow, token: str
    ) -> tuple[EnqueueResult, bool]:
        result = driver.jobs().enqueue(row.request())
        return result, self.mark_published(row.id, token, result.id)

    def resolve(self, job_id: UUID) -> UUID | None:
        with self._lock:
            return self._collapsed.get(job_id)

    def pending(self) -> tuple[int, float]:
        with self._lock:
            rows = list(self._rows.values())
        if not rows:
            return 0, 0.0
        oldest = min(r.staged_at for r in rows)
        return len(rows), (self.clock.now() - oldest).total_seconds()

    def prune(self, retention: float) -> int:
        return 0  # published rows are gone already

    def shift(self, seconds: float) -> None:
        """Test support: make every stored time ``seconds`` earlier."""
        delta = timedelta(seconds=seconds)
        with self._lock:
            for row_id, row in list(self._rows.items()):
                self._rows[row_id] = replace(
                    row,
                    staged_at=row.staged_at - delta,
                    run_at=row.run_at - delta,
                    expires_at=None if row.expires_at is None else row.expires_at - delta,
                )
            for row_id, at in list(self._claimed_at.items()):
                self._claimed_at[row_id] = at - delta


class MemoryQuarantine:
    """The memory outbox's quarantined rows, under its lock: a row held here has left the
    outbox's rows, and a retry puts it back unclaimed."""

    def __init__(self, outbox: MemoryOutboxStore) -> None:
        self._outbox = outbox
        #: rows out of every batch until an operator acts (issue 24), in quarantine order
        self._quarantined: dict[UUID, QuarantinedRow] = {}
        self._held: dict[UUID, OutboxRow] = {}  # the quarantined rows themselves

    def hold(self, row_id: UUID, token: str, code: str, error: str) -> bool:
        with self._outbox._lock:
            row = self._outbox._rows.get(row_id)
            if row is None or row.claimed_by != token:
                return False
            del self._outbox._rows[row_id]
            self._outbox._claimed_at.pop(row_id, None)
            self._quarantined[row_id] = QuarantinedRow(
                id=row.id,
                job=row.job,
                queue=row.queue,
                idempotency_key=row.idempotency_key,
                tenant_id=row.tenant_id,
                staged_at=row.staged_at,
                quarantined_at=self._outbox.clock.now(),
                error_code=code,
                error=error,
                key_bytes=size(row.idempotency_key),
                tenant_bytes=None if row.tenant_id is None else size(row.tenant_id),
                name_bytes=size(row.job),
            )
            self._held[row_id] = replace(row, claimed_by=None)
            return True

    def rows(self, limit: int = 100) -> list[QuarantinedRow]:
        with self._outbox._lock:
            return list(self._quarantined.values())[:limit]

    def count(self) -> int:
        with self._outbox._lock:
            return len(self._quarantined)

    def retry(self, row_id: UUID) -> bool:
        with self._outbox._lock:
            if self._quarantined.pop(row_id, None) is None:
                return False
            self._outbox._rows[row_id] = self._held.pop(row_id)
            return True

    def discard(self, row_id: UUID) -> bool:
        with self._outbox._lock:
            if self._quarantined.pop(row_id, None) is None:
                return False
            del self._held[row_id]
            return True
