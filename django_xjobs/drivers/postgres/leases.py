"""The PostgreSQL driver's fleet slot store: the named statements of ``leases.sql``.

Rows in ``x_job_leases``, arbitrated by its unique ``(lease_key, slot)`` index and timed by the
database clock; no advisory locks, so it is safe behind a transaction pooler (DESIGN §5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..rules import check_limit, check_ttl
from . import sql

STATEMENTS = sql.load(Path(__file__).with_name("leases.sql"))


class PostgresLeaseStore:
    def __init__(self, using: str) -> None:
        self.using = using

    def acquire(self, key: str, limit: int, ttl: float, holder: str) -> int | None:
        limit, seconds = check_limit(limit), check_ttl(ttl)
        if limit <= 0:
            return None  # SLOT-06: grants nothing
        params: dict[str, Any] = {"key": key, "limit": limit, "ttl": seconds, "holder": holder}
        # Each attempt is one statement that cannot grant a slot twice. An attempt that lost
        # its candidate to a racer leaves that slot live for the next snapshot, so without
        # releases in between, limit + 1 attempts reach an answer; giving up after them sheds
        # the claim, which is always safe.
        for _ in range(limit + 1):
            rows = sql.fetch(self.using, STATEMENTS["acquire_slot"], params)
            candidate, granted = rows[0] if rows else (None, None)
            if granted is not None:
                return int(granted)
            if candidate is None:
                return None  # every slot is live
        return None

    def renew(self, key: str, slot: int, ttl: float, holder: str) -> bool:
        params: dict[str, Any] = {"key": key, "slot": slot, "ttl": check_ttl(ttl), "holder": holder}
        return sql.count(self.using, STATEMENTS["renew_slot"], params) == 1

    def release(self, key: str, slot: int, holder: str) -> bool:
        params = {"key": key, "slot": slot, "holder": holder}
        return sql.count(self.using, STATEMENTS["release_slot"], params) == 1

    def held(self, key: str) -> int:
        rows = sql.fetch(self.using, STATEMENTS["held_slots"], {"key": key})
        return int(rows[0][0]) if rows else 0
