"""A worker's drain (SPEC WORK-12): no new claims; the runs queued for a thread go back
unstarted, ready at once in their place with no attempt spent; the running ones finish and
settle; then the worker's threads end, the settler's last."""

from __future__ import annotations

import contextlib
import logging
import queue as queue_module
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from .. import log
from ..drivers.connections import role_connections
from ..drivers.contract import Notifier, Shed
from ..run.execution import Execution, Outcome
from .admission import Admission
from .heartbeat import Heartbeat
from .inflight import InFlight
from .pools import Urgent
from .presence import WorkerPresence
from .run import Run
from .settling import Settler
from .watchdog import Watchdog


@dataclass(frozen=True)
class Running:
    """What one ``Worker.run()`` started besides its job threads, for its drain to stop."""

    settler: threading.Thread
    heartbeat: Heartbeat
    presence: WorkerPresence
    #: the listener; None in burst mode, which ends when idle and has nothing to be woken for
    notifier: Notifier | None


def unstarted(run: Run) -> Execution:
    """A queued run that lost its lease (or was cancelled) before a thread took it: it goes
    back unrun, fenced on its token, so a new holder's row is never touched."""
    job = run.job
    shed = Shed(job.id, job.lease_token, delay=0.0, reason="never started", keep_place=True)
    outcome = Outcome.CANCELLED if run.cancelled else Outcome.LEASE_LOST
    return Execution(outcome, job, 0.0, shed)


class Drain:
    """Hands queued runs back unstarted (on a drain, or a queue paused while they waited), and
    stops what a run of the worker started, in order."""

    def __init__(
        self, runs: InFlight, admission: Admission, settler: Settler, *, worker_id: str
    ) -> None:
        self.runs = runs
        self.admission = admission
        self.settler = settler
        self.worker_id = worker_id
        self._lanes = runs.lanes

    def hand_back(self, runs: Sequence[Run], reason: str = "draining") -> None:
        """Give queued runs back unstarted: ready at once in their place, no attempt spent."""
        if not runs:
            return
        for run in runs:
            run.settled.set()  # SPEC LEASE-12: a renewal racing the shed reports no loss
            self.runs.handed_back(run)
            self.settler.release(run)
            job = run.job
            self.admission.shed(
                job, Shed(job.id, job.lease_token, delay=0.0, reason=reason, keep_place=True)
            )

    def stop(
        self,
        running: Running,
        threads: Sequence[threading.Thread],
        watchdog: Watchdog | None,
    ) -> None:
        """Once the claim loop has ended: the queued runs go back, the job threads finish what
        they run, the settler settles it, and the heartbeat and the watchdog stop."""
        if running.notifier is not None:
            running.notifier.stop()
        unstarted = self._queued()
        with role_connections():
            self.hand_back(unstarted)  # queued, never started: back at once, no attempt spent
        for lane in self._lanes:
            lane.ready.put(None)
        for thread in list(threads):
            thread.join()  # running handlers finish (SPEC WORK-12)
        self.settler.queue.put(None)
        running.settler.join()
        running.heartbeat.stop()
        if watchdog is not None:
            watchdog.stop()
        for run in self.runs.abandoned_runs():  # they end with the process; their slots by TTL
            log.event(
                logging.WARNING,
                "xjobs.worker.body_left_running",
                worker=self.worker_id,
                job=run.job.name,
                id=run.job.id,
            )

    def _queued(self) -> list[Run]:
        """Take every run still queued for a thread, in each pool."""
        unstarted = []
        for lane in self._lanes:
            with contextlib.suppress(queue_module.Empty):
                while True:
                    queued = lane.ready.get_nowait()
                    if queued is not None and not isinstance(queued, Urgent):
                        unstarted.append(queued)
            while (run := lane.take_urgent()) is not None:
                unstarted.append(run)
        return unstarted
