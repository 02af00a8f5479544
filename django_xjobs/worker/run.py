"""One run in flight on a worker: its job, its signal, and whether its lease still holds."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from .. import log
from ..context import Signal
from ..drivers.base import ClaimedJob
from ..errors import JobInterrupt


@dataclass
class Run:
    job: ClaimedJob
    worker_id: str
    signal: Signal = field(default_factory=Signal)
    settled: threading.Event = field(default_factory=threading.Event)
    lost: bool = False

    def lose(self, reason: JobInterrupt) -> None:
        """Report the loss once, then abort the run (SPEC LEASE-11)."""
        if self.lost:
            return
        self.lost = True
        log.event(
            logging.ERROR,
            "xjobs.lease.lost",
            worker=self.worker_id,
            job=self.job.name,
            id=self.job.id,
            queue=self.job.queue,
            attempt=self.job.attempt,
            reason=reason.code,
        )
        self.signal.abort(reason)
