"""The scheduler store: a forward-only watermark per cron and an expiring leader lease."""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Protocol

from .records import CronState

#: the lease key the scheduler role's leader holds (read by the metrics and the admin too)
LEADER_KEY = "scheduler"


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

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """Dispatched jobs and the watermark advance commit together (DESIGN Q-07)."""

    def pause_cron(self, cron: str, by: str | None) -> CronState:
        """Paused from now on; pausing a paused cron keeps its first pause."""

    def resume_cron(self, cron: str) -> CronState:
        """No longer paused; the watermark stays, so the next round catches up by the cron's rule."""

    def mark_run(self, cron: str, key: str) -> datetime | None:
        """Record a "run now" under ``key``; None when ``key`` is already the latest one."""

    def cron_controls(self) -> list[CronState]:
        """Every cron an operator ever set, by name; reads only."""

    def paused_crons(self) -> frozenset[str]:
        """The names of the paused crons; reads only."""
