"""The PostgreSQL driver's fleet slot store: the named statements of ``leases.sql``.

Rows in ``x_job_leases``, arbitrated by its unique ``(lease_key, slot)`` index and timed by the
database clock; no advisory locks, so it is safe behind a transaction pooler (DESIGN §5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db import connections

from . import sql
from .memory_leases import check_limit, check_ttl

STATEMENTS = sql.load(Path(__file__).with_name("leases.sql"))


class PostgresLeaseStore:
    def __init__(self, using: str) -> None:
        self.using = using

    def acquire(self, key: str, limit: int, ttl: float, holder: str) -> int | None:
        limit, seconds = check_limit(limit), check_ttl(ttl)
        if limit <= 0:
            return None  # SLOT-06: grants nothing
        params: dict[str, Any] = {"key": key, "limit": limit, "ttl": seconds, "holder": holder}
        with connections[self.using].cursor() as cursor:
            # Each attempt is one statement that cannot grant a slot twice. An attempt that
            # lost its candidate to a racer leaves that slot live for the next snapshot, so
            # without releases in between, limit + 1 attempts reach an answer; giving up
            # after them sheds the claim, which is always safe.
            for _ in range(limit + 1):
                cursor.execute(STATEMENTS["acquire_slot"], params)
                row = cursor.fetchone()
                candidate, granted = row if row is not None else (None, None)
                if granted is not None:
                    return int(granted)
                if candidate is None:
                    return None  # every slot is live
        return None

    def renew(self, key: str, slot: int, ttl: float, holder: str) -> bool:
        params: dict[str, Any] = {"key": key, "slot": slot, "ttl": check_ttl(ttl), "holder": holder}
        with connections[self.using].cursor() as cursor:
            cursor.execute(STATEMENTS["renew_slot"], params)
            return bool(cursor.rowcount == 1)

    def release(self, key: str, slot: int, holder: str) -> bool:
        with connections[self.using].cursor() as cursor:
            cursor.execute(STATEMENTS["release_slot"], {"key": key, "slot": slot, "holder": holder})
            return bool(cursor.rowcount == 1)

    def held(self, key: str) -> int:
        with connections[self.using].cursor() as cursor:
            cursor.execute(STATEMENTS["held_slots"], {"key": key})
            row = cursor.fetchone()
        return int(row[0]) if row is not None else 0
