"""The PostgreSQL driver: the hot path runs the named statements of ``jobs.sql``."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.db import (
    connections,
    transaction,
)

from ... import conf
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
    PayloadStore,
    QueueState,
    ReadStore,
    RunStore,
    StepStore,
    TenantStore,
)
from ..history import History
from . import limits as postgres_limits
from . import sql
from .archive import PostgresArchive
from .backfills import PostgresBackfillLedger
from .batches import PostgresBatchStore
from .bulk import PostgresAuditStore, PostgresBulkStore
from .depth import PostgresDepthStore
from .jobs import PostgresJobs
from .leases import PostgresLeaseStore
from .listener import Listener, Polling
from .moves import PostgresMoveStore
from .payloads import PostgresPayloadStore
from .rollup import PostgresRollupStore
from .runs import _EXITED_JSON, _LAPSED_JSON, _LAPSED_PRESENT_JSON, PostgresRuns
from .state import CHANNEL, CONTROL_CHANNEL, STATEMENTS, snapshot
from .steps import PostgresEventStore, PostgresStepStore
from .tenants import PostgresTenantStore

if TYPE_CHECKING:
    from ..contract import OutboxStore, SchedulerStore
CONTROLS = sql.load(Path(__file__).with_name("controls.sql"))
#: limit keys' rows deleted per transaction by prune_limit_keys: a claim waits on none for long
_PRUNE_KEYS_BATCH = 1000


#: what the statement-count tests, the pooler tests and the benchmarks read from here
__all__ = [
    "CHANNEL",
    "CONTROL_CHANNEL",
    "STATEMENTS",
    "_EXITED_JSON",
    "_LAPSED_JSON",
    "_LAPSED_PRESENT_JSON",
    "Listener",
    "Polling",
    "PostgresDriver",
    "snapshot",
]


class PostgresDriver(PostgresJobs, PostgresRuns):
    """Jobs in the ``x_jobs`` table of the database alias ``using``.

    Each thread uses its own Django connection for that alias, in autocommit unless the
    caller opened a transaction (an enqueue inside ``atomic()`` joins it). Its jobs, runs,
    reads and limits are this object (the parts it is made of), answered typed as their store,
    so nothing reaches a verb but through its accessor (``JobDriver``).
    """

    name = "postgres"
    #: a child process reaches the same database under the same settings
    features = DriverFeatures(supports_child_runs=True)

    def __init__(self, using: str = "default") -> None:
        super().__init__(using)
        self._step_store = PostgresStepStore(using)
        self._lease_store = PostgresLeaseStore(using)
        self._event_store = PostgresEventStore(using)
        self._backfill_ledger = PostgresBackfillLedger(using)
        self._rollup_store = PostgresRollupStore(using)
        self._depth_store = PostgresDepthStore(using)
        self._batch_store = PostgresBatchStore(using)
        self._bulk_store = PostgresBulkStore(using)
        self._audit_store = PostgresAuditStore(using)
        self._payload_store = PostgresPayloadStore(using)
        self._tenant_store = PostgresTenantStore(using)
        self._move_store = PostgresMoveStore(using)
        self._archive = PostgresArchive(using)
        self._history = History(self._rollup_store, self._depth_store, self._archive)
        #: the stores of other aliases, and the scheduler, built at their first call
        self._event_stores: dict[str, EventStore] = {using: self._event_store}
        self._outboxes: dict[tuple[str, Any], OutboxStore] = {}
        self._scheduler: SchedulerStore | None = None

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
        alias = self.using if alias is None else alias
        store = self._event_stores.get(alias)
        if store is None:
            store = self._event_stores.setdefault(alias, PostgresEventStore(alias))
        return store

    def outbox(self, alias: str | None = None, claim_lease: object = None) -> OutboxStore:
        """Built once per alias and claim lease; with no ``claim_lease``, per the
        ``OUTBOX_CLAIM_LEASE`` in force (checked when the store is built, SPEC OUTBOX-14)."""
        from .outbox import PostgresOutboxStore

        alias = self.using if alias is None else alias
        lease = ("setting", conf.get().outbox_claim_lease) if claim_lease is None else claim_lease
        store = self._outboxes.get((alias, lease))
        if store is None:
            built = PostgresOutboxStore(alias, claim_lease=claim_lease)
            store = self._outboxes.setdefault((alias, lease), built)
        return store

    def batches(self) -> BatchStore:
        return self._batch_store

    def backfills(self) -> BackfillLedger:
        return self._backfill_ledger

    def scheduler(self) -> SchedulerStore:
        if self._scheduler is None:
            from .scheduler import PostgresSchedulerStore

            self._scheduler = PostgresSchedulerStore(self.using)
        return self._scheduler

    # --- LimitStore: the queue and key controls and the fleet slots -------------------------

    def pause_queue(self, queue: str, by: str | None, until: datetime | None = None) -> QueueState:
        params = {"queue": queue, "by": by, "until": until}
        with transaction.atomic(using=self.using):  # the NOTIFY goes out with the commit
            row = sql.fetch(self.using, CONTROLS["pause_queue"], params)[0]
        return QueueState(row[0], True, row[1], row[2], paused_until=row[3])

    def resume_queue(self, queue: str) -> QueueState:
        with transaction.atomic(using=self.using):
            row = sql.fetch(self.using, CONTROLS["resume_queue"], {"queue": queue})[0]
        return QueueState(row[0], False)

    def queue_controls(self) -> list[QueueState]:
        rows = sql.fetch(self.using, CONTROLS["queue_controls"], {})
        return [
            QueueState(r[0], r[1] is not None, r[1], r[2], r[3], paused_until=r[4]) for r in rows
        ]

    def set_queue_limit(self, queue: str, concurrency: int | None) -> QueueState:
        return postgres_limits.set_queue_limit(self.using, queue, concurrency)

    def pause_job(
        self, name: str, key: str | None, by: str | None, until: datetime | None = None
    ) -> JobPause:
        target = JobPause(name, key, datetime.min).target
        params = {"target": target, "name": name, "key": key, "by": by, "until": until}
        with transaction.atomic(using=self.using):  # the NOTIFY goes out with the commit
            row = sql.fetch(self.using, CONTROLS["pause_job"], params)[0]
        return JobPause(*row[:5])

    def resume_job(self, name: str, key: str | None) -> bool:
        target = JobPause(name, key, datetime.min).target
        params = {"target": target, "name": name, "key": key}
        with transaction.atomic(using=self.using):
            row = sql.fetch(self.using, CONTROLS["resume_job"], params)[0]
        return bool(row[0])

    def job_pauses(self) -> list[JobPause]:
        return [JobPause(*r) for r in sql.fetch(self.using, CONTROLS["job_pauses"], {})]

    def pause_key(self, key: str, delay: float) -> None:
        postgres_limits.pause_key(self.using, key, delay)

    def key_usage(self, limit: int = 500) -> list[KeyUse]:
        return postgres_limits.usage(self.using, limit)

    def prune_limit_keys(self, windows: Mapping[str, float], idle_for: float) -> int:
        return postgres_limits.prune_keys(self.using, windows, idle_for, _PRUNE_KEYS_BATCH)

    def paused_queues(self) -> frozenset[str]:
        return frozenset(r[0] for r in sql.fetch(self.using, CONTROLS["paused_queues"], {}))

    def acquire_slot(self, key: str, limit: int, ttl: float, holder: str) -> int | None:
        return self._lease_store.acquire(key, limit, ttl, holder)

    def renew_slot(self, key: str, slot: int, ttl: float, holder: str) -> bool:
        return self._lease_store.renew(key, slot, ttl, holder)

    def release_slot(self, key: str, slot: int, holder: str) -> bool:
        return self._lease_store.release(key, slot, holder)

    def held_slots(self, key: str) -> int:
        return self._lease_store.held(key)

    # --- JobStore's housekeeping --------------------------------------------------------------

    def preflight(self, alias: str, table: str = "x_jobs") -> None:
        from .preflight import preflight

        preflight(alias, table)

    def age(self, seconds: float, *, only: Collection[str] = AGED) -> None:
        params = {"d": timedelta(seconds=seconds)}
        with transaction.atomic(using=self.using):
            for family in sorted(only):
                self._count(f"age_{family}", params)
            if "jobs" in only:  # the rollup's minutes, in two steps (jobs.sql age_rollup_away)
                self._count("age_rollup_away", params)
                self._count("age_rollup_back", {})
                self._depth_store.shift(params["d"])

    def close(self) -> None:
        connections[self.using].close()
