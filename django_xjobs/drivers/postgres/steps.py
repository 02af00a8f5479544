"""The PostgreSQL driver's step and event stores: the named statements of ``steps.sql``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, cast
from uuid import UUID

from ... import conf, crypt
from ...payload import decode, dumps
from ..contract import EventRecord, StepRecord
from ..rules import event_matches, known_status
from . import sql

STATEMENTS = sql.load(Path(__file__).with_name("steps.sql"))
#: encrypted candidates read per statement by a waiter that matches on their data
CANDIDATES = 100


def _json(value: object) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def _dumps(value: object) -> str | None:
    return None if value is None else dumps(value)


class PostgresStepStore:
    def __init__(self, using: str) -> None:
        self.using = using

    def alias(self, job_id: UUID) -> str:
        return self.using

    def now(self) -> datetime:
        [(now,)] = sql.fetch(self.using, STATEMENTS["now"], {})
        return cast(datetime, now)

    def list(self, run_id: UUID) -> list[StepRecord]:
        rows = sql.fetch(self.using, STATEMENTS["list_steps"], {"run_id": run_id})
        records = []
        for r in rows:
            records.append(
                StepRecord(
                    run_id=r[0],
                    name=r[1],
                    status=known_status(r[0], r[1], r[2]),  # SPEC DB-05: never guess
                    output=_json(r[3]),
                    started_at=r[4],
                    completed_at=r[5],
                    wake_at=r[6],
                    event=r[7],
                    correlation_key=r[8],
                    error=r[9],
                    attempts=r[10],
                    position=r[11],
                    match=_json(r[12]),
                    any_tenant=bool(r[13]),
                )
            )
        return records

    def put(self, record: StepRecord, *, job_id: UUID, lease_token: UUID) -> bool:
        params: dict[str, Any] = {
            "run_id": record.run_id,
            "name": record.name,
            "status": record.status,
            "output": _dumps(record.output),
            "started_at": record.started_at,
            "completed_at": record.completed_at,
            "wake_at": record.wake_at,
            "event": record.event,
            "correlation_key": record.correlation_key,
            "match": _dumps(record.match),
            "any_tenant": record.any_tenant,
            "error": record.error,
            "attempts": record.attempts,
            "position": record.position,
            "ran_for": record.ran_for,
            "job_id": job_id,
            "lease_token": lease_token,
        }
        return sql.count(self.using, STATEMENTS["put_step"], params) == 1


class PostgresEventStore:
    def __init__(self, using: str) -> None:
        self.using = using

    def publish(
        self,
        *,
        id: UUID,
        name: str,
        payload: object,
        correlation_key: str | None,
        ttl: float,
        tenant_id: str | None = None,
        started: int = 0,
        cancelled: int = 0,
        refused: Sequence[Mapping[str, str]] = (),
    ) -> EventRecord:
        data = _dumps(payload) or "null"
        params = {
            "id": id,
            "name": name,
            # the waiters are matched on the data as given, a statement parameter; the row
            # keeps it sealed under ENCRYPTION_KEYS (SPEC CRYPT-08)
            "data": data,
            "payload": data if payload is None else crypt.seal(data),
            "correlation_key": correlation_key,
            "ttl": ttl,
            "tenant_id": tenant_id,
            "started": started,
            "cancelled": cancelled,
            "refused": dumps(list(refused)),
        }
        [row] = sql.fetch(self.using, STATEMENTS["publish_event"], params)
        return replace(_event(row), payload=decode(data))

    def cancel(
        self, name: str, *, tenant_id: str | None, match: Mapping[str, object], reason: str
    ) -> tuple[int, list[UUID]]:
        params = {"name": name, "tenant_id": tenant_id, "match": dumps(match), "reason": reason}
        [(count, parked)] = sql.fetch(self.using, STATEMENTS["cancel_on_event"], params)
        return int(count), list(parked)

    def find(
        self,
        name: str,
        *,
        after: datetime,
        correlation_key: str | None = None,
        match: Mapping[str, object] | None = None,
        tenant_id: str | None = None,
        any_tenant: bool = False,
    ) -> EventRecord | None:
        params: dict[str, Any] = {
            "name": name,
            "after": after,
            "correlation_key": correlation_key,
            "match": _dumps(match or {}),
            "tenant_id": tenant_id,
            "any_tenant": any_tenant,
        }
        if not match or conf.get().encryption is None:
            rows = sql.fetch(self.using, STATEMENTS["find_event"], params)
            return _opened(_event(rows[0])) if rows else None
        # the database cannot look inside an encrypted event's data: the candidates it cannot
        # rule out (those matching in clear and the sealed ones) are read in order, a page at a
        # time, and the sealed ones opened and matched here (SPEC CRYPT-09)
        params.update(from_at=None, from_id=None, limit=CANDIDATES)
        while True:
            rows = sql.fetch(self.using, STATEMENTS["find_event_candidates"], params)
            for row in rows:
                event = _event(row)
                if not crypt.is_sealed(event.payload):
                    return event  # matched by the statement
                value = crypt.unseal(event.payload)
                if event_matches(value, match):
                    return replace(event, payload=value)
            if len(rows) < CANDIDATES:
                return None
            params.update(from_at=rows[-1][4], from_id=rows[-1][0])

    def purge(self) -> int:
        return sql.count(self.using, STATEMENTS["purge_events"], {})

    def recent(
        self,
        *,
        name: str | None = None,
        tenant_id: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
    ) -> list[EventRecord]:
        params = {"name": name, "tenant_id": tenant_id, "since": since, "limit": limit}
        rows = sql.fetch(self.using, STATEMENTS["recent_events"], params)
        return [_event(row) for row in rows]

    def get(self, event_id: UUID) -> EventRecord | None:
        rows = sql.fetch(self.using, STATEMENTS["get_event"], {"id": event_id})
        return _event(rows[0]) if rows else None


def _opened(event: EventRecord) -> EventRecord:
    """An event as a waiter receives it: its data opened when sealed (``EncryptionKeyMissingError``
    when no listed key opens it: the attempt fails, as for a step output no key opens)."""
    if not crypt.is_sealed(event.payload):
        return event
    return replace(event, payload=crypt.unseal(event.payload))


def _event(row: tuple[Any, ...]) -> EventRecord:
    refused = tuple(_json(row[10]) or ())
    return EventRecord(
        row[0],
        row[1],
        _json(row[2]),
        row[3],
        row[4],
        row[5],
        row[6],
        row[7],
        row[8],
        row[9],
        refused,
    )
