"""The PostgreSQL driver's rollup reads and retention: the statements of ``rollup.sql``. The
rows themselves are written by the settle statements of ``jobs.sql`` (rollup.py)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from ...rollup import RollupRow, combine
from . import sql

STATEMENTS = sql.load(Path(__file__).with_name("rollup.sql"))


class PostgresRollupStore:
    def __init__(self, using: str) -> None:
        self.using = using

    def read(self, since: datetime) -> list[RollupRow]:
        """Each minute from ``since`` on, per queue, job name and outcome, in that order."""
        rows = sql.fetch(self.using, STATEMENTS["read_rollup"], {"since": since})
        return combine(
            RollupRow(
                r[0],
                r[1],
                r[2],
                r[3],
                int(r[4]),
                float(r[5]),
                float(r[6]),
                tuple(r[7]),
                tuple(r[8]),
            )
            for r in rows
        )

    def prune(self, older_than: float) -> int:
        """Delete the minutes older than ``older_than`` seconds; how many rows went."""
        return sql.count(self.using, STATEMENTS["prune_rollup"], {"older_than": older_than})
