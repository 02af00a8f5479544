"""The PostgreSQL driver's batches: the named statements of ``batches.sql``.

A member's final state is counted by the settle statements of ``jobs.sql`` (complete, finish,
cancel), in the same statement as the settle; this store opens, fills, closes and reads batches.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from django.db import transaction

from ...errors import BatchClosedError
from ...ids import uuid7_many
from ...payload import decode, dumps
from ..contract import BatchCallback, BatchRecord, EnqueueRequest, EnqueueResult
from . import sql
from .params import request_columns

STATEMENTS = sql.load(Path(__file__).with_name("batches.sql"))
JOBS = sql.load(Path(__file__).with_name("jobs.sql"))
_NIL = UUID(int=0)


class PostgresBatchStore:
    def __init__(self, using: str) -> None:
        self.using = using

    def open(
        self, batch_id: UUID, *, input: Mapping[str, object], callbacks: Sequence[BatchCallback]
    ) -> None:
        params = {
            "id": batch_id,
            "input": dumps(input),
            "callbacks": json.dumps([c.to_json() for c in callbacks]),
        }
        sql.count(self.using, STATEMENTS["batch_open"], params)

    def add(self, batch_id: UUID, requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
        if not requests:
            return []
        fresh = iter(uuid7_many(sum(r.id is None for r in requests)))
        ids = [r.id or next(fresh) for r in requests]
        params = {
            "batch": batch_id,
            "ids": ids,
            "run_ids": uuid7_many(len(ids)),
            **request_columns(requests),
        }
        rows = sql.fetch(self.using, STATEMENTS["batch_add"], params)
        if not any(opened for opened, job_id, _ in rows if job_id is None):
            raise _closed(batch_id)
        inserted = {job_id: run_id for _, job_id, run_id in rows if job_id is not None}
        results: list[EnqueueResult] = []
        for request, job_id in zip(requests, ids, strict=True):
            if job_id in inserted:
                results.append(EnqueueResult(id=job_id, run_id=inserted[job_id]))
                continue
            key = {
                "name": request.name,
                "tenant_id": request.tenant_id,
                "idempotency_key": request.idempotency_key,
            }
            live = sql.fetch(self.using, JOBS["find_live"], key)
            if not live:  # the live row ended between the insert and this read: add it again
                results.extend(self.add(batch_id, [request]))
                continue
            results.append(EnqueueResult(id=live[0][0], run_id=live[0][1], deduped=True))
        return results

    def close(self, batch_id: UUID) -> bool:
        rows = sql.fetch(self.using, STATEMENTS["batch_close"], {"batch": batch_id})
        if not rows:
            return False
        record = self.get(batch_id)
        return record is not None and record.completed_at is not None

    def get(self, batch_id: UUID) -> BatchRecord | None:
        rows = sql.fetch(self.using, STATEMENTS["batch_get"], {"batch": batch_id})
        return _record(rows[0]) if rows else None

    def recent(self, *, limit: int = 100, open_only: bool = False) -> list[BatchRecord]:
        params = {"limit": limit, "open_only": open_only}
        return [_record(r) for r in sql.fetch(self.using, STATEMENTS["batch_list"], params)]

    def members(self, batch_id: UUID, *, limit: int = 1000) -> list[UUID]:
        params = {"batch": batch_id, "after": _NIL, "limit": limit}
        return [r[0] for r in sql.fetch(self.using, STATEMENTS["batch_members"], params)]

    def cancel(self, batch_id: UUID, reason: str | None) -> int:
        # one transaction: closed first, so no member joins between the close and the cancel
        with transaction.atomic(using=self.using):
            sql.fetch(self.using, STATEMENTS["batch_close"], {"batch": batch_id})
            params = {"batch": batch_id, "reason": reason}
            rows = sql.fetch(self.using, STATEMENTS["batch_cancel"], params)
        return int(rows[0][0]) if rows else 0

    def open_count(self) -> int:
        return int(sql.fetch(self.using, STATEMENTS["batch_open_count"], {})[0][0])


def _closed(batch_id: UUID) -> BatchClosedError:
    return BatchClosedError(f"batch {batch_id} is closed or unknown: no member was added")


def _json(value: object) -> Any:
    return decode(value) if isinstance(value, str | bytes) else value


def _record(r: tuple[Any, ...]) -> BatchRecord:
    return BatchRecord(
        id=r[0],
        input=_json(r[1]),
        callbacks=tuple(BatchCallback.from_json(c) for c in _json(r[2])),
        total=r[3],
        pending=r[4],
        done=r[5],
        dead=r[6],
        failed=r[7],
        cancelled=r[8],
        created_at=r[9],
        closed_at=r[10],
        completed_at=r[11],
    )
