"""``Worker.tick()``: one claim-admit-run-settle pass of the real worker in the calling thread,
for tests (SPEC WORK-06). A mixin of ``Worker``, beside ``Settling``: it drives the worker's own
admit, body and settle code, and starts none of its threads."""

from __future__ import annotations

import contextlib
import queue as queue_module
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..drivers.connections import role_connections
from ..drivers.contract import Shed
from ..errors import InvariantError
from ..outbox.relay import publish_visible
from ..run.execute import Execution, Outcome
from .pools import Lane
from .run import Run
from .settling import Ended

if TYPE_CHECKING:
    from ..drivers.contract import ClaimedJob


@dataclass(frozen=True)
class Tick:
    """What one ``Worker.tick()`` pass did: the runs it settled, the jobs it handed back."""

    #: each admitted run's execution, in claim order; a run whose settle did not land (its
    #: lease lapsed, another holder) reads ``lease_lost``, as in ``run_until_idle()``
    executions: list[Execution]
    #: claimed jobs shed by a full limit or fleet slot (SPEC WORK-07/08): ready again, no
    #: attempt spent
    shed: list[Shed]


class Ticking:
    """``tick()`` for ``Worker``; the attributes below are the worker's."""

    if TYPE_CHECKING:
        driver: Any
        state: str
        worker_id: str
        queues: tuple[str, ...]
        concurrency: int
        visibility_timeout: float
        stall_timeout: float
        _awaiting_idle: bool
        _runs: dict[Any, Run]
        _runs_lock: Any
        _lanes: tuple[Lane, ...]
        _lane_of: dict[str, Lane]
        _abandoned: dict[Any, Run]
        _settle_queue: Any

        def check_enforceable(self) -> None: ...
        def _admit_all(
            self, claimed: Sequence[ClaimedJob], sent: float
        ) -> tuple[list[Run], list[Shed]]: ...
        def _body(self, run: Run, *, fresh_connection: bool) -> Execution: ...
        def _settle_batch(self, batch: list[Execution]) -> set[Any]: ...
        def _release(self, run: Run) -> None: ...
        def _body_ended(self, run: Run) -> None: ...

    def tick(self, limit: int | None = None) -> Tick:
        """One pass of this worker in the calling thread, for tests (SPEC WORK-06).

        Claims up to ``limit`` due jobs (default: ``concurrency``; with per-queue pools, queue
        by queue, each for at most its own threads), admits each through the
        same per-process limits, fleet concurrency slots and sheds as ``run()``, runs the
        admitted ones one by one here, and settles them through the settler's code before it
        returns. Nothing it took stays held: every limit and slot is released, and a body
        left running past its timeout is waited for (up to the stall timeout). Staged outbox
        rows this connection can see are published first, as ``run_until_idle()`` does::

            def test_one_pass(db):
                send_receipt.enqueue(order_id=7)
                done = Worker(queues=["default"]).tick()
                assert [e.outcome for e in done.executions] == ["completed"]

        No heartbeat, settler or listener thread starts, so leases are not renewed during a
        tick: keep the bodies a test ticks shorter than the visibility timeout.
        """
        if self.state in ("running", "draining"):
            raise InvariantError(
                f"worker {self.worker_id} is {self.state}: tick() would race its own claim loop",
                hint="tick() a worker that is not running, or let run() do the work",
            )
        self.check_enforceable()
        # a test's transaction never commits: publish what it staged, as run_until_idle does
        publish_visible(self.driver, f"tick:{self.worker_id}")
        if self._awaiting_idle and not self._runs:
            self._awaiting_idle = False
        with role_connections():
            sent = time.monotonic()  # SPEC LEASE-15: the lease's window opened after this
            claimed = self._claim_each(limit or self.concurrency)
            admitted, shed = self._admit_all(claimed, sent)
        executions = []
        try:
            for run in admitted:
                executions.append(self._body(run, fresh_connection=False))  # the test's connection
                with self._runs_lock:
                    self._lane_of[run.job.queue].held -= 1
            with role_connections():
                settled = self._settle_batch(executions)
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
        own threads (SPEC WORK-04)."""
        claimed: list[ClaimedJob] = []
        for lane in self._lanes:
            room = limit - len(claimed)
            if room <= 0:
                break
            claimed += self.driver.claim(
                queues=lane.queues,
                limit=room if len(self._lanes) == 1 else min(room, lane.size),
                visibility_timeout=self.visibility_timeout,
                worker_id=self.worker_id,
            )
        return claimed

    def _forget(self, runs: Sequence[Run]) -> None:
        """A tick that raised midway still holds nothing: hand back what its runs took (their
        rows come back when their leases lapse); a run already settled is skipped."""
        for run in runs:
            with self._runs_lock:
                held = self._runs.pop(run.job.lease_token, None)
                if held is not None and not run.settling:
                    self._lane_of[run.job.queue].held -= 1
            if held is not None:
                run.settled.set()
                self._release(run)

    def _await_abandoned(self) -> None:
        """A tick's body left running past its timeout holds its slot until it returns: wait
        for it there, so nothing a tick took outlives it."""
        until = time.monotonic() + self.stall_timeout
        while self._abandoned:
            room = until - time.monotonic()
            item = None
            with contextlib.suppress(queue_module.Empty):
                item = self._settle_queue.get(timeout=max(room, 0.0))
            if isinstance(item, Ended):
                self._body_ended(item.run)
            elif room <= 0:
                raise InvariantError(
                    f"{len(self._abandoned)} body(ies) still run {self.stall_timeout:g}s after "
                    "their timeout; their slots stay held until they return",
                    hint="make the job's body honour ctx.signal",
                )
