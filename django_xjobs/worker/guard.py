"""The settle guard: how a worker calls the driver to settle its runs when the database fails.

A transient database error (typed, by SQLSTATE) is retried with backoff (issue 12 item 2). A
result can land for as long as no other worker has claimed the job: the write is fenced on the
lease token, so a late one lands or is refused, never overwrites. Inside the lease the pauses
double; past it the guard keeps trying often, to land before a re-claim once the database is
back, for up to half the stall timeout (the watchdog's bound on a settle). While it retries
completed results, ``retrying`` is set and the claim loop claims nothing: its claims would
overtake them and run those jobs again. A failed or stopped run's settle holds nothing back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from .. import log
from ..drivers.contract import Complete, Settle
from ..drivers.failures import is_transient
from .run import Run

#: the first and the longest pause between tries while a lease may still hold
_SETTLE_PAUSES = (0.1, 2.0)
#: the pause between tries once the lease has lapsed: short, to land first once the database
#: is back (the other workers' claim loops are backing off)
_SETTLE_PAST_LEASE = 0.5


class SettleGuard:
    """``guard(call, values, failed)``: ``call()``'s result, or ``failed`` once it gave up."""

    def __init__(
        self,
        *,
        runs: dict[Any, Run],
        lock: threading.Lock,
        visibility_timeout: float,
        stall_timeout: float,
        worker_id: str,
    ) -> None:
        self.runs, self.lock = runs, lock
        self.visibility_timeout, self.stall_timeout = visibility_timeout, stall_timeout
        self.worker_id = worker_id
        self.retrying = threading.Event()

    def __call__(
        self,
        call: Any,
        values: Sequence[Settle],
        failed: Any,
        names: dict[Any, str] | None = None,
        failures: dict[Any, Exception] | None = None,
        until: float | None = None,
    ) -> Any:
        pause, longest = _SETTLE_PAUSES
        until = self.window_end() if until is None else until
        try:
            while True:
                try:
                    landed = call()
                except Exception as error:
                    if is_transient(error) and time.monotonic() < until and not self.gone(values):
                        if any(isinstance(v, Complete) for v in values):
                            self.retrying.set()  # results in hand: hold the claims back
                        room = self.lease_room(values)
                        time.sleep(min(pause, room) if room > 0 else min(pause, _SETTLE_PAST_LEASE))
                        pause = min(pause * 2, longest)
                        continue
                    self._give_up(values, error, names, failures)
                    return failed
                self.mark_settled(values, landed)
                return landed
        finally:
            self.retrying.clear()

    def window_end(self) -> float:
        """When a settle started now stops retrying: within half the watchdog's bound."""
        return time.monotonic() + max(self.stall_timeout / 2, self.visibility_timeout)

    def _give_up(
        self,
        values: Sequence[Settle],
        error: Exception,
        names: dict[Any, str] | None,
        failures: dict[Any, Exception] | None,
    ) -> None:
        for value in values:
            log.event(
                logging.ERROR,
                "xjobs.worker.settle_failed",
                worker=self.worker_id,
                job=(names or {}).get(value.job_id),
                id=value.job_id,
                error=error,
            )
            if failures is not None:
                failures[value.lease_token] = error

    def _runs_of(self, tokens: Sequence[object]) -> list[Run | None]:
        with self.lock:
            return [self.runs.get(token) for token in tokens]

    def lease_room(self, values: Sequence[Settle]) -> float:
        """Seconds until the last of these runs' leases lapses on this worker's clock (0: gone)."""
        now = time.monotonic()
        rooms = [
            self.visibility_timeout - (now - run.renewed_at)
            for run in self._runs_of([v.lease_token for v in values])
            if run is not None and not run.lost and not run.cancelled
        ]
        return max(rooms, default=0.0)

    def gone(self, values: Sequence[Settle]) -> bool:
        """True when the database already said every one of these runs no longer holds its job
        (another holder, a cancel): no retry could land."""
        runs = self._runs_of([v.lease_token for v in values])
        return all(run is None or run.cancelled or run.lost_reason == "not-ours" for run in runs)

    def mark_settled(self, values: Sequence[Settle], landed: object) -> None:
        """Each run is settled the moment its write lands, not when the whole batch has: a
        renewal in between would find the job gone and report a false loss (issue 12 item 8)."""
        if isinstance(landed, set):  # a complete: the ids of the jobs it found held
            held = [v.lease_token for v in values if v.job_id in landed]
        else:
            held = [values[0].lease_token] if landed else []
        for run in self._runs_of(held):
            if run is not None:
                run.settled.set()
