"""``PayloadStore`` on ``payloads.sql``: the sealed (or clear) payloads of a place walked in key
order, a batch swapped per statement, each row fenced on the value it read (issue 46)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from uuid import UUID

from django.db import transaction

from ...payload import JSONValue, decode
from ..contract import StoredPayload
from . import sql

STATEMENTS = sql.load(Path(__file__).with_name("payloads.sql"))
_NIL = UUID(int=0)


class PostgresPayloadStore:
    def __init__(self, using: str) -> None:
        self.using = using

    def sealed(
        self, place: str, *, after: tuple[UUID, str] | None, limit: int, alias: str | None = None
    ) -> list[StoredPayload]:
        return self._walk(f"sealed_{place}", place, after, limit, alias)

    def unsealed(
        self, place: str, *, after: tuple[UUID, str] | None, limit: int, alias: str | None = None
    ) -> list[StoredPayload]:
        return self._walk(f"unsealed_{place}", place, after, limit, alias)

    def _walk(
        self,
        statement: str,
        place: str,
        after: tuple[UUID, str] | None,
        limit: int,
        alias: str | None,
    ) -> list[StoredPayload]:
        row, name = after or (_NIL, "")
        params = {"after": row, "after_name": name, "limit": limit}
        rows = sql.fetch(alias or self.using, STATEMENTS[statement], params)
        return [_payload(place, r) for r in rows]

    def reseal(
        self, changes: Sequence[tuple[StoredPayload, JSONValue]], alias: str | None = None
    ) -> int:
        changed = 0
        using = alias or self.using
        with transaction.atomic(using=using):
            for place in {payload.place for payload, _ in changes}:
                batch = [
                    {"row": str(p.row), "name": p.name, "old": p.value, "new": new}
                    for p, new in changes
                    if p.place == place
                ]
                params = {"changes": json.dumps(batch)}
                changed += sql.count(using, STATEMENTS[f"reseal_{place}"], params)
        return changed


def _payload(place: str, r: Sequence[object]) -> StoredPayload:
    value: JSONValue = decode(r[2])  # a jsonb value as read (psycopg decodes it)
    return StoredPayload(place, UUID(str(r[0])), str(r[1]), value, str(r[3] or ""))
