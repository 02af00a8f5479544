"""The memory driver: the PostgreSQL driver's semantics in one process, for tests and trials.

Not durable and not shared between processes. The contract suite holds it to the same answers
as the database (SPEC DRV-04/05).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from ...clock import Clock
from ..contract import (
    AGED,
    AuditStore,
    BackfillLedger,
    BatchStore,
    BulkStore,
    DriverFeatures,
    EventStore,
    HistoryStore,
    JobPause,
    JobStore,
    KeyUse,
    LimitStore,
    MoveStore,
    OutboxRow,
    PayloadStore,
    QueueState,
    ReadStore,
    RunStore,
    StepStore,
    TenantStore,
)
from ..history import History
from . import limits as memory_limits
from .archive import MemoryArchive
from .backfills import MemoryBackfillLedger
from .batches import MemoryBatchStore
from .bulk import MemoryAuditStore, MemoryBulkStore
from .depth import MemoryDepthStore
from .jobs import MemoryJobs
from .leases import MemoryLeaseStore
from .moves import MemoryMoveStore
from .payloads import MemoryPayloadStore
from .reads import MemoryReads
from .rollup import MemoryRollupStore
from .runs import MemoryRuns
from .steps import MemoryEventStore, MemoryStepStore
from .tenants import MemoryTenantStore

if TYPE_CHECKING:
    from ..contract import OutboxStore, SchedulerStore


class MemoryDriver(MemoryJobs, MemoryRuns, MemoryReads):
    """The rows and stores of one process. Its jobs, runs, reads and limits are this object
    (the parts it is made of), answered typed as their store, so nothing reaches a verb but
    through its accessor (``JobDriver``)."""

    name = "memory"
    database: str | None = None
    #: its rows live in this process: a child could not see them
    features = DriverFeatures(supports_child_runs=False)

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__(clock)
        self._step_store = MemoryStepStore(self)
        self._lease_store = MemoryLeaseStore(self)
        self._event_store = MemoryEventStore(self, self.cancel)
        self._backfill_ledger = MemoryBackfillLedger(self)
        self._rollup_store = MemoryRollupStore(self)
        self._depth_store = MemoryDepthStore(self)
        self._batch_store = MemoryBatchStore(self, self)
        self._bulk_store = MemoryBulkStore(self)
        self._audit_store = MemoryAuditStore(self)
        self._payload_store = MemoryPayloadStore(self, self._event_store, self._outbox_rows)
        self._tenant_store = MemoryTenantStore(self, self._event_store, self._outbox_rows)
        self._move_store = MemoryMoveStore(self)
        self._archive = MemoryArchive(self)
        self._history = History(self._rollup_store, self._depth_store, self._archive)

    # --- the stores: each built once, the same object at every call -----------------------

    def jobs(self) -> JobStore:
        return self

    def bulk(self) -> BulkStore:
        return self._bulk_store

    def audit(self) -> AuditStore:
        return self._audit_store

    def payloads(self) -> PayloadStore:
        return self._payload_store

    def tenants(self) -> TenantStore:
        return self._tenant_store

    def moves(self) -> MoveStore:
        return self._move_store

    def _outbox_rows(self) -> dict[UUID, OutboxRow]:
        """The staged rows of the one in-process outbox (none before its first use)."""
        from .outbox import MemoryOutboxStore

        store = self._outbox
        return store._rows if isinstance(store, MemoryOutboxStore) else {}

    def runs(self) -> RunStore:
        return self

    def reads(self) -> ReadStore:
        return self

    def limits(self) -> LimitStore:
        return self

    def history(self) -> HistoryStore:
        return self._history

    def steps(self) -> StepStore:
        return self._step_store

    def events(self, alias: str | None = None) -> EventStore:
        """The one in-process event store, whatever the alias: memory has no databases."""
        return self._event_store

    def outbox(self, alias: str | None = None, claim_lease: object = None) -> OutboxStore:
        """One in-process outbox for every alias: memory has no transaction to stage in. The
        first caller's ``claim_lease`` is the one it keeps."""
        with self._lock:
            if self._outbox is None:
                from .outbox import MemoryOutboxStore

                self._outbox = MemoryOutboxStore(claim_lease=claim_lease, clock=self.clock)
            return self._outbox

    def batches(self) -> BatchStore:
        return self._batch_store

    def backfills(self) -> BackfillLedger:
        return self._backfill_ledger

    def scheduler(self) -> SchedulerStore:
        """One in-process scheduler state per driver, on the driver's clock."""
        with self._lock:
            if self._scheduler is None:
                from .scheduler import MemorySchedulerStore

                self._scheduler = MemorySchedulerStore(self.clock)
            return self._scheduler

    # --- LimitStore: the queue and key controls and the fleet slots -------------------------

    def pause_queue(self, queue: str, by: str | None, until: datetime | None = None) -> QueueState:
        with self._lock:
            held = self._shown(self._controls.get(queue) or QueueState(queue, False))
            if not held.paused:  # the first pause wins, as on the database
                held = QueueState(queue, True, self._now(), by, held.limit)
            held = replace(held, paused_until=until)  # the latest pause says when it ends
            self._controls[queue] = held
        self._tell_controls()
        return held

    def _shown(self, state: QueueState) -> QueueState:
        """A pause past its end reads as none (controls.sql, SPEC PAUSE-01)."""
        if state.paused and state.paused_until is not None and state.paused_until <= self._now():
            return QueueState(state.queue, False, limit=state.limit)
        return state

    def resume_queue(self, queue: str) -> QueueState:
        with self._lock:
            held = self._controls.get(queue)
            state = QueueState(queue, False, limit=None if held is None else held.limit)
            self._controls[queue] = state
        self._tell_controls()
        return state

    def queue_controls(self) -> list[QueueState]:
        with self._lock:
            return [self._shown(self._controls[name]) for name in sorted(self._controls)]

    def paused_queues(self) -> frozenset[str]:
        with self._lock:
            return frozenset(
                name for name, state in self._controls.items() if self._shown(state).paused
            )

    def set_queue_limit(self, queue: str, concurrency: int | None) -> QueueState:
        with self._lock:
            held = self._controls.get(queue) or QueueState(queue, False)
            state = replace(held, limit=concurrency)
            self._controls[queue] = state
        self._tell_controls()
        return state

    def pause_job(
        self, name: str, key: str | None, by: str | None, until: datetime | None = None
    ) -> JobPause:
        with self._lock:
            now = self._now()
            fresh = JobPause(name, key, now, by, until)
            held = self._job_controls.get(fresh.target)
            if held is None or not self._in_force(held, now):  # the first pause wins
                held = fresh
            held = replace(held, paused_until=until)  # the latest says when it ends
            self._job_controls[held.target] = held
        self._tell_controls()
        return held

    @staticmethod
    def _in_force(pause: JobPause, now: datetime) -> bool:
        """A pause past its end is over (controls.sql, SPEC PAUSE-05)."""
        return pause.paused_until is None or pause.paused_until > now

    def resume_job(self, name: str, key: str | None) -> bool:
        with self._lock:
            now = self._now()
            target = JobPause(name, key, now).target
            gone = self._job_controls.pop(target, None)
            lifted = key is not None and memory_limits.lift(self, target, now)
        self._tell_controls()
        return (gone is not None and self._in_force(gone, now)) or lifted

    def job_pauses(self) -> list[JobPause]:
        with self._lock:
            now = self._now()
            return [p for _, p in sorted(self._job_controls.items()) if self._in_force(p, now)]

    def pause_key(self, key: str, delay: float) -> None:
        with self._lock:
            memory_limits.pause(self, key, delay, self._now())

    def key_usage(self, limit: int = 500) -> list[KeyUse]:
        with self._lock:
            return memory_limits.usage(self, limit, self._now())

    def prune_limit_keys(self, windows: Mapping[str, float], idle_for: float) -> int:
        with self._lock:
            return memory_limits.prune(self, windows, idle_for, self._now())

    def acquire_slot(self, key: str, limit: int, ttl: float, holder: str) -> int | None:
        return self._lease_store.acquire(key, limit, ttl, holder)

    def renew_slot(self, key: str, slot: int, ttl: float, holder: str) -> bool:
        return self._lease_store.renew(key, slot, ttl, holder)

    def release_slot(self, key: str, slot: int, holder: str) -> bool:
        return self._lease_store.release(key, slot, holder)

    def held_slots(self, key: str) -> int:
        return self._lease_store.held(key)

    def _tell_controls(self) -> None:
        with self._lock:
            told = [s.on_control for s in self._subscriptions if s.on_control is not None]
        for callback in told:
            callback()

    # --- JobStore's housekeeping --------------------------------------------------------------

    def preflight(self, alias: str, table: str = "x_jobs") -> None:
        """Nothing to reach and no table to miss."""

    def age(self, seconds: float, *, only: Collection[str] = AGED) -> None:
        if "jobs" in only:
            self.shift(seconds)
            self._audit_store.shift(seconds)
        if "steps" in only:
            self._step_store.shift(seconds)
        if "events" in only:
            self._event_store.shift(seconds)

    def close(self) -> None:
        """Nothing to release; the rows stay for the next user of this driver."""

    # --- test support: move time by moving rows, like the database harness does -----------

    def shift(self, seconds: float) -> None:
        """Make every stored time ``seconds`` earlier (the same as waiting that long)."""
        delta = timedelta(seconds=seconds)
        with self._lock:
            for key, row in self._rows.items():
                self._rows[key] = replace(
                    row,
                    run_at=row.run_at - delta,
                    visible_at=None if row.visible_at is None else row.visible_at - delta,
                    created_at=row.created_at - delta,
                    updated_at=row.updated_at - delta,
                    started_at=None if row.started_at is None else row.started_at - delta,
                    last_attempted_at=(
                        None if row.last_attempted_at is None else row.last_attempted_at - delta
                    ),
                    expires_at=None if row.expires_at is None else row.expires_at - delta,
                )
            self._presence.shift(delta)
            self._rollup_store.shift(delta)
            self._depth_store.shift(delta)
            memory_limits.shift(self, delta)
            for target, pause in self._job_controls.items():
                ends = pause.paused_until
                self._job_controls[target] = replace(
                    pause,
                    paused_at=pause.paused_at - delta,
                    paused_until=None if ends is None else ends - delta,
                )
            for name, control in self._controls.items():
                self._controls[name] = replace(
                    control,
                    paused_at=None if control.paused_at is None else control.paused_at - delta,
                    paused_until=(
                        None if control.paused_until is None else control.paused_until - delta
                    ),
                )
