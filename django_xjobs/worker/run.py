"""One run in flight on a worker: its job, its signal, and the state of its lease."""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import log, metrics
from ..drivers.contract import ClaimedJob
from ..errors import JobCancelledError, LeaseLostError, SlotLostError
from ..run import signals
from ..run.stop import StopSignal

if TYPE_CHECKING:
    from ..run.handle import Runnable

#: SPEC LEASE-15: the share of the visibility timeout kept back from the local deadline, for
#: the renewal's trip and the handler's stop
DEADLINE_MARGIN = 0.1


class Latch:
    """Set once, read often, never waited on: a flag without an Event's condition variable."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


@dataclass
class Run:
    job: ClaimedJob
    worker_id: str
    visibility_timeout: float = 30.0
    signal: StopSignal = field(default_factory=StopSignal)
    #: the stopped() latch (SPEC LEASE-12): set when the run settled; a loss after it is no loss
    settled: Latch = field(default_factory=Latch)
    #: worker's own clock (monotonic seconds) when the last renewal that landed was SENT (the
    #: claim, at first): the database's window opened after it, never before (SPEC LEASE-04)
    renewed_at: float = field(default_factory=time.monotonic)
    #: worker's own clock when the body returned; the heartbeat renews a finished run only
    #: while its settle is within the settle deadline (SPEC HANG-03)
    returned_at: float | None = None
    overdue: bool = False
    renewing: bool = False
    #: the body returned and its result waits for the settler: a renewal that finds the job gone
    #: may have raced its completion, so only the settler may call it lost (issue 12 item 8)
    settling: bool = False
    lost: bool = False
    #: why: "expired"/"deadline" (this worker's clock said so) or "not-ours" (the database did)
    lost_reason: str | None = None
    cancelled: bool = False
    #: a renewal failed because the database did not answer: a loss at the local deadline is
    #: then the outage's, and the run goes back with its attempt given back (SPEC LEASE-20)
    unanswered: bool = False
    #: the slot renewal said "not yours": it is not renewed again (SPEC SLOT-04)
    slot_lost: bool = False
    #: the fleet concurrency slot this run holds, and what releases the per-process limit
    slot: tuple[str, int, str] | None = None
    limit_lease: Any = None
    #: what the job's name resolved to at admission (None: nothing by that name here); its
    #: body, its settle and its signals read this, never the registry again
    handle: Runnable | None = None
    #: the clock ``renewed_at`` is read on (tests pass a controllable one)
    monotonic: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        # the run's signal reads the local deadline itself, not only when the timer fires. It
        # holds the run weakly: a run and its signal holding each other would be a cycle per
        # job, which only the garbage collector frees, and its passes cost the claim loop more
        # than the job. A run is held (worker, lane, settler) until it has settled, and its
        # signal is set by then (execute's ``finally``): a signal that outlives it never asks.
        run = weakref.ref(self)
        margin = self.visibility_timeout * DEADLINE_MARGIN
        self.signal.bind_deadline(
            lambda: _deadline_of(run(), margin),
            lambda: _lose_deadline(run()),
            self.monotonic,
        )

    def deadline(self, margin: float) -> float:
        """SPEC LEASE-15: the local deadline, the last renewal sent + the timeout - ``margin``;
        past it the database may already let another worker claim the job."""
        return self.renewed_at + self.visibility_timeout - margin

    def lose(self, reason: str, error: BaseException | None = None) -> None:
        """Report the loss once — error log, counter, then the signal (SPEC LEASE-11)."""
        if self.lost or self.cancelled or self.settled.is_set():
            return
        self.lost = True
        self.lost_reason = reason
        log.event(
            logging.ERROR,
            "xjobs.lease.lost",
            worker=self.worker_id,
            job=self.job.name,
            id=self.job.id,
            queue=self.job.queue,
            attempt=self.job.attempt,
            visibility_timeout=f"{self.visibility_timeout:g}s",
            reason=reason,
            error=error,
        )
        metrics.inc("xjobs_job_leases_lost_total", queue=self.job.queue)
        signals.lease_lost(self.job, self.worker_id, reason, handle=self.handle)
        self.signal.abort(
            LeaseLostError(
                f"job {self.job.id} is no longer held by this worker ({reason})",
                hint="its lease lapsed or another worker claimed it; nothing this run writes "
                "will land",
            )
        )

    def cancel(self, reason: str | None) -> None:
        """An operator cancelled the job: stop the run, as news, not as an incident
        (DESIGN Q-08: never reported as a lost lease)."""
        if self.lost or self.cancelled or self.settled.is_set():
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

    def lose_slot(self) -> None:
        """SPEC SLOT-04, SE-10: the slot renewal said "not yours": two runs could now share a
        cap, so this one stops."""
        if self.settled.is_set() or self.slot is None or self.signal.is_set():
            return
        self.slot_lost = True
        key, slot, _ = self.slot
        log.event(
            logging.ERROR,
            "xjobs.worker.slot_lost",
            worker=self.worker_id,
            id=self.job.id,
            lease_key=key,
            slot=slot,
        )
        self.signal.abort(
            SlotLostError(f"job {self.job.id} lost its concurrency slot {key}#{slot}")
        )


def _deadline_of(run: Run | None, margin: float) -> float:
    return float("inf") if run is None else run.deadline(margin)


def _lose_deadline(run: Run | None) -> None:
    if run is not None:
        run.lose("deadline")
