"""The PostgreSQL driver's queue depth over time: the statements of ``depth.sql``."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from ..contract import DepthSample
from . import sql

STATEMENTS = sql.load(Path(__file__).with_name("depth.sql"))


class PostgresDepthStore:
    def __init__(self, using: str) -> None:
        self.using = using

    def sample(self) -> int:
        return sql.count(self.using, STATEMENTS["sample_depth"], {})

    def read(self, since: datetime) -> list[DepthSample]:
        rows = sql.fetch(self.using, STATEMENTS["read_depth"], {"since": since})
        return [DepthSample(r[0], r[1], int(r[2]), int(r[3]), int(r[4])) for r in rows]

    def prune(self, older_than: float) -> int:
        return sql.count(self.using, STATEMENTS["prune_depth"], {"older_than": older_than})

    def shift(self, delta: timedelta) -> None:
        """Move every minute ``delta`` earlier, inside the caller's transaction (``age``)."""
        sql.count(self.using, STATEMENTS["age_depth_away"], {"d": delta})
        sql.count(self.using, STATEMENTS["age_depth_back"], {})
