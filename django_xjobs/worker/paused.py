"""The queues an operator paused (``pause_queue``), and the jobs and limit keys
(``pause_jobs``), as this worker last read them.

Kept in memory: a paused queue is left out of the queues a claim names, and the paused jobs and
keys are handed to the claim, which steps over their runs (SPEC PAUSE-04/05), so a fleet with
nothing paused runs the very claim it ran before: no extra SQL per claim. The set is read again when the listener
says an operator changed it (NOTIFY on ``xjobs_control``) and, as the safety net when no
notification can come (a transaction pooler, a dropped connection), once a poll interval.

Only an operator writes the pause: nothing here ever does. A worker that stops, crashes or
drains leaves every queue as it found it.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable

from .. import log
from ..drivers.contract import JobDriver
from ..limits.keys import shown


class PausedQueues:
    """One worker's copy of the paused set (its claim loop and its ``tick()`` share it)."""

    def __init__(
        self,
        driver: JobDriver,
        queues: tuple[str, ...],
        *,
        interval: float,
        worker_id: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._driver, self._watched = driver, frozenset(queues)
        self._interval, self._worker_id, self._clock = interval, worker_id, clock
        self._told = threading.Event()
        self._read_at = float("-inf")
        #: the paused queues among this worker's, as last read: none until read
        self.now: frozenset[str] = frozenset()
        #: the paused jobs and keys (``JobPause.target``), as last read: none until read
        self.jobs: frozenset[str] = frozenset()
        _LIVE.add(self)

    def changed(self) -> None:
        """The listener's control callback: read the set again before the next claim."""
        self._told.set()

    def refresh(self) -> frozenset[str]:
        """The paused set, read again when told or a poll interval after the last read.

        A failed read keeps the last set: the claim that follows fails the same way and backs
        off, and an outage never pauses a queue that was running.
        """
        if not self._told.is_set() and self._clock() - self._read_at < self._interval:
            return self.now
        self._told.clear()
        try:
            paused = self._driver.limits().paused_queues() & self._watched
            jobs = frozenset(p.target for p in self._driver.limits().job_pauses())
        except Exception:
            self._told.set()  # read again on the next pass
            return self.now
        self._read_at = self._clock()
        if jobs != self.jobs:
            log.event(
                logging.INFO,
                "xjobs.worker.paused_jobs",
                worker=self._worker_id,
                paused=",".join(sorted(shown(t) for t in jobs)) or "-",
            )
        self.jobs = jobs
        if paused != self.now:
            log.event(
                logging.INFO,
                "xjobs.worker.paused_queues",
                worker=self._worker_id,
                paused=",".join(sorted(paused)) or "-",
            )
        self.now = paused
        return paused


#: every worker's paused set in this process, told by ``changed_here``
_LIVE: weakref.WeakSet[PausedQueues] = weakref.WeakSet()


def changed_here() -> None:
    """An operator paused or resumed a queue, a job or a key in this process: every worker of
    the process reads the set again before its next claim, as the NOTIFY on ``xjobs_control``
    tells a listening one. A ``tick()`` has no listener: this is how a test that pauses between
    two ticks of one worker sees the pause at the second (SPEC PAUSE-11)."""
    for paused in list(_LIVE):
        paused.changed()
