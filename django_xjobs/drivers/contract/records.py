"""The read-side values the stores answer: job snapshots, queue and worker figures, step,
event, batch, backfill, outbox and cron records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from uuid import UUID

from ...history import FailedAttempt
from ...payload import dumps
from .requests import EnqueueRequest

#: what ``JobDriver.age`` moves unless told: every stored time
AGED: frozenset[str] = frozenset({"jobs", "steps", "events"})


@dataclass(frozen=True)
class QueueStats:
    """Exclusive buckets per queue (SPEC MET-03); a due ``delayed`` row counts as ready (Q-05)."""

    queue: str
    ready: int = 0
    delayed: int = 0
    running: int = 0
    suspended: int = 0
    dead: int = 0
    oldest_ready_seconds: float = 0.0


@dataclass(frozen=True)
class JobSnapshot:
    """A job row as the operator API sees it."""

    id: UUID
    name: str
    queue: str
    state: str
    input: dict[str, Any]
    idempotency_key: str
    run_id: UUID
    attempt: int
    max_attempts: int
    priority: int
    run_at: datetime
    visible_at: datetime | None
    claimed_by: str | None
    lease_token: UUID | None
    last_error: str | None
    stop_reason: str | None
    result: Any
    tenant_id: str | None
    enqueued_by: str | None
    traceparent: str | None
    created_at: datetime
    updated_at: datetime
    lease_expiries: int = 0
    #: the failed attempts, oldest first, at most ``history.KEEP``
    errors: tuple[FailedAttempt, ...] = ()
    #: the worker its last run died with, while that death is not pinned on it: it runs alone
    #: next (issue 39); cleared by any settle but a shed
    lapsed_holder: str | None = None
    #: when the first attempt was claimed: kept through retries, cleared by an operator's retry
    started_at: datetime | None = None
    #: when the latest attempt was claimed
    last_attempted_at: datetime | None = None
    #: the worker that claimed the latest attempt; unlike ``claimed_by``, kept once it settles
    attempted_by: str | None = None
    #: not started by then: never run (stop reason ``expired``)
    expires_at: datetime | None = None
    #: times a run snoozed (``ctx.snooze``), bounded per job
    snoozes: int = 0
    #: the latest ``ctx.progress``: ``{"done", "total", "note", "at"}``, or None
    progress: dict[str, Any] | None = None
    #: the batch this job is a member of (``Batch``), or None
    batch_id: UUID | None = None
    #: dependencies (issue 32): the jobs it waits for, how many of them are not done yet (None:
    #: it has none), the one that ended otherwise, whether it runs anyway, and who waits for it
    after: tuple[UUID, ...] | None = None
    waiting_on: int | None = None
    after_failed: UUID | None = None
    run_anyway: bool = False
    dependants: tuple[UUID, ...] | None = None
    #: the version of its job's code the run started under, stamped at its first claim (None:
    #: never claimed since runs recorded it; it reads as 1 once started), and whether a worker
    #: of a newer version parked it (issue 44)
    version: int | None = None
    parked: bool = False


@dataclass(frozen=True)
class VersionCount:
    """The live runs of one job started under one version (issue 44), as ``live_versions``
    counts them. ``version`` None: never claimed yet (its first claim stamps it); a run first
    claimed before runs recorded their version counts as 1."""

    name: str
    version: int | None
    running: int = 0
    #: ready, delayed or suspended, and not parked
    waiting: int = 0
    #: suspended by a worker of a newer version (``old_runs="park"``)
    parked: int = 0


#: a limit key's use, as ``key_usage`` lists it: the key, the pause in force until then, its
#: runs running and the starts it recorded within its window
KeyUse = tuple[str, datetime | None, int, list[datetime]]


@dataclass(frozen=True)
class QueueState:
    """An operator's standing orders for one queue, fleet-wide, as ``pause_queue`` and
    ``resume_queue`` return them; ``paused_at`` is the database's clock::

        >>> state = pause_queue("emails", by="ops:alice")
        >>> state.queue, state.paused, state.paused_by
        ('emails', True, 'ops:alice')
    """

    queue: str
    paused: bool
    paused_at: datetime | None = None
    paused_by: str | None = None
    #: an operator's cap on the queue's runs at once, fleet-wide (``set_queue_limit``)
    limit: int | None = None
    #: when the pause ends by itself (``pause_queue(until=)``); None: when it is resumed
    paused_until: datetime | None = None


@dataclass(frozen=True)
class JobPause:
    """An operator's pause of one job name, or of one of its limit keys until resumed
    (``pause_jobs``), as ``pause_job`` and ``job_pauses`` return it; times on the database's
    clock."""

    name: str
    #: the limit key as the job's template renders it (``limit_key=``); None: the whole job
    key: str | None
    paused_at: datetime
    paused_by: str | None = None
    #: when the pause ends by itself; None: when it is resumed (``resume_jobs``)
    paused_until: datetime | None = None

    @property
    def target(self) -> str:
        """What a claim is told to step over: the name, or the key as rows carry it."""
        return self.name if self.key is None else f"{self.name}\x1f{self.key}"


@dataclass(frozen=True)
class Presence:
    """What a worker says about itself on each heartbeat."""

    worker_id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    in_flight: int


@dataclass(frozen=True)
class WorkerSnapshot:
    """A worker's presence row; ``alive`` is False once it went a ``ttl`` without a beat."""

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    started_at: datetime
    last_seen: datetime
    expires_at: datetime
    in_flight: int
    alive: bool
    #: when the process exited past its shutdown timeout with runs in flight (else None)
    stopped_at: datetime | None = None


