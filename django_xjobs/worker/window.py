"""The claim window: how many runs a worker holds while its jobs' connections are refused.

The claim loop's own connection can outlive a full server: it claims, and the job threads, which
connect per run, are refused (too many clients) and hand each run back (outage.py). Claiming
more would only hand more back. So, as TCP does with its congestion window, a run handed back
for a connection failure halves what the worker may hold (at least one); each run that ends any
other way widens it by one over the window's size, until it covers the worker's whole capacity
again and stops limiting. Refused at one, the next single claim waits a pause that doubles after
each refusal in a row: the worker claims only what can get a connection (issue 25 item 2).

For a minute after the last refusal the worker stays wary: each run takes its connection before
its body starts, and waits for one instead of failing at its first query and going back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.db import connections

from .. import log
from ..drivers import failures

if TYPE_CHECKING:
    from .inflight import InFlight
    from .run import Run

#: seconds after the last refusal during which runs take their connection before their body
WARY_FOR = 60.0


class ClaimWindow:
    """Shared by the settler (which reports how runs ended), the claim loop (which asks for
    room) and the job threads (which wait for a connection while it is wary); thread-safe."""

    def __init__(
        self,
        capacity: int,
        *,
        base: float,
        cap: float,
        worker_id: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        #: the runs a worker can hold at most (its threads and what it queues ahead)
        self.capacity = capacity
        self.base, self.cap = base, max(cap, base)
        self.worker_id = worker_id
        #: None: no limit; else the runs this worker may hold
        self.limit: float | None = None
        self._refusals = 0  # hand-backs in a row at a window of one
        self._retry_at = 0.0
        self._refused_at = float("-inf")
        self._clock = clock
        self._lock = threading.Lock()

    def room(self, held: int) -> int | None:
        """How many more runs the claim loop may take now; None when nothing limits it."""
        with self._lock:
            if self.limit is None:
                return None
            if self._clock() < self._retry_at:
                return 0
            return max(0, int(self.limit) - held)

    @property
    def wary(self) -> bool:
        """True while a refusal is recent (or the window still narrowed)."""
        return self.limit is not None or self._clock() - self._refused_at < WARY_FOR

    def refused(self, held: int) -> None:
        """A run's connection was refused (it went back, or waits for one); ``held`` runs
        remain."""
        with self._lock:
            self._refused_at = self._clock()
            was = self.limit
            if was is not None and was <= 1:
                self._refusals += 1
                pause = min(self.cap, self.base * 2 ** (self._refusals - 1))
                self._retry_at = self._clock() + pause
            self.limit = max(1.0, min(was if was is not None else held + 1, held + 1) / 2)
            limit = self.limit
        if was is None:
            log.event(
                logging.WARNING,
                "xjobs.worker.claims_limited",
                worker=self.worker_id,
                limit=int(limit),
                hint="job connections are refused (too many clients?): claiming only what can "
                "get one; max_connections or a pooler bounds the fleet",
            )

    def reopen(self) -> None:
        """The worker's own claims failed and answer again: the refusals were an outage's (the
        server was away for every connection), not a full server's, so the window opens at once
        instead of growing back run by run (SPEC LEASE-20: the runs the outage cut short start
        again together)."""
        with self._lock:
            if self.limit is None:
                return
            self.limit, self._refusals, self._retry_at = None, 0, 0.0
        log.event(logging.INFO, "xjobs.worker.claims_unlimited", worker=self.worker_id)

    def ran(self) -> None:
        """A run ended without a connection failure: widen the window by one over its size."""
        if self.limit is None:
            return  # the hot path: nothing limits the claims (read without the lock)
        with self._lock:
            if self.limit is None:
                return
            self._refusals = 0
            self._retry_at = 0.0
            self.limit += 1 / self.limit
            if self.limit < self.capacity:
                return
            self.limit = None
        log.event(logging.INFO, "xjobs.worker.claims_unlimited", worker=self.worker_id)

    def connect_first(
        self, run: Run, database: str | None, draining: threading.Event, runs: InFlight
    ) -> None:
        """While job connections are refused (the claim window is narrowed), a run takes its
        connection to the jobs database before its body starts, and waits for one, its lease
        renewed meanwhile, rather than start, fail at its first query and be handed back (issue
        25 item 2). A body with a timeout runs on its own thread: for it the connection is a
        probe, closed at once. It stops waiting when its signal is set (it goes back unstarted)
        or on a drain (the body meets the refusal as usual). With no refusal in the last minute
        nothing changes: a job that never queries opens no connection."""
        if database is None or not self.wary:
            return
        pause, narrowed = 0.05, False
        handle = run.handle
        while not run.signal.is_set() and not draining.is_set():
            try:
                connections[database].ensure_connection()
                if handle is not None and handle.timeout is not None:
                    # its body runs on a thread of its own, which opens its own connection:
                    # this one was the probe, and its slot is the body's to take
                    connections[database].close()
                return
            except Exception as error:
                if not failures.connection_failed(error):
                    return  # not a refusal: the body meets it, and fails as it would
                if not narrowed:  # once per run: a wait is one refusal, not one per try
                    narrowed = True
                    self.refused(len(runs))
            run.signal.wait(pause)
            pause = min(pause * 2, 1.0)
