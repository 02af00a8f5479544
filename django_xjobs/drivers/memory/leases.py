"""The memory driver's fleet slot store: the PostgreSQL store's answers, in process.

Rows live in a dict keyed ``(lease_key, slot)`` under the driver's lock, with times from the
driver's clock; a row is live while ``expires_at > now`` (SPEC SLOT-03/06, SE-08).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..rules import check_limit, check_ttl

if TYPE_CHECKING:
    from .state import MemoryState


@dataclass
class _Slot:
    holder: str
    expires_at: datetime


class MemoryLeaseStore:
    def __init__(self, state: MemoryState) -> None:
        self.state = state
        self._slots: dict[tuple[str, int], _Slot] = {}

    def _live(self, key: str, slot: int, now: datetime) -> _Slot | None:
        row = self._slots.get((key, slot))
        return row if row is not None and row.expires_at > now else None

    def acquire(self, key: str, limit: int, ttl: float, holder: str) -> int | None:
        limit, seconds = check_limit(limit), check_ttl(ttl)
        with self.state._lock:
            now = self.state.clock.now()
            # the first free slot is at most the number of live rows, so this stops early
            for slot in range(limit):
                if self._live(key, slot, now) is None:  # absent, or expired: taken over
                    self._slots[(key, slot)] = _Slot(holder, now + timedelta(seconds=seconds))
                    return slot
        return None

    def renew(self, key: str, slot: int, ttl: float, holder: str) -> bool:
        seconds = check_ttl(ttl)
        with self.state._lock:
            now = self.state.clock.now()
            row = self._live(key, slot, now)
            if row is None or row.holder != holder:  # never revive a lapsed slot (SE-08)
                return False
            row.expires_at = now + timedelta(seconds=seconds)
            return True

    def release(self, key: str, slot: int, holder: str) -> bool:
        with self.state._lock:
            row = self._slots.get((key, slot))
            if row is None or row.holder != holder:
                return False
            del self._slots[(key, slot)]
            return True

    def held(self, key: str) -> int:
        with self.state._lock:
            now = self.state.clock.now()
            return sum(
                1 for (k, _), row in self._slots.items() if k == key and row.expires_at > now
            )

    def shift(self, seconds: float) -> None:
        """Make every stored expiry ``seconds`` earlier (the same as waiting that long)."""
        delta = timedelta(seconds=seconds)
        with self.state._lock:
            for row in self._slots.values():
                row.expires_at -= delta
