"""The outbox store on PostgreSQL: the named statements of ``outbox.sql``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any
from uuid import UUID

from django.db import transaction

from .. import conf
from ..drivers import sql
from ..drivers.base import EnqueueRequest, EnqueueResult, JobDriver
from ..ids import uuid7
from .store import OutboxRow

STATEMENTS = sql.load(Path(__file__).with_name("outbox.sql"))


class PostgresOutboxStore:
    """``x_outbox`` on the database alias ``using``. ``claim_lease`` is checked here, when the
    store is built, never at the first claim (SPEC OUTBOX-14)."""

    transactional = True

    def __init__(self, using: str, claim_lease: Any = None) -> None:
        self.using = using
        self.claim_lease = (
            conf.get().outbox_claim_lease if claim_lease is None else conf.claim_lease(claim_lease)
        )

    def stage(self, request: EnqueueRequest) -> UUID:
        row_id = request.id or uuid7()
        params = {
            "id": row_id,
            "job": request.name,
            "queue": request.queue,
            "input": request.input_json,
            "idempotency_key": request.idempotency_key,
            "max_attempts": request.max_attempts,
            "priority": request.priority,
            "run_at": request.run_at,
            "delay": request.delay or 0.0,
            "tenant_id": request.tenant_id,
            "traceparent": request.traceparent,
            "enqueued_by": request.enqueued_by,
        }
        self._run("stage", params)
        return row_id

    def claim(self, limit: int, token: str) -> list[OutboxRow]:
        rows = self._run("claim", {"limit": limit, "token": token, "lease": self.claim_lease})
        return sorted((_row(r) for r in rows), key=lambda r: (r.staged_at, r.id))

    def claim_ids(self, ids: Sequence[UUID], token: str) -> list[OutboxRow]:
        if not ids:
            return []
        rows = self._run("claim_ids", {"ids": list(ids), "token": token, "lease": self.claim_lease})
        return sorted((_row(r) for r in rows), key=lambda r: (r.staged_at, r.id))

    def release(self, ids: Sequence[UUID], token: str) -> int:
        if not ids:
            return 0  # SPEC OUTBOX-11: no statement for nothing
        return self._count("release", {"ids": list(ids), "token": token})

    def mark_published(self, row_id: UUID, token: str, job_id: UUID | None = None) -> bool:
        params = {"id": row_id, "token": token, "job_id": job_id or row_id}
        return self._count("mark_published", params) == 1

    def publish(self, driver: JobDriver, row: OutboxRow, token: str) -> tuple[EnqueueResult, bool]:
        # On the jobs' own database the insert and the mark commit together, so a relay killed
        # between them leaves nothing to publish twice; across databases the job's primary key
        # (the staged id) turns a second publish into a no-op (SPEC OUTBOX-12).
        same_database = driver.database == self.using
        with transaction.atomic(using=self.using) if same_database else nullcontext():
            if same_database:
                self._run("bound_publish", {"ms": str(max(1, int(self.claim_lease * 1000)))})
            result = driver.enqueue(row.request())
            return result, self.mark_published(row.id, token, result.id)

    def resolve(self, job_id: UUID) -> UUID | None:
        rows = self._run("resolve", {"id": job_id})
        return rows[0][0] if rows else None

    def pending(self) -> tuple[int, float]:
        [(count, oldest)] = self._run("pending", {})
        return int(count), float(oldest)

    def prune(self, retention: float) -> int:
        return self._count("prune", {"retention": retention})

    def _run(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        return sql.fetch(self.using, STATEMENTS[name], params)

    def _count(self, name: str, params: dict[str, Any]) -> int:
        return sql.count(self.using, STATEMENTS[name], params)


def _row(r: tuple[Any, ...]) -> OutboxRow:
    payload = json.loads(r[3]) if isinstance(r[3], str | bytes) else r[3]
    return OutboxRow(
        id=r[0],
        job=r[1],
        queue=r[2],
        input=payload,
        idempotency_key=r[4],
        max_attempts=r[5],
        priority=r[6],
        run_at=r[7],
        staged_at=r[8],
        tenant_id=r[9],
        traceparent=r[10],
        enqueued_by=r[11],
        claimed_by=r[12],
    )
