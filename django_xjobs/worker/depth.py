"""Queue depth over time for the overview (``x_queue_depth``): sampled by the workers' presence
beat, work every worker already does a few times a minute, off the claim and settle path.

Each worker offers a sample every ``EVERY`` seconds; the store writes one per minute for the
whole fleet and leaves a minute already sampled alone without counting (depth.sql), so a fleet
of N workers counts its live rows about once a minute, not N times. Offering twice a minute
keeps a minute from going unsampled when one worker's beats drift past a minute boundary.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import log

if TYPE_CHECKING:
    from ..drivers.contract import JobDriver

#: seconds between one worker's offers: under a minute, so every minute gets one
EVERY = 30.0


class DepthSampler:
    def __init__(
        self,
        driver: JobDriver,
        *,
        worker_id: str,
        every: float = EVERY,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.driver, self.worker_id = driver, worker_id
        self.every, self.monotonic = every, monotonic
        self._last = float("-inf")

    def maybe_sample(self) -> bool:
        """Offer this minute's sample when one is due; a failure is logged (throttled), never
        raised: depth history is for reading, and a worker goes on without it. True when the
        store was asked."""
        now = self.monotonic()
        if now - self._last < self.every:
            return False
        self._last = now
        try:
            self.driver.history().sample_depth()
        except Exception as error:
            log.throttled(
                logging.WARNING,
                "xjobs.worker.depth_sample_failed",
                kind=type(error).__name__,
                worker=self.worker_id,
                error=error,
            )
        return True