@dataclass(frozen=True)
class WorkerLoad:
    """One worker's runs now, as its per-process caps (``XJOBS["LIMITS"]``) count them: all
    of them, those of one queue, and those of one tenant."""

    worker: str
    running: int = 0
    queue_running: int = 0
    tenant_running: int = 0


@dataclass(frozen=True)
class Standing:
    """What a claim weighs for one job, counted where the rows are, never loaded (``why_job``,
    issue 42): its place in its queue, its limit key's use, its queue's runs and the workers'
    loads. Counts stop at the ``cap`` the call gave."""

    #: due waiting rows of its queue the claim order (priority, run_at, id) takes first
    ahead: int = 0
    #: of those, the ones of a higher priority
    higher_priority: int = 0
    #: the limit key its row carries (``limits.keys``), None when it carries none
    key: str | None = None
    #: due waiting rows of its key ahead of it: under fair share its turn is this plus one
    key_ahead: int = 0
    #: other keys with due waiting rows in its queue, and how many of their rows a fair claim
    #: (each key's first run, then each key's second...) takes before this one
    other_keys: int = 0
    other_keys_ahead: int = 0
    #: its key's runs now, and up to ten of them as (job id, worker)
    key_running: int = 0
    key_holders: tuple[tuple[UUID, str | None], ...] = ()
    #: its key's recorded starts (a rate's window is counted from them) and a pause in force
    key_starts: tuple[datetime, ...] = ()
    key_paused_until: datetime | None = None
    #: its queue's runs now, fleet-wide (an operator's cap counts these)
    queue_running: int = 0
    #: per worker with runs now: its load for this job's queue and tenant
    loads: tuple[WorkerLoad, ...] = ()


@dataclass(frozen=True)
class StepRecord:
    """One step of a run (SPEC §14 x_job_steps). ``status``: completed|sleeping|waiting|failed.

    Times are on the store's clock (the database's ``now()`` on PostgreSQL): a ``put`` without
    ``started_at`` is stamped with the store's now, and so is a ``completed`` one without
    ``completed_at``. ``position`` is the step's place in the run, in the order the run first
    reached it (0, 1, 2...); ``None`` for a record written before positions were kept.

    ``ran_for`` is written, never read back: the seconds the step's body ran before this write.
    A ``put`` without ``started_at`` stamps the start that far before the store's now, so a step
    that took 3 s reads 3 s on the store's one clock, at no extra statement (issue 23).
    """

    run_id: UUID
    name: str
    status: str
    started_at: datetime | None = None
    output: Any = None
    completed_at: datetime | None = None
    wake_at: datetime | None = None
    event: str | None = None
    correlation_key: str | None = None
    error: str | None = None
    attempts: int = 1
    position: int | None = None
    ran_for: float | None = None
    #: a waiting step's match fields and whether it takes any tenant's event: what a publish
    #: releases it by (SPEC EVT-06); kept from the first write, as ``event`` is
    match: Mapping[str, object] | None = None
    any_tenant: bool = False


STEP_STATUSES = ("completed", "sleeping", "waiting", "failed")


@dataclass(frozen=True)
class EventRecord:
    """A published event (SPEC EVT-01): stored, not consumed; matched until it expires.
    ``published_at`` and ``expires_at`` are on the store's clock, never the publisher's."""

    id: UUID
    name: str
    payload: Any
    correlation_key: str | None
    published_at: datetime
    expires_at: datetime
    #: the tenant it was published for: a waiter matches its own run's tenant only (None
    #: matches None), unless it waits with ``any_tenant=True``
    tenant_id: str | None = None
    #: what its publish did, in the publisher's transaction (issue 43): waiting runs released,
    #: jobs started by ``on_event``, live runs cancelled by ``cancel_on``, and each ``on_event``
    #: declaration it could not start (``{"job", "code", "message"}``)
    released: int = 0
    started: int = 0
    cancelled: int = 0
    refused: tuple[Mapping[str, str], ...] = ()


