"""The scheduler's state in process: a forward-only watermark per cron and an expiring leader
lease, on the driver's clock."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta

from ...clock import Clock, SystemClock
from ..contract import CronState, NotLeaderError


class MemorySchedulerStore:
    """One process's scheduler state: monotonic like the database's (closes SPEC DRV-05)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self._marks: dict[str, datetime] = {}
        self._leaders: dict[str, tuple[str, datetime]] = {}
        self._controls: dict[str, CronState] = {}
        self._runs: dict[str, str] = {}
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

    def pause_cron(self, cron: str, by: str | None) -> CronState:
        with self._lock:
            held = self._controls.get(cron)
            if held is None or not held.paused:  # the first pause wins, as on the database
                held = CronState(cron, True, self.clock.now(), by)
                self._controls[cron] = held
            return held

    def resume_cron(self, cron: str) -> CronState:
        with self._lock:
            self._controls[cron] = state = CronState(cron, False)
            return state

    def mark_run(self, cron: str, key: str) -> datetime | None:
        with self._lock:
            if self._runs.get(cron) == key:
                return None
            self._runs[cron] = key
            return self.clock.now()

    def cron_controls(self) -> list[CronState]:
        with self._lock:
            return [self._controls[name] for name in sorted(self._controls)]

    def paused_crons(self) -> frozenset[str]:
        with self._lock:
            return frozenset(name for name, state in self._controls.items() if state.paused)
