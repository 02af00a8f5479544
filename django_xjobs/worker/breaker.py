"""The claim loop's circuit breaker: back off exponentially while the database fails.

``closed``: claim at full speed. A failure opens it: the next try waits ``base``, then twice
that after each failure in a row, never more than ``cap``. Once the wait is over it is
``half-open``: one trial claim; a success closes it (and says how long the outage lasted), a
failure opens it again with the next, longer wait.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .. import log
from ..drivers import failures

State = Literal["closed", "open", "half-open"]


@dataclass(frozen=True)
class Opened:
    """A failure: the loop waits ``delay`` seconds before its next try."""

    failures: int
    delay: float


@dataclass(frozen=True)
class Closed:
    """The first success after ``failures`` failures in a row over ``outage`` seconds."""

    failures: int
    outage: float


class Breaker:
    """One per claim loop (not thread-safe: only that loop's thread calls it)."""

    def __init__(
        self,
        *,
        base: float,
        cap: float,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.base = base
        self.cap = max(cap, base)
        self.state: State = "closed"
        self.failures = 0
        self._clock = clock
        self._jitter = jitter
        self._first_failure = 0.0
        self._retry_at = 0.0

    def wait(self) -> float:
        """Seconds to wait before the next try: 0 when closed or when an open wait is over
        (which makes the next try the half-open trial)."""
        if self.state != "open":
            return 0.0
        remaining = self._retry_at - self._clock()
        if remaining > 0:
            return remaining
        self.state = "half-open"
        return 0.0

    def retry_now(self) -> None:
        """The database answered another of this worker's statements: the next try is the
        half-open trial, now, instead of at the end of the backoff."""
        if self.state == "open":
            self._retry_at = self._clock()

    def failure(self) -> Opened:
        now = self._clock()
        if self.failures == 0:
            self._first_failure = now
        self.failures += 1
        delay = min(self.cap, self.base * 2 ** (self.failures - 1))
        # up to a fifth off, so a fleet that failed together does not retry in step
        delay *= 1 - 0.2 * self._jitter()
        self.state = "open"
        self._retry_at = now + delay
        return Opened(self.failures, delay)

    def success(self) -> Closed | None:
        """Close; the outage it ends, if there was one."""
        if self.failures == 0:
            return None
        closed = Closed(self.failures, self._clock() - self._first_failure)
        self.state = "closed"
        self.failures = 0
        return closed


def report_failure(worker_id: str, opened: Opened, error: Exception) -> None:
    """Log a failed claim, at most once per window for the same kind of error."""
    log.throttled(
        logging.ERROR,
        "xjobs.worker.claim_failed",
        kind=failures.sqlstate(error) or type(error).__name__,
        worker=worker_id,
        failures=opened.failures,
        retry_in=f"{opened.delay:.2f}s",
        error=error,
    )


def report_resumed(worker_id: str, closed: Closed | None) -> None:
    """Log the end of an outage, once, when the first claim after it succeeded."""
    if closed is not None:
        log.event(
            logging.WARNING,
            "xjobs.worker.claim_resumed",
            worker=worker_id,
            failures=closed.failures,
            outage=f"{closed.outage:.1f}s",
        )
