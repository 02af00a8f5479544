"""The scheduler's state: a forward-only watermark per cron and an expiring leader lease."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any, Protocol

from ..clock import Clock, SystemClock


class NotLeaderError(Exception):
    """The dispatch found this scheduler no longer leads; its transaction rolls back."""


class SchedulerStore(Protocol):
    """Watermarks and the leader lease; every time is the store's own clock (the database's)."""

    def watermark(self, cron: str) -> datetime | None:
        """The last occurrence of ``cron`` that fired, or None before its first."""

    def mark_fired(self, cron: str, at: datetime) -> None:
        """Move the watermark forward to ``at``; never backward."""

    def acquire(self, key: str, holder: str, ttl: float) -> bool:
        """Take or renew the lease on ``key`` for ``ttl`` seconds; False while another holds it."""

    def confirm(self, key: str, holder: str) -> None:
        """Raise NotLeaderError unless ``holder`` still holds an unexpired lease on ``key``."""

    def release(self, key: str, holder: str) -> None:
        """Give the lease up, only ``holder``'s own."""

    def leader(self, key: str) -> str | None:
        """The holder of the unexpired lease on ``key``, if any."""

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """Dispatched jobs and the watermark advance commit together (DESIGN Q-07)."""


class MemorySchedulerStore:
    """One process's scheduler state: monotonic like the database's (closes SPEC DRV-05)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self._marks: dict[str, datetime] = {}
        self._leaders: dict[str, tuple[str, datetime]] = {}
        self._lock = threading.RLock()

    def watermark(self, cron: str) -> datetime | None:
        with self._lock:
            return self._marks.get(cron)

    def mark_fired(self, cron: str, at: datetime) -> None:
        with self._lock:
            current = self._marks.get(cron)
            if current is None or at > current:
                self._marks[cron] = at

    def acquire(self, key: str, holder: str, ttl: float) -> bool:
        with self._lock:
            now = self.clock.now()
            current = self._leaders.get(key)
            if current is None or current[0] == holder or current[1] <= now:
                self._leaders[key] = (holder, now + timedelta(seconds=ttl))
                return True
            return False

    def confirm(self, key: str, holder: str) -> None:
        with self._lock:
            current = self._leaders.get(key)
            if current is None or current[0] != holder or current[1] <= self.clock.now():
                raise NotLeaderError(key)

    def release(self, key: str, holder: str) -> None:
        with self._lock:
            if self._leaders.get(key, ("",))[0] == holder:
                del self._leaders[key]

    def leader(self, key: str) -> str | None:
        with self._lock:
            current = self._leaders.get(key)
            return current[0] if current and current[1] > self.clock.now() else None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            yield
