"""Which claims a worker makes within limits, and with what (drivers/claim_limits.py).

A pool whose queues hold no job that declares a limit, and carry no operator's cap, claims as it
always did: the same statement, nothing added (the limits cost nothing where none is declared).
A pool with some makes the limited claim, which decides every limit while it takes the rows, so
no run over its limit is claimed and handed back.

The caps an operator sets (``set_queue_limit``) are read when the listener says they changed
(NOTIFY on ``xjobs_control``, as a pause) and once a poll interval, never per claim.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from .. import conf
from ..declarations import registry
from ..drivers.claim_limits import ClaimLimits, JobLimit
from ..drivers.contract import JobDriver


def declared_limits() -> tuple[tuple[JobLimit, ...], dict[str, bool]]:
    """The registered jobs' limits, and for each declared queue whether every job routed to
    it carries a key (True) or some carries none (False)."""
    jobs: list[JobLimit] = []
    keyed: dict[str, bool] = {}
    for handle in registry.registered_jobs():
        limits = getattr(handle, "limits", None)
        queue = getattr(handle, "queue", "default")
        keyed[queue] = keyed.get(queue, True) and limits is not None
        if limits is None:
            continue
        rate = limits.rate
        jobs.append(
            JobLimit(
                name=handle.name,
                concurrency=limits.concurrency,
                rate=None if rate is None else rate.limit,
                window=None if rate is None else rate.window,
            )
        )
    return tuple(jobs), keyed


class LimitPlan:
    def __init__(
        self,
        driver: JobDriver,
        queues: Sequence[str],
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._driver, self._watched = driver, frozenset(queues)
        self._interval, self._clock = interval, clock
        self._told = threading.Event()
        self._read_at = float("-inf")
        self.jobs, self._keyed = declared_limits()
        #: the queues some limited job is declared on
        self._limited = frozenset(
            h.queue for h in registry.registered_jobs() if getattr(h, "limits", None) is not None
        )
        #: the operator's caps on this worker's queues, as last read
        self.caps: dict[str, int] = {}

    def changed(self) -> None:
        self._told.set()

    def refresh(self) -> dict[str, int]:
        """The caps, read again when told or a poll interval after the last read; a failed read
        keeps the last ones (the claim that follows fails the same way and backs off)."""
        if not self._told.is_set() and self._clock() - self._read_at < self._interval:
            return self.caps
        self._told.clear()
        try:
            caps = {q: n for q, n in self._driver.queue_limits().items() if q in self._watched}
        except Exception:
            self._told.set()
            return self.caps
        self._read_at = self._clock()
        self.caps = caps
        return caps

    def for_queues(self, queues: Sequence[str], sweep: bool) -> ClaimLimits | None:
        """The limits a claim from ``queues`` is made within, or None for the plain claim.

        A queue holding a job with no limit is searched for runs with no key on every claim; a
        queue of keyed jobs only on the sweep, among its first waiting rows (a run enqueued
        before its job declared a key is found there, at most a poll interval late)."""
        fair = conf.get().fair_share is not None
        limited = self._limited.intersection(queues)
        if not fair and not limited and not any(q in self.caps for q in queues):
            return None
        # under fair share every run enqueued by this code has a key: none is looked for plainly
        plain = () if fair else tuple(q for q in queues if not self._keyed.get(q, False))
        stray = tuple(q for q in queues if sweep and q not in plain)
        return ClaimLimits(jobs=self.jobs, plain_queues=plain, stray_queues=stray, fair=fair)
