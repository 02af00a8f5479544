"""The PostgreSQL driver's verbs on many jobs and the operators' audit trail: the named
statements of ``bulk.sql`` and ``audit.sql`` (issue 45)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path
from uuid import UUID

from django.db import IntegrityError, transaction

from ...payload import dumps
from ..contract import BulkAction, JobFilter, OperatorRecord
from . import sql
from .archive import with_columns

STATEMENTS = sql.load(Path(__file__).with_name("bulk.sql"))
AUDIT = sql.load(Path(__file__).with_name("audit.sql"))
_NIL = UUID(int=0)
#: the statement each verb runs on a batch (requeue moves waiting jobs, then retries the others)
_VERB = {"cancel": "bulk_cancel", "retry": "bulk_retry", "delete": "bulk_delete"}
#: audit rows deleted per statement by ``prune``
_PRUNE_BATCH = 1000


def filter_params(where: JobFilter, states: Sequence[str]) -> dict[str, object]:
    """The ``admits`` fragment's parameters: the filter's fields, and the stored ``states`` the
    verb acts on."""
    shown = [s for s in where.state if s not in ("ready", "delayed")]
    return {
        "states": list(states),
        "any_state": not where.state,
        "shown": shown or None,
        "due": "ready" in where.state,
        "later": "delayed" in where.state,
        "queue": where.queue,
        "name": where.name,
        "tenant_id": where.tenant_id,
        "stop_reason": where.stop_reason,
        "error_code": where.error_code,
        "created_after": where.created_after,
        "created_before": where.created_before,
        "updated_after": where.updated_after,
        "updated_before": where.updated_before,
        "input": None if where.input is None else dumps(dict(where.input)),
        "only_ids": list(where.ids) if where.ids else None,
    }


class PostgresBulkStore:
    """``BulkStore`` on ``bulk.sql``: each batch one statement, in its own transaction."""

    def __init__(self, using: str) -> None:
        self.using = using

    def match(
        self, where: JobFilter, *, states: Sequence[str], after: UUID | None, limit: int
    ) -> list[UUID]:
        params = {**filter_params(where, states), "after": after or _NIL, "limit": limit}
        return [_uuid(r[0]) for r in sql.fetch(self.using, STATEMENTS["bulk_match"], params)]

    def count(self, where: JobFilter, *, states: Sequence[str]) -> int:
        params = filter_params(where, states)
        return int(sql.fetch(self.using, STATEMENTS["bulk_count"], params)[0][0])

    def act(
        self, action: BulkAction, ids: Sequence[UUID], where: JobFilter
    ) -> tuple[int, list[UUID]]:
        params = {
            **filter_params(where, action.states),
            "ids": list(ids),
            "reason": action.reason,
            "to_queue": action.queue,
        }
        if action.verb == "requeue":  # the waiting ones move; the finished ones run again there
            moved = set(self._run("bulk_move", params))
            left = [i for i in ids if i not in moved]
            finished = [s for s in action.states if s not in ("ready", "delayed")]
            again = {**params, **filter_params(where, finished), "ids": left}
            return len(moved) + self._retry(again, left)[0], []
        if action.verb == "retry":
            return self._retry(params, list(ids))
        rows = self._rows(_VERB[action.verb], params)
        return len(rows), [row[0] for row in rows if row[1]]

    def _run(self, statement: str, params: Mapping[str, object]) -> list[UUID]:
        return [job_id for job_id, _ in self._rows(statement, params)]

    def _rows(self, statement: str, params: Mapping[str, object]) -> list[tuple[UUID, bool]]:
        """(id, parked) of each job the statement changed, in one transaction: the wake-ups
        go out with its commit."""
        with transaction.atomic(using=self.using):
            rows = sql.fetch(self.using, STATEMENTS[statement], params)
        return [(UUID(str(r[0])), bool(r[1])) for r in rows]

    def _retry(self, params: Mapping[str, object], ids: list[UUID]) -> tuple[int, list[UUID]]:
        if not ids:
            return 0, []
        try:
            return self._restored_retry(params), []
        except IntegrityError:
            # a live job took one of these keys after the statement's snapshot: one at a time,
            # each that still collides left as it is (in the history, if it was there)
            changed = 0
            for job_id in ids:
                try:
                    changed += self._restored_retry({**params, "ids": [job_id]})
                except IntegrityError:
                    continue
            return changed, []

    def _restored_retry(self, params: Mapping[str, object]) -> int:
        """HIST-09: the batch's jobs moved to the history brought back, then retried, in one
        transaction: a failure leaves them where they were. The retry is tried first on its
        own (BULK-26): when it finds every id in x_jobs it has done all there was to do, and
        the history is not asked; when one is not there it changes nothing, and the batch goes
        again after the restore. A row that another transaction changed while the retry
        waited for it is judged again by one more pass (BULK-27)."""
        statement = STATEMENTS["bulk_retry"]
        with transaction.atomic(using=self.using):
            [(changed, present, picked)] = sql.fetch(
                self.using, statement, {**params, "restored": False}
            )
            if present < len(_ids(params)):
                sql.count(self.using, _restore_statement(), params)
                [(changed, _, picked)] = sql.fetch(
                    self.using, statement, {**params, "restored": True}
                )
            if changed < picked:  # BULK-27: rows changed under the statement, judged again
                changed += sql.fetch(self.using, statement, {**params, "restored": True})[0][0]
            return int(changed)


class PostgresAuditStore:
    """``AuditStore`` on ``audit.sql``."""

    def __init__(self, using: str) -> None:
        self.using = using

    def record(self, entry: OperatorRecord) -> None:
        params = {
            "id": entry.id,
            "actor": entry.actor,
            "verb": entry.verb,
            "job_id": entry.job_id,
            "target": entry.target,
            "filter": None if entry.filter is None else json.dumps(dict(entry.filter)),
            "reason": entry.reason,
            "matched": entry.matched,
            "changed": entry.changed,
            "skipped": entry.skipped,
            "status": entry.status,
            "expected": entry.expected,
            "error": entry.error,
            "by_job": entry.by_job,
        }
        sql.fetch(self.using, AUDIT["audit_record"], params)

    def recent(self, *, limit: int = 100, verb: str | None = None) -> list[OperatorRecord]:
        rows = sql.fetch(self.using, AUDIT["audit_recent"], {"limit": limit, "verb": verb})
        # the columns in OperatorRecord's order; the filter decoded
        return [replace(OperatorRecord(*r), filter=_decoded(r[6])) for r in rows]

    def get(self, record_id: UUID) -> OperatorRecord | None:
        rows = sql.fetch(self.using, AUDIT["audit_get"], {"id": record_id})
        return next((replace(OperatorRecord(*r), filter=_decoded(r[6])) for r in rows), None)

    def progress(
        self,
        record_id: UUID,
        *,
        status: str,
        counts: tuple[int, int, int],
        error: str | None = None,
        by_job: str | None = None,
    ) -> None:
        matched, changed, skipped = counts
        params = {
            "id": record_id,
            "status": status,
            "matched": matched,
            "changed": changed,
            "skipped": skipped,
            "error": error,
            "by_job": by_job,
        }
        sql.fetch(self.using, AUDIT["audit_progress"], params)

    def prune(self, older_than: float) -> int:
        params = {"older_than": older_than, "batch": _PRUNE_BATCH}
        total = 0
        while True:
            gone = sql.count(self.using, AUDIT["audit_prune"], params)
            total += gone
            if gone < _PRUNE_BATCH:
                return total


@cache
def _restore_statement() -> str:
    return with_columns(STATEMENTS["bulk_restore"])


def _ids(params: Mapping[str, object]) -> Sequence[object]:
    ids = params["ids"]
    assert isinstance(ids, Sequence)
    return ids


def _uuid(value: object) -> UUID:
    """An id as the driver hands it back: a UUID already (psycopg), else its text."""
    return value if isinstance(value, UUID) else UUID(str(value))


def _decoded(value: object) -> Mapping[str, object] | None:
    """A record's filter as the driver hands jsonb back (decoded, or its text)."""
    if isinstance(value, str | bytes):
        loaded: Mapping[str, object] = json.loads(value)
        return loaded
    return value if isinstance(value, Mapping) else None
