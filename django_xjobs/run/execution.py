"""What a run did: its ``Outcome``, the ``Execution`` value that ends it (one settle), and the
``Body`` a timed-out run leaves running. Values only, below ``run/signals.py`` and everything
that settles a run, so the lifecycle signals can name an execution without importing the
pipeline that makes one."""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ..drivers.contract import ClaimedJob, Settle
from ..drivers.values import quick_init


class Outcome(enum.StrEnum):
    """Every way a run ends (STYLE: one closed set)."""

    COMPLETED = "completed"
    RETRIED = "retried"
    DEAD_LETTERED = "dead_lettered"
    FAILED = "failed"
    SUSPENDED = "suspended"
    CANCELLED = "cancelled"
    LEASE_LOST = "lease_lost"


@quick_init
@dataclass(frozen=True)
class Execution:
    """What one run did and the single settle value that ends it."""

    outcome: Outcome
    job: ClaimedJob
    duration: float
    settle: Settle
    error: str | None = None
    stop_reason: str | None = None
    retry_in: float | None = None
    resume_at: datetime | None = None
    replayed: tuple[str, ...] = ()
    #: a body that passed its timeout and still runs in its thread (SPEC EXEC-05): whoever
    #: runs it keeps its capacity until ``body.when_ended`` fires
    abandoned: Body | None = None


class Body:
    """A body running in its own thread, so a timeout can stop waiting for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ended = False
        self._callbacks: list[Callable[[], None]] = []

    @property
    def ended(self) -> bool:
        return self._ended

    def when_ended(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the thread has returned: now if it has, else on that thread."""
        with self._lock:
            if not self._ended:
                self._callbacks.append(callback)
                return
        callback()

    def end(self) -> None:
        with self._lock:
            self._ended = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()
