"""The memory driver's rollup: the rows the PostgreSQL settle statements write, kept in process
under the driver's lock with times from its clock (rollup.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from ...rollup import RollupRow, combine, ended

if TYPE_CHECKING:
    from ..contract import JobSnapshot
    from .state import MemoryState


class MemoryRollupStore:
    def __init__(self, state: MemoryState) -> None:
        self.state = state
        self._rows: dict[tuple[datetime, str, str, str], RollupRow] = {}

    def count(self, row: JobSnapshot, outcome: str, now: datetime) -> None:
        """Count the run of ``row`` (as it was claimed) that ended at ``now`` as ``outcome``;
        called under the driver's lock, by the settle that landed."""
        attempted = row.last_attempted_at or now
        minute = now.astimezone(UTC).replace(second=0, microsecond=0)
        run = (now - attempted).total_seconds()
        wait = (attempted - row.run_at).total_seconds()
        one = ended(minute, row.queue, row.name, outcome, run, wait)
        key = (minute, row.queue, row.name, outcome)
        held = self._rows.get(key)
        self._rows[key] = one if held is None else combine([held, one])[0]

    def read(self, since: datetime) -> list[RollupRow]:
        with self.state._lock:
            return combine(row for row in self._rows.values() if row.minute >= since)

    def prune(self, older_than: float) -> int:
        with self.state._lock:
            cutoff = self.state.clock.now() - timedelta(seconds=older_than)
            gone = [key for key in self._rows if key[0] < cutoff]
            for key in gone:
                del self._rows[key]
            return len(gone)

    def shift(self, delta: timedelta) -> None:
        """Move every minute ``delta`` earlier, as ``MemoryDriver.shift`` moves the rows."""
        moved = [replace(row, minute=row.minute - delta) for row in self._rows.values()]
        self._rows = {(r.minute, r.queue, r.name, r.outcome): r for r in moved}