@dataclass(frozen=True)
class BackfillRecord:
    """One pass of a backfill in the ``x_backfills`` ledger (SPEC BF-05); ``run_id`` is the
    pass job's run id, so a resumed pass adopts its own row."""

    run_id: UUID
    name: str
    checksum: str
    app_version: str
    status: str  # running | completed | failed
    rows_processed: int
    pages: int
    last_cursor: str | None
    started_at: datetime
    completed_at: datetime | None
    environment: str | None
    job_id: UUID | None
    error: str | None


@dataclass(frozen=True)
class DepthSample:
    """One queue's live depth at one minute (``x_queue_depth``), counted as ``stats()`` counts
    it: a due delayed row is ready (DESIGN Q-05)."""

    minute: datetime
    queue: str
    ready: int
    delayed: int
    running: int


@dataclass(frozen=True)
class HistoryPartition:
    """One day of one finished state's history (``x_job_history``, issue 46): the jobs that
    finished that UTC day in that state, dropped whole by retention (HIST-03)."""

    state: str
    day: date
    name: str


@dataclass(frozen=True)
class BatchCallback:
    """A job a batch inserts when its last member ends (``Batch``): ``kind`` is ``complete``
    (always), ``success`` (every member done) or ``failure`` (any member not done). Its ids are
    minted when the batch opens, so the job is known before it exists."""

    kind: str
    id: UUID
    run_id: UUID
    name: str
    queue: str
    key: str
    max_attempts: int
    priority: int = 0
    tenant_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "id": str(self.id),
            "run_id": str(self.run_id),
            "name": self.name,
            "queue": self.queue,
            "key": self.key,
            "max_attempts": self.max_attempts,
            "priority": self.priority,
            "tenant_id": self.tenant_id,
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> BatchCallback:
        return cls(
            kind=value["kind"],
            id=UUID(value["id"]),
            run_id=UUID(value["run_id"]),
            name=value["name"],
            queue=value["queue"],
            key=value["key"],
            max_attempts=value["max_attempts"],
            priority=value.get("priority", 0),
            tenant_id=value.get("tenant_id"),
        )


@dataclass(frozen=True)
class BatchRecord:
    """A batch row (``x_batches``): its members' final states so far, and when it closed and
    completed (its callbacks queued), on the store's clock."""

    id: UUID
    input: dict[str, Any]
    callbacks: tuple[BatchCallback, ...]
    total: int
    pending: int
    done: int
    dead: int
    failed: int
    cancelled: int
    created_at: datetime
    closed_at: datetime | None
    completed_at: datetime | None


@dataclass(frozen=True)
class OutboxRow:
    """A staged enqueue (SPEC OUTBOX-02), as a claim returns it."""

    id: UUID
    job: str
    queue: str
    input: Any
    idempotency_key: str
    max_attempts: int
    priority: int
    run_at: datetime
    staged_at: datetime
    tenant_id: str | None = None
    traceparent: str | None = None
    enqueued_by: str | None = None
    claimed_by: str | None = None
    #: the job controls the publish applies as the direct enqueue would (issue 29):
    #: ``expires_in`` stays relative, counted from ``run_at`` when the job is inserted
    expires_at: datetime | None = None
    expires_in: float | None = None
    replace: bool = False
    #: the job's dependencies, as ``using(after=..., run_anyway=...)`` gave them (issue 32)
    after: tuple[UUID, ...] | None = None
    run_anyway: bool = False

    def request(self) -> EnqueueRequest:
        """The direct enqueue this row stands for, under the job id the stage returned."""
        return EnqueueRequest(
            name=self.job,
            queue=self.queue,
            input=self.input,
            input_json=dumps(self.input),
            idempotency_key=self.idempotency_key,
            max_attempts=self.max_attempts,
            priority=self.priority,
            run_at=self.run_at,
            tenant_id=self.tenant_id,
            enqueued_by=self.enqueued_by,
            traceparent=self.traceparent,
            id=self.id,
            expires_at=self.expires_at,
            expires_in=self.expires_in,
            replace=self.replace,
            after=self.after,
            run_anyway=self.run_anyway,
        )


@dataclass(frozen=True)
class QuarantinedRow:
    """A staged enqueue whose publish failed for a reason that fails the same way again
    (issue 24), with that error and the sizes of the values the live-key index holds."""

    id: UUID
    job: str
    queue: str
    idempotency_key: str
    tenant_id: str | None
    staged_at: datetime
    quarantined_at: datetime
    error_code: str
    error: str
    key_bytes: int
    tenant_bytes: int | None
    name_bytes: int


@dataclass(frozen=True)
class CronState:
    """An operator's standing orders for one cron, as ``pause_cron`` and ``resume_cron`` return
    them; ``paused_at`` is the store's clock::

        >>> state = pause_cron("shop.nightly", by="ops:alice")
        >>> state.cron, state.paused, state.paused_by
        ('shop.nightly', True, 'ops:alice')
    """

    cron: str
    paused: bool
    paused_at: datetime | None = None
    paused_by: str | None = None
