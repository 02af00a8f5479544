"""The outbox store on PostgreSQL: the named statements of ``outbox.sql``."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any
from uuid import UUID

from django.db import transaction

from ... import conf, log
from ...errors import DriverUnavailableError
from ...ids import uuid7, uuid7_many
from ..contract import (
    EnqueueRequest,
    EnqueueResult,
    OutboxRow,
    PublishTarget,
    QuarantinedRow,
)
from . import sql
from .limits import stamp_keys
from .listener import Listener, listen_alias
from .params import request_columns

#: the channel a commit that staged rows notifies (outbox.sql), and the relay listens on
CHANNEL = "xjobs_outbox"
STATEMENTS = sql.load(Path(__file__).with_name("outbox.sql"))
#: rows one publish transaction takes at most: its locks and its undo stay bounded
PUBLISH_CHUNK = 1000


class _Statements:
    """``outbox.sql``'s statements, run on the alias ``using``."""

    using: str

    def _run(self, name: str, params: Mapping[str, object]) -> list[tuple[Any, ...]]:
        return sql.fetch(self.using, STATEMENTS[name], params)

    def _count(self, name: str, params: Mapping[str, object]) -> int:
        return sql.count(self.using, STATEMENTS[name], params)


class PostgresOutboxStore(_Statements):
    """``x_outbox`` on the database alias ``using``. ``claim_lease`` is checked here, when the
    store is built, never at the first claim (SPEC OUTBOX-14)."""

    transactional = True

    def __init__(self, using: str, claim_lease: object = None) -> None:
        self.using = using
        self.claim_lease = (
            conf.get().outbox_claim_lease if claim_lease is None else conf.claim_lease(claim_lease)
        )
        self.quarantine = PostgresQuarantine(using)

    def notify_on_staged(self, callback: Callable[[], None]) -> Listener | None:
        alias = listen_alias(self.using, CHANNEL)  # None: poll (a pooler, logged)
        if alias is None:
            return None
        listener = Listener(alias, CHANNEL, callback)
        listener.start()
        return listener

    def stage(self, request: EnqueueRequest, *, notify: bool = True) -> UUID:
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
            "expires_at": request.expires_at,
            "expires_in": request.expires_in,
            "replace": request.replace,
            "after": None if request.after is None else list(request.after),
            "run_anyway": request.run_anyway or None,
        }
        if notify:
            self._run("stage", params)
        else:
            self._count("stage_quiet", params)
        return row_id

    def stage_many(self, requests: Sequence[EnqueueRequest]) -> None:
        if any(r.after is not None for r in requests):  # an array of arrays: one by one
            for index, request in enumerate(requests):
                self.stage(request, notify=index == 0)
            return
        self._run(
            "stage_many",
            {
                "ids": [r.id for r in requests],
                **request_columns(requests),
                "replaces": [r.replace for r in requests],
            },
        )

    def publish_ids(self, driver: PublishTarget, ids: Sequence[UUID], token: str) -> int:
        published = 0
        for start in range(0, len(ids), PUBLISH_CHUNK):
            published += self._publish_chunk(driver, ids[start : start + PUBLISH_CHUNK], token)
        return published

    def _publish_chunk(self, driver: PublishTarget, ids: Sequence[UUID], token: str) -> int:
        # On the jobs' own database the take (claim and mark at once), the inserts and any
        # collapse commit together: a failure rolls it all back, so the relay sees the rows at
        # once (SPEC OUTBOX-10), and a publisher killed midway leaves nothing to publish twice
        # (SPEC OUTBOX-12). Across databases: claim, insert, mark, as the relay does.
        if driver.database != self.using:
            return self._publish_across(driver, ids, token)
        with transaction.atomic(using=self.using):
            self._run("bound_publish", {"ms": str(max(1, int(self.claim_lease * 1000)))})
            params = {
                "ids": list(ids),
                "run_ids": uuid7_many(len(ids)),
                "lease": self.claim_lease,
                "token": token,
            }
            try:
                taken = self._run("publish_taken", params)
            except Exception as error:
                log.event(
                    logging.WARNING,
                    "xjobs.outbox.publish_failed",
                    id=ids[0],
                    published=0,
                    remaining=len(ids),
                    error=error,
                )
                raise
            stamp_keys(self.using, [row_id for row_id, inserted in taken if inserted])
            suppressed = [row_id for row_id, inserted in taken if not inserted]
            if suppressed:
                found = self._run("taken_rows", {"ids": suppressed, "token": token})
                rows = sorted((_row(r) for r in found), key=lambda r: (r.staged_at, r.id))
                self._insert_taken(driver, self._enqueue(driver, rows, token), rows, token)
            return len(taken)

    def publishes_together(self, driver: PublishTarget) -> bool:
        return driver.database == self.using

    def publish_claimed(
        self, driver: PublishTarget, rows: Sequence[OutboxRow], token: str
    ) -> set[UUID]:
        # One transaction for the batch: the mark (the rows still ours), their jobs, and any
        # collapse. A failure rolls back all of it, so no row of the batch is published ahead of
        # one that failed (SPEC OUTBOX-10), and nothing is published twice (SPEC OUTBOX-12).
        if not rows:
            return set()
        with transaction.atomic(using=self.using):
            self._run("bound_publish", {"ms": str(max(1, int(self.claim_lease * 1000)))})
            params = {"ids": [row.id for row in rows], "token": token}
            marked = {r[0] for r in self._run("take_claimed", params)}
            ours = [row for row in rows if row.id in marked]
            if ours:
                results = driver.jobs().enqueue_many([row.request() for row in ours])
                self._insert_taken(driver, results, ours, token)
            return marked

    def _insert_taken(
        self, driver: PublishTarget, results: list[EnqueueResult], rows: list[OutboxRow], token: str
    ) -> None:
        """Record the job each taken row became where it collapsed into a live duplicate (the
        take marked every row as its own job)."""
        moved = [
            (row.id, result.id)
            for row, result in zip(rows, results, strict=True)
            if row.id != result.id
        ]
        if moved:
            self._count(
                "collapsed",
                {"ids": [m[0] for m in moved], "job_ids": [m[1] for m in moved], "token": token},
            )

    def _publish_across(self, driver: PublishTarget, ids: Sequence[UUID], token: str) -> int:
        rows = self.claim_ids(ids, token)
        if not rows:
            return 0
        try:
            results = self._enqueue(driver, rows, token, across=True)
        except Exception:
            self.release([row.id for row in rows], token)  # the claim committed: hand it back
            raise
        params = {
            "ids": [row.id for row in rows],
            "job_ids": [result.id for result in results],
            "token": token,
        }
        return self._count("mark_published_many", params)

    def _enqueue(
        self, driver: PublishTarget, rows: list[OutboxRow], token: str, *, across: bool = False
    ) -> list[EnqueueResult]:
        try:
            if across:
                return enqueue_across(driver, [row.request() for row in rows])
            return driver.jobs().enqueue_many([row.request() for row in rows])
        except Exception as error:
            log.event(
                logging.WARNING,
                "xjobs.outbox.publish_failed",
                job=rows[0].job,
                id=rows[0].id,
                published=0,
                remaining=len(rows),
                error=error,
            )
            raise

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

    def publish(
        self, driver: PublishTarget, row: OutboxRow, token: str
    ) -> tuple[EnqueueResult, bool]:
        # On the jobs' own database the insert and the mark commit together, so a relay killed
        # between them leaves nothing to publish twice; across databases the job's primary key
        # (the staged id) turns a second publish into a no-op (SPEC OUTBOX-12).
        same_database = driver.database == self.using
        with transaction.atomic(using=self.using) if same_database else nullcontext():
            if same_database:
                self._run("bound_publish", {"ms": str(max(1, int(self.claim_lease * 1000)))})
            if same_database:
                result = driver.jobs().enqueue(row.request())
            else:
                [result] = enqueue_across(driver, [row.request()])
            return result, self.mark_published(row.id, token, result.id)

    def resolve(self, job_id: UUID) -> UUID | None:
        rows = self._run("resolve", {"id": job_id})
        return rows[0][0] if rows else None

    def pending(self) -> tuple[int, float]:
        [(count, oldest)] = self._run("pending", {})
        return int(count), float(oldest)

    def prune(self, retention: float) -> int:
        return self._count("prune", {"retention": retention})


