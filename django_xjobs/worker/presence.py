"""The worker's presence row: who it is, renewed once per heartbeat, removed on a clean stop.

The claim reads it to tell a death from an outage: a lapsed run whose holder renewed its
presence after the lease ran out is no death, one whose holder marked it stopped exited, and any
other died with its worker and runs next alone (``x_workers``, on the database clock; SPEC
LEASE-16). One statement per beat for the whole worker, never one per job.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import log
from ..drivers.contract import Presence
from .depth import DepthSampler

if TYPE_CHECKING:
    from ..drivers.contract import JobDriver


class WorkerPresence:
    def __init__(
        self,
        driver: JobDriver,
        *,
        worker_id: str,
        queues: tuple[str, ...],
        ttl: float,
        in_flight: Callable[[], int],
        answered: Callable[[], None] | None = None,
        settle_first: Callable[[], bool] | None = None,
    ) -> None:
        self.driver, self.worker_id, self.queues = driver, worker_id, queues
        #: the store each beat writes the worker's row to, bound once
        self._run_store = driver.runs()
        self.ttl, self.in_flight = ttl, in_flight
        #: called when a renewal lands after failing: the database answers again
        self.answered = answered
        #: after a failure, sends what the worker owes from the outage before the row is renewed
        #: (True once nothing is owed): a holder seen after its lease ran out is "present", and
        #: its lapsed runs may be taken at once, so its own results must land first (LEASE-20)
        self.settle_first = settle_first
        self.host, self.pid = socket.gethostname(), os.getpid()
        #: one renewal in flight at a time, however long it takes (as for a lease)
        self.renewing = False
        self._failing = False
        self._idle = threading.Event()
        self._idle.set()
        self._released = False
        #: the overview's depth over time rides on this beat, once the database answered it
        self.depth = DepthSampler(driver, worker_id=worker_id)

    def renew(self) -> None:
        """Say this worker is alive; a failure is logged once per outage, never raised."""
        self._idle.clear()
        try:
            if self._released:
                return  # a renewal queued before the stop must not bring the row back
            if self._failing and self.settle_first is not None and not self.settle_first():
                return  # the database still refuses what is owed: say nothing yet
            presence = Presence(self.worker_id, self.host, self.pid, self.queues, self.in_flight())
            self._run_store.renew_presence(presence, self.ttl)
        except Exception as error:
            if not self._failing:
                log.event(
                    logging.WARNING,
                    "xjobs.worker.presence_failed",
                    worker=self.worker_id,
                    error=error,
                )
            self._failing = True
        else:
            if self._failing and self.answered is not None:
                self.answered()
            self._failing = False
            self.depth.maybe_sample()
        finally:
            self.renewing = False
            self._idle.set()

    def stop(self, wait: float = 2.0) -> None:
        """The process exits with runs in flight (past --shutdown-timeout): the row stays,
        marked stopped, after any renewal in flight; a failure leaves it to lapse."""
        self._released = True
        self._idle.wait(wait)
        try:
            self._run_store.stop_presence(self.worker_id)
        except Exception as error:
            log.event(
                logging.WARNING, "xjobs.worker.presence_failed", worker=self.worker_id, error=error
            )

    def release(self, wait: float = 5.0) -> None:
        """A clean stop: the row goes, after any renewal still in flight (bounded by ``wait``);
        a failure leaves it to lapse."""
        self._released = True
        self._idle.wait(wait)
        deadline = time.monotonic() + wait
        while True:
            try:
                self._run_store.release_presence(self.worker_id)
                return
            except Exception as error:  # a connection the last outage broke: try a fresh one
                if time.monotonic() >= deadline:
                    log.event(
                        logging.WARNING,
                        "xjobs.worker.presence_failed",
                        worker=self.worker_id,
                        error=error,
                    )
                    return
                time.sleep(0.2)
