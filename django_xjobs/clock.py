"""The one clock Python code reads, so tests can move time instead of waiting for it."""

from __future__ import annotations

import sys
import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """What every part that reads the time takes: ``now()``, aware, in UTC. Time that two
    processes compare comes from the database instead (its ``now()``)."""

    def now(self) -> datetime: ...


class SystemClock:
    """Wall-clock time, aware and in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FrozenClock:
    """A clock that only moves when told: ``clock.advance(30)``::

        clock = FrozenClock()
        runs = run_to_completion(job_id, clock=clock)

    It starts at 2026-01-01 UTC unless given ``start``.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        """Move the clock ``seconds`` forward and return the new time."""
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now


system_clock = SystemClock()


def frozen_now() -> datetime | None:
    """The time freezegun holds, aware and in UTC::

        with freeze_time("2026-03-01 09:00"):
            assert frozen_now() == datetime(2026, 3, 1, 9, tzinfo=UTC)

    None when no freeze is active.
    """
    api = sys.modules.get("freezegun.api")
    if api is None or not getattr(api, "freeze_factories", None):
        return None
    value: datetime = api.freeze_factories[-1]()
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
