"""The memory driver's state: its rows, lock, clock and subscriptions, which each part of the
driver (jobs, runs, reads) and its stores share."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import TYPE_CHECKING
from uuid import UUID

from ...clock import Clock, SystemClock
from ..contract import (
    JobPause,
    JobSnapshot,
    QueueState,
    StepRecord,
)
from ..rules import (
    known_state,
)
from .presence import MemoryPresence

if TYPE_CHECKING:
    from ..contract import OutboxStore, SchedulerStore


class KeyState:
    """A limit key's row (x_limit_keys): its rate window's starts and its pause."""

    __slots__ = ("paused_until", "starts", "updated_at")

    def __init__(self, now: datetime) -> None:
        self.starts: list[datetime] = []
        self.paused_until: datetime | None = None
        self.updated_at = now


@dataclass
class _Subscription:
    queues: set[str]
    callback: Callable[[], None]
    owner: MemoryState
    on_control: Callable[[], None] | None = None
    #: told the queue and priority of a row enqueued ready above priority 0 (SPEC PRIO-01)
    on_urgent: Callable[[str, int], None] | None = None

    def woken(self, queue: str, priority: int) -> None:
        """What a ready row of ``queue`` at ``priority`` tells this subscriber, as the
        PostgreSQL driver's enqueue notifies: its queue, and above priority 0 the urgent form."""
        self.callback()
        if priority > 0 and self.on_urgent is not None:
            self.on_urgent(queue, priority)

    def stop(self) -> None:
        with self.owner._lock:
            if self in self.owner._subscriptions:
                self.owner._subscriptions.remove(self)


def _read(row: JobSnapshot) -> JobSnapshot:
    """A row as a read returns it: its state checked as the PostgreSQL driver's ``snapshot()``
    checks it (SPEC DB-05)."""
    known_state(row.id, row.state)
    return row


class MemoryState:
    """What every part of the memory driver reads and writes, under one lock. The stores are
    handed this state (``MemoryDriver`` builds them), never the driver: the parts that call a
    store name its type themselves (jobs, runs)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self._rows: dict[UUID, JobSnapshot] = {}
        self._lock = threading.RLock()
        self._subscriptions: list[_Subscription] = []
        self._controls: dict[str, QueueState] = {}
        #: the operators' pauses of a job or a key (x_job_controls), by target
        self._job_controls: dict[str, JobPause] = {}
        #: a limited run's key by job id (x_jobs.limit_key), and each key's state (x_limit_keys)
        self._limit_keys: dict[UUID, str] = {}
        self._key_state: dict[str, KeyState] = {}
        #: per queue, the last key a limited claim took (PostgresDriver's ``_limit_cursor``)
        self._limit_cursor: dict[str, str] = {}
        # run_id -> step name -> record, in the order the steps were first written
        self._steps: dict[UUID, dict[str, StepRecord]] = {}
        self._presence = MemoryPresence()
        #: finished jobs moved out of the rows (x_job_history, issue 46), and its partitions
        self._archived: dict[UUID, JobSnapshot] = {}
        self._partitions: set[tuple[str, date]] = set()
        self._outbox: OutboxStore | None = None
        self._scheduler: SchedulerStore | None = None

    def _now(self) -> datetime:
        return self.clock.now()

    def _held(self, job_id: UUID, token: UUID) -> JobSnapshot | None:
        """The running row ``token`` still holds, else None: every write of a run is fenced
        on it (the step store's too)."""
        row = self._rows.get(job_id)
        if row is None or row.state != "running" or row.lease_token != token:
            return None
        return row

    def _release_dependants(self, settled: JobSnapshot) -> None:
        """As the settle statements' ``released``: the jobs waiting for ``settled``, which just
        reached a final state, count it; at the last one (or a failure) they fall due now."""
        now = self._now()
        woken = []
        for job_id in sorted(settled.dependants or ()):
            row = self._rows.get(job_id)
            if row is None or row.state != "suspended" or not row.waiting_on:
                continue
            # a run that started (a parent parked on children) counts every end alike
            anyway = row.run_anyway or row.started_at is not None
            failed = settled.id if settled.state != "done" and not anyway else None
            left = 0 if failed is not None else max(row.waiting_on - 1, 0)
            released = left == 0
            self._rows[job_id] = replace(
                row,
                waiting_on=left,
                after_failed=failed,
                state="ready" if released else row.state,
                run_at=now if released else row.run_at,
                expires_at=now if failed is not None else row.expires_at,
                updated_at=now,
            )
            if released:
                woken.append(row.queue)
        for queue in dict.fromkeys(woken):
            for sub in [s for s in self._subscriptions if queue in s.queues]:
                sub.callback()