class PostgresQuarantine(_Statements):
    """The quarantined rows of ``x_outbox`` on the alias ``using`` (``quarantined_at`` set)."""

    def __init__(self, using: str) -> None:
        self.using = using

    def hold(self, row_id: UUID, token: str, code: str, error: str) -> bool:
        params = {"id": row_id, "token": token, "code": code, "error": error}
        return self._count("quarantine", params) == 1

    def rows(self, limit: int = 100) -> list[QuarantinedRow]:
        return [QuarantinedRow(*r) for r in self._run("quarantined", {"limit": limit})]

    def count(self) -> int:
        [(count,)] = self._run("quarantined_count", {})
        return int(count)

    def retry(self, row_id: UUID) -> bool:
        return self._count("unquarantine", {"id": row_id}) == 1

    def discard(self, row_id: UUID) -> bool:
        return self._count("discard", {"id": row_id}) == 1


class _Moved(Exception):
    """The jobs a publish found in the history: its transaction is rolled back."""

    def __init__(self, moved: dict[UUID, UUID]) -> None:
        super().__init__(len(moved))
        self.moved = moved


def enqueue_across(driver: PublishTarget, requests: list[EnqueueRequest]) -> list[EnqueueResult]:
    """The staged jobs inserted into another database than the outbox's. There the insert and
    the mark commit apart: a relay that died between them leaves the row to publish again, and
    by then its job may have finished and moved to the history (``XJOBS["HISTORY"]``), where
    the primary key that makes a second insert a no-op does not reach. So the inserts and a
    look into the history commit together (HIST-13): a job found there was published before,
    its insert is rolled back and it answers for itself. After the insert, not before: a move
    that was in flight has committed by then (the insert waited on the row it deleted)."""
    if driver.database is None:  # the memory driver answers a moved staged id itself
        return _enqueue_all(driver, requests)
    from .archive import moved_ids

    found: dict[UUID, UUID] = {}
    for _ in range(3):
        pending = [q for q in requests if q.id is None or q.id not in found]
        try:
            with transaction.atomic(using=driver.database):
                results = _enqueue_all(driver, pending)
                inserted = [r.id for q, r in zip(pending, results, strict=True) if q.id == r.id]
                moved = moved_ids(driver.database, inserted)
                if moved:
                    raise _Moved(moved)
        except _Moved as again:
            found.update(again.moved)
            continue
        answered = iter(results)
        return [
            EnqueueResult(id=q.id, run_id=found[q.id])
            if q.id is not None and q.id in found
            else next(answered)
            for q in requests
        ]
    raise DriverUnavailableError("staged jobs kept moving to the history while published")


def _enqueue_all(driver: PublishTarget, requests: list[EnqueueRequest]) -> list[EnqueueResult]:
    """One request by the single enqueue (as ``enqueue_many`` would), more in one statement."""
    if len(requests) == 1:
        return [driver.jobs().enqueue(requests[0])]
    return driver.jobs().enqueue_many(requests) if requests else []


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
        expires_at=r[13],
        expires_in=r[14],
        replace=r[15],
        after=None if r[16] is None else tuple(r[16]),
        run_anyway=bool(r[17]),
    )
