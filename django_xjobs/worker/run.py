"""One run in flight on a worker: its job, its signal, and whether its lease still holds."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from .. import log
from ..context import Signal
from ..drivers.base import ClaimedJob
from ..errors import JobCancelledError, JobInterrupt


@dataclass
class Run:
    job: ClaimedJob
    worker_id: str
    signal: Signal = field(default_factory=Signal)
    settled: threading.Event = field(default_factory=threading.Event)
    lost: bool = False
    cancelled: bool = False

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

    def cancel(self, reason: str | None) -> None:
        """An operator cancelled the job: stop the run, as news, not as an incident
        (DESIGN Q-08: never reported as a lost lease)."""
        if self.lost or self.cancelled:
            return
        self.cancelled = True
        log.event(
            logging.INFO,
            "xjobs.job.cancelled",
            worker=self.worker_id,
            job=self.job.name,
            id=self.job.id,
            reason=reason,
        )
        self.signal.abort(
            JobCancelledError(f"job {self.job.id} was cancelled: {reason or 'no reason given'}")
        )
