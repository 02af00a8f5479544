"""``Worker.tick()``: one claim-admit-run-settle pass of the real worker in the calling thread,
for tests (SPEC WORK-06). It drives the worker's own parts (admission, the body, the settler)
and starts none of its threads; ``testing.run_until_idle()`` drives the same parts."""

from __future__ import annotations

import contextlib
import queue as queue_module
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..declarations import registry
from ..drivers.connections import role_connections
from ..drivers.contract import ClaimedJob, JobDriver, Shed
from ..errors import InvariantError
from ..outbox.relay import publish_visible
from ..run.execution import Execution, Outcome
from .admission import Admission
from .inflight import InFlight
from .paused import PausedQueues
from .run import Run
from .settling import Ended, Settler


@dataclass(frozen=True)
class Tick:
    """What one ``Worker.tick()`` pass did: the runs it settled, the jobs it handed back."""

    #: each admitted run's execution, in claim order; a run whose settle did not land (its
    #: lease lapsed, another holder) reads ``lease_lost``, as in ``run_until_idle()``
    executions: list[Execution]
    #: claimed jobs shed by a full limit or fleet slot (SPEC WORK-07/08): ready again, no
    #: attempt spent
    shed: list[Shed]


class Ticker:
    """One pass of a worker in the calling thread: claim, admit, run, settle, through the
    worker's own ``Admission`` and ``Settler`` and the runs they share. ``Worker.tick()``
    and ``testing.run_until_idle()`` drive it; it starts no thread."""

    def __init__(
        self,
        runs: InFlight,
        driver: JobDriver,
        admission: Admission,
        settler: Settler,
        *,
        body: Callable[[Run], Execution],
        paused: PausedQueues,
        worker_id: str,
        visibility_timeout: float,
        stall_timeout: float,
    ) -> None:
        self.runs = runs
        #: the worker's paused set, which its claim loop reads too (SPEC PAUSE-11)
        self.paused = paused
        self.driver = driver
        #: the store each claim is made in, bound once
        self._run_store = driver.runs()
        self.admission = admission
        self.settler = settler
        #: runs one admitted run's body here, on the caller's connection; never raises
        self.body = body
        self.worker_id = worker_id
        self.visibility_timeout = visibility_timeout
        self.stall_timeout = stall_timeout

    def tick(self, limit: int, *, bounded: bool = True, wait: bool = True) -> Tick:
        """Claim up to ``limit`` due jobs, admit, run and settle them (``Worker.tick()``).

        ``bounded``: under the role's statement and lock timeouts, as the worker's threads.
        ``wait``: a body left running past its timeout is waited for before this returns;
        without it, what it holds is handed back by the first pass after it returns."""
        session = role_connections if bounded else contextlib.nullcontext
        self._collect_ended()
        # a test's transaction never commits: publish what it staged, as run_until_idle does
        publish_visible(self.driver, f"tick:{self.worker_id}")
        runs = self.runs
        with session():
            sent = time.monotonic()  # SPEC LEASE-15: the lease's window opened after this
            claimed = self._claim_each(limit)
            admitted, shed = self.admission.admit_all(claimed, sent)
        executions = []
        try:
            for run in admitted:
                executions.append(self.body(run))  # the test's connection
                runs.returned(run)
            with session():
                settled = self.settler.settle_batch(executions)
                if wait:
                    self._await_abandoned()
        finally:
            self._forget(admitted)
        return Tick(
            [
                e
                if e.job.lease_token in settled or e.outcome is Outcome.CANCELLED
                else replace(e, outcome=Outcome.LEASE_LOST)
                for e in executions
            ],
            shed,
        )

    def _claim_each(self, limit: int) -> list[ClaimedJob]:
        """Up to ``limit`` due jobs; with per-queue pools, queue by queue, each at most its
        own threads (SPEC WORK-04). As the claim loop claims: the paused queues left out and
        the paused jobs and keys stepped over, the set read once a poll interval and when an
        operator changed it in this process (SPEC PAUSE-11)."""
        claimed: list[ClaimedJob] = []
        lanes = self.runs.lanes
        paused = self.paused.refresh()
        for lane in lanes:
            room = limit - len(claimed)
            if room <= 0:
                break
            queues = [q for q in lane.queues if q not in paused] if paused else lane.queues
            if not queues:
                continue
            claimed += self._run_store.claim(
                queues=queues,
                limit=room if len(lanes) == 1 else min(room, lane.size),
                visibility_timeout=self.visibility_timeout,
                worker_id=self.worker_id,
                versions=registry.declared_versions(),  # SPEC VER-05
                paused=self.paused.jobs,  # SPEC PAUSE-04/05
            )
        return claimed

    def _forget(self, admitted: Sequence[Run]) -> None:
        """A tick that raised midway still holds nothing: hand back what its runs took (their
        rows come back when their leases lapse); a run already settled is skipped."""
        for run in admitted:
            if self.runs.forget(run):
                run.settled.set()
                self.settler.release(run)

    def _collect_ended(self) -> None:
        """Hand back what the abandoned bodies that returned since the last pass held."""
        while self.runs.abandoned:
            try:
                item = self.settler.queue.get_nowait()
            except queue_module.Empty:
                return
            if isinstance(item, Ended):
                self.settler.body_ended(item.run)

    def _await_abandoned(self) -> None:
        """A tick's body left running past its timeout holds its slot until it returns: wait
        for it there, so nothing a tick took outlives it."""
        until = time.monotonic() + self.stall_timeout
        while self.runs.abandoned:
            room = until - time.monotonic()
            item = None
            with contextlib.suppress(queue_module.Empty):
                item = self.settler.queue.get(timeout=max(room, 0.0))
            if isinstance(item, Ended):
                self.settler.body_ended(item.run)
            elif room <= 0:
                raise InvariantError(
                    f"{len(self.runs.abandoned)} body(ies) still run {self.stall_timeout:g}s "
                    "after their timeout; their slots stay held until they return",
                    hint="make the job's body honour ctx.signal",
                )
