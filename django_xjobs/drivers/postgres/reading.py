"""How old the figures read on a database alias are (``drivers/reading.py`` asks)."""

from __future__ import annotations

from pathlib import Path

from . import sql

STATEMENTS = sql.load(Path(__file__).with_name("reading.sql"))


def read_lag(alias: str) -> tuple[bool, float | None]:
    """Whether ``alias`` is a standby, and its replay lag in seconds (0.0 on a primary; None on
    a standby that has replayed nothing yet). Raises ``DriverUnavailableError`` when the alias
    does not answer."""
    standby, lag = sql.fetch(alias, STATEMENTS["read_lag"], {})[0]
    return bool(standby), None if lag is None else float(lag)
