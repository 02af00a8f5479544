"""``PayloadStore`` on ``payloads.sql``: the sealed payloads of a place walked in key order, a
batch swapped per statement, each row fenced on the value it read (issue 46)."""

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
        self, place: str, *, after: tuple[UUID, str] | None, limit: int
    ) -> list[StoredPayload]:
        row, name = after or (_NIL, "")
        params = {"after": row, "after_name": name, "limit": limit}
        rows = sql.fetch(self.using, STATEMENTS[f"sealed_{place}"], params)
        return [StoredPayload(place, UUID(str(r[0])), r[1], _value(r[2])) for r in rows]

    def reseal(self, changes: Sequence[tuple[StoredPayload, JSONValue]]) -> int:
        changed = 0
        with transaction.atomic(using=self.using):
            for place in {payload.place for payload, _ in changes}:
                batch = [
                    {"row": str(p.row), "name": p.name, "old": p.value, "new": new}
                    for p, new in changes
                    if p.place == place
                ]
                params = {"changes": json.dumps(batch)}
                changed += sql.count(self.using, STATEMENTS[f"reseal_{place}"], params)
        return changed


def _value(stored: object) -> JSONValue:
    """A ``jsonb`` value as read (psycopg decodes it; a text one is decoded here)."""
    value: JSONValue = decode(stored)
    return value
