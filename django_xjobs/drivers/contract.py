"""The driver contract: what a job store must do, and the values that cross it (SPEC §15).

Both drivers answer the same question the same way; the contract suite
(``tests/drivers/contract/``, a file per verb family) runs every case against each of them.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol
from uuid import UUID

from ..durations import MAX_SECONDS, MAX_TEXT
from ..errors import InputInvalidError, InvariantError
from ..history import FailedAttempt, Failure
from ..payload import NotJSON, decode, dumps
from ..states import FINISHED_STATES, LIVE_STATES  # noqa: F401  (the driver vocabulary)
from ..text import check_name, storable
from .values import quick_init

if TYPE_CHECKING:
    from ..limits.claims import ClaimLimits
    from ..rollup import RollupRow

FinalState = Literal["dead", "failed"]

#: what ``JobDriver.age`` moves unless told: every stored time
AGED: frozenset[str] = frozenset({"jobs", "steps", "events"})


@quick_init
@dataclass(frozen=True)
class EnqueueRequest:
    """One job to insert. ``run_at`` wins over ``delay``; neither means now. ``id`` is the id a
    staged enqueue minted and already returned to its caller; ``None`` lets the driver mint it."""

    name: str
    queue: str
    input: dict[str, Any]
    input_json: str
    idempotency_key: str
    max_attempts: int
    priority: int = 0
    run_at: datetime | None = None
    delay: float | None = None
    tenant_id: str | None = None
    enqueued_by: str | None = None
    traceparent: str | None = None
    id: UUID | None = None
    #: not started by then, it never runs (stop reason ``expired``); ``expires_in`` is the same
    #: counted in seconds from when the job falls due, on the store's clock (issue 29)
    expires_at: datetime | None = None
    expires_in: float | None = None
    #: a waiting, never-started holder of the key takes this request's input, run time and
    #: expiry instead of a new row (``on_conflict="replace"``, debounce); any other holder
    #: dedupes as ever
    replace: bool = False
    #: the jobs this one waits for (``using(after=...)``, issue 32): it runs once all are done,
    #: and ends ``dependency_failed`` if one ends otherwise, unless ``run_anyway``
    after: tuple[UUID, ...] | None = None
    run_anyway: bool = False

    def __post_init__(self) -> None:
        # every enqueue path builds one of these: a NUL or a lone surrogate in a stored name
        # is refused with its code here, not as a raw DataError from the insert (issue 24 §4)
        check_name(self.idempotency_key, "the idempotency key", error=InputInvalidError)
        check_name(self.tenant_id, "tenant_id", error=InputInvalidError)
        check_name(self.enqueued_by, "enqueued_by", error=InputInvalidError)

    def for_input(
        self, input: dict[str, Any], input_json: str, idempotency_key: str, tenant_id: str | None
    ) -> EnqueueRequest:
        """This request with another input, key and tenant: what one job's enqueue builds per
        element from the fields its call shares. Equal to constructing it; only the two names
        that change are checked again (the rest were, when this one was made). A frozen
        dataclass sets each of its 20 fields through ``object.__setattr__``, which made its
        construction a tenth of ``enqueue_many``'s Python; this is one dict update."""
        check_name(idempotency_key, "the idempotency key", error=InputInvalidError)
        check_name(tenant_id, "tenant_id", error=InputInvalidError)
        return self._with(
            input=input, input_json=input_json, idempotency_key=idempotency_key, tenant_id=tenant_id
        )

    def with_id(self, job_id: UUID) -> EnqueueRequest:
        """This request with the id a staged enqueue minted for it (``dataclasses.replace``
        would construct the whole frozen dataclass again, once per staged enqueue)."""
        return self._with(id=job_id)

    def _with(self, **changes: Any) -> EnqueueRequest:
        """A copy with ``changes`` (fields that need no check), as one dict update."""
        made = object.__new__(EnqueueRequest)
        fields = made.__dict__
        fields.update(self.__dict__)
        fields.update(changes)
        return made


@quick_init
@dataclass(frozen=True)
class ClaimedJob:
    """A row this worker now holds: ``lease_token`` fences every write it makes (DESIGN Q-01)."""

    id: UUID
    run_id: UUID
    name: str
    queue: str
    input: dict[str, Any]
    attempt: int
    max_attempts: int
    lease_token: UUID
    priority: int
    tenant_id: str | None
    enqueued_by: str | None
    idempotency_key: str
    created_at: datetime
    #: runs in a row that died alone, in the child process that isolated them, before this
    #: claim: the crash count MAX_LEASE_EXPIRIES bounds (0 for a normal claim)
    lease_expiries: int = 0
    traceparent: str | None = None
    #: why the stored input could not be decoded (``input`` is then empty): the run settles
    #: dead with ``X_JOB_UNDECODABLE`` and never starts; None for every readable row
    undecodable: str | None = None
    #: its first claim came after its ``expires_at``: it settles dead with stop reason
    #: ``expired`` and the handler never starts (issue 29)
    expired: bool = False
    #: snoozes this job already made (``ctx.snooze`` refuses past its bound)
    snoozes: int = 0
    #: seconds from its due time (``run_at``) to this claim, on the store's clock: the wait
    #: behind ``xjobs_job_wait_seconds``
    waited: float = 0.0
    #: the worker its last run died with, that death not yet pinned on it (issue 39): every run
    #: of a dead worker shares its death, so this one runs alone next; None for most claims
    died_with: str | None = None

    @property
    def suspect(self) -> bool:
        """True when this run must run alone: its last run died with its worker, or died alone
        before (a counted crash)."""
        return self.died_with is not None or self.lease_expiries > 0


def claimed_input(stored: Any) -> tuple[dict[str, Any], str | None]:
    """A claimed row's stored input (JSON text) as the handler's inputs, or ``({}, reason)``
    when this process cannot read it: each row is decoded on its own, so one that another
    version or hand-written SQL left too deep to decode fails alone, not its whole claim."""
    try:
        value = decode(stored)
    except NotJSON as error:
        return {}, f"its stored input {error.reason}"
    return value, None


# --- settle values: how a run ends, one driver call each (STYLE: one settle) ----------------
#
# Every one is fenced on state='running' and its lease token: a row that moved on (lapsed,
# re-claimed, cancelled) refuses it and the call answers False (SPEC STATE-01, DESIGN Q-01).


@quick_init
@dataclass(frozen=True)
class Complete:
    """Done, with its JSON ``result`` text (or ``None``); ``JobDriver.ack`` takes many at once."""

    job_id: UUID
    lease_token: UUID
    result_json: str | None = None


def _storable_error(value: Any) -> None:
    """A settle's ``error`` as it can be stored: a NUL, a lone surrogate or a megabyte of
    message must not make the settle itself fail, attempt after attempt (issue 24 §3)."""
    if value.error is not None:
        object.__setattr__(value, "error", storable(value.error))


@quick_init
@dataclass(frozen=True)
class RetryAt:
    """Ready again after ``delay`` seconds (SPEC DRV-01, STATE-02). ``counts_as_attempt=False``
    gives the attempt back (floored at 0, SPEC STATE-03); ``failure`` joins the history.
    ``crashed``: the run died alone in the child that isolated it, so the row's crash count goes
    up by one instead of back to 0 (SPEC LEASE-17). ``keep_place``: a run handed back, not
    ended (an outage cut it short, SPEC LEASE-20): ready at once in its old place in the queue,
    its crash count and mark kept, as a shed keeps them."""

    job_id: UUID
    lease_token: UUID
    delay: float = 0.0
    error: str | None = None
    counts_as_attempt: bool = True
    stop_reason: str | None = None
    failure: Failure | None = None
    crashed: bool = False
    keep_place: bool = False

    def __post_init__(self) -> None:
        _storable_error(self)


@quick_init
@dataclass(frozen=True)
class SuspendUntil:
    """Parked (``suspended``) for ``delay`` seconds without spending an attempt (SPEC STEP-10).
    ``snoozed``: ``ctx.snooze`` put it back instead, waiting (``ready`` once due) with one more
    snooze counted; ``failure`` joins the history (a snooze is recorded there, not failed)."""

    job_id: UUID
    lease_token: UUID
    delay: float = 0.0
    error: str | None = None
    snoozed: bool = False
    failure: Failure | None = None
    #: a call step's live child jobs: the run is named among their dependants and falls due
    #: when the settle of the last of them ends it (issue 32, SPEC CHILD-07)
    children: tuple[UUID, ...] | None = None

    def __post_init__(self) -> None:
        _storable_error(self)


@dataclass(frozen=True)
class Shed:
    """Handed back unrun (a full slot or limit, SPEC WORK-04/07/08): ready after ``delay``, no
    attempt spent, no error, and the row keeps its crash count. ``reason`` is for the log.
    ``keep_place``: ready at once, in its old place in the queue (its ``run_at`` kept)."""

    job_id: UUID
    lease_token: UUID
    delay: float = 0.0
    reason: str = ""
    keep_place: bool = False


@quick_init
@dataclass(frozen=True)
class Finish:
    """Ended for good in ``state`` (dead / failed) with ``stop_reason``; ``failure`` joins the
    history."""

    job_id: UUID
    lease_token: UUID
    state: FinalState
    stop_reason: str | None = None
    error: str | None = None
    failure: Failure | None = None

    def __post_init__(self) -> None:
        _storable_error(self)


#: The closed set of ways a claimed run is settled.
Settle = Complete | RetryAt | SuspendUntil | Shed | Finish


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


@quick_init
@dataclass(frozen=True)
class EnqueueResult:
    """What an enqueue did.

    ``id`` is always the job's id. ``deduped`` is True when a live job with the same key already
    existed (its ids are returned). ``staged`` is True when the job waits in the outbox for the
    caller's transaction to commit: its id was minted at staging and the publish inserts the job
    with it, ``run_id`` is None and ``deduped`` is None — unknown until the publish, which may
    collapse it into a live duplicate (``inspect_job`` then answers for that job). ``replaced``
    is True when a waiting job took this enqueue's input (``on_conflict="replace"``, debounce)::

        result = send_receipt.enqueue(order_id=7)
        inspect_job(result.id)["state"]  # "ready"
    """

    id: UUID
    run_id: UUID | None
    deduped: bool | None = False
    staged: bool = False
    #: the live job was waiting and took this enqueue's input and run time
    #: (``on_conflict="replace"`` or a debounced job); ``deduped`` is True too
    replaced: bool = False


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


class StepStore(Protocol):
    @property
    def using(self) -> str:
        """The Django alias of the jobs database. An atomic step opens its transaction there,
        and ``put`` made inside that transaction joins it (issue 17)."""

    def now(self) -> datetime:
        """The store's clock, the one every step time is written and compared on: the
        database's ``now()`` on PostgreSQL, the driver's clock in memory."""

    def list(self, run_id: UUID) -> list[StepRecord]:
        """Every record of the run, by position, then oldest ``started_at`` (one read per
        attempt)."""

    def put(self, record: StepRecord, *, job_id: UUID, lease_token: UUID) -> bool:
        """Upsert, fenced: False (nothing written) unless the job is running under the token.
        The first ``started_at``, position, event and key are kept; missing times are stamped
        on the store's clock."""


class EventStore(Protocol):
    def publish(
        self,
        *,
        id: UUID,
        name: str,
        payload: Any,
        correlation_key: str | None,
        ttl: float,
        tenant_id: str | None = None,
    ) -> EventRecord:
        """Store an event published now on the store's clock, expiring ``ttl`` seconds later;
        return it as stored (SPEC EVT-01)."""

    def find(
        self,
        name: str,
        *,
        after: datetime,
        correlation_key: str | None = None,
        match: dict[str, Any] | None = None,
        tenant_id: str | None = None,
        any_tenant: bool = False,
    ) -> EventRecord | None:
        """The earliest event named ``name`` published at or after ``after`` and not expired on
        the store's clock (SPEC EVT-02), of ``tenant_id`` (None: of no tenant) unless
        ``any_tenant``."""

    def purge(self) -> int:
        """Delete the events expired on the store's clock; how many went (SPEC EVT-04)."""


class LeaseStore(Protocol):
    """Fleet concurrency slots in ``x_job_leases`` (SPEC SLOT-03/06): ``limit`` slots per key,
    each held by one holder until it is released or its ``expires_at`` passes."""

    def acquire(self, key: str, limit: int, ttl: float, holder: str) -> int | None:
        """The lowest free slot in ``0..limit-1`` (no live row), now held; None when all are."""

    def renew(self, key: str, slot: int, ttl: float, holder: str) -> bool:
        """Extend the slot, only for its holder and only while it has not expired (SE-08)."""

    def release(self, key: str, slot: int, holder: str) -> bool:
        """Delete the slot's row, only the holder's own."""

    def held(self, key: str) -> int:
        """Live slots of ``key`` (diagnostics)."""


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


class BackfillLedger(Protocol):
    """The ``x_backfills`` ledger. Not a hot path: one write per page."""

    def start(
        self,
        *,
        run_id: UUID,
        job_id: UUID,
        name: str,
        checksum: str,
        app_version: str,
        environment: str | None,
    ) -> BackfillRecord:
        """The row of this pass, written: a new one, or its own row adopted (status running,
        ``completed_at`` and ``error`` cleared, ``started_at`` and progress kept)."""

    def progress(self, run_id: UUID, *, cursor: str | None, rows: int, pages: int) -> None:
        """The pass's totals after a page (absolute, so a replayed page writes the same)."""

    def finish(self, run_id: UUID, *, status: str, error: str | None = None) -> None:
        """``completed`` (the cursor cleared) or ``failed`` (the cursor kept, to read where)."""

    def completed(self, name: str, environment: str | None) -> BackfillRecord | None:
        """The latest completed pass of ``name`` in ``environment``."""

    def history(self, name: str, *, limit: int = 20) -> list[BackfillRecord]:
        """Passes of ``name``, newest first."""

    def get(self, run_id: UUID) -> BackfillRecord | None: ...


class RollupStore(Protocol):
    def read(self, since: datetime) -> list[RollupRow]:
        """Each minute from ``since`` on, per queue, job name and outcome, in that order."""

    def prune(self, older_than: float) -> int:
        """Delete the minutes older than ``older_than`` seconds; how many rows went."""


@dataclass(frozen=True)
class DepthSample:
    """One queue's live depth at one minute (``x_queue_depth``), counted as ``stats()`` counts
    it: a due delayed row is ready (DESIGN Q-05)."""

    minute: datetime
    queue: str
    ready: int
    delayed: int
    running: int


class DepthStore(Protocol):
    """Queue depth over time for the overview: one sample a minute for the whole fleet, taken by
    the workers' presence beat (worker/depth.py), never per job and never per page view."""

    def sample(self) -> int:
        """Record this minute's depth per queue with live rows, on the store's clock, unless
        the minute already holds a sample (another worker took it): then nothing is counted or
        written. How many queues were written."""

    def read(self, since: datetime) -> list[DepthSample]:
        """Every sample from ``since`` on, in (minute, queue) order."""

    def prune(self, older_than: float) -> int:
        """Delete the samples older than ``older_than`` seconds; how many rows went."""


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


class BatchStore(Protocol):
    """Batches (issue 32). A member's final state is counted by the driver call that settles it
    (``ack``, ``finish``, ``cancel``), in the same write: the batch's last member to end queues
    its callbacks in that write, exactly once."""

    def open(
        self, batch_id: UUID, *, input: dict[str, Any], callbacks: Sequence[BatchCallback]
    ) -> None:
        """An empty open batch; opening one that exists changes nothing."""

    def add(self, batch_id: UUID, requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
        """Insert ``requests`` as members, counted pending, in one write; a request whose key a
        live job holds returns that job (``deduped=True``) and is no member. Raises
        ``BatchClosedError`` when the batch is closed or unknown (nothing written)."""

    def close(self, batch_id: UUID) -> bool:
        """No member joins from now on; True when this close completed the batch (every member
        had already ended) and queued its callbacks. Closing a closed batch: False."""

    def get(self, batch_id: UUID) -> BatchRecord | None: ...

    def recent(self, *, limit: int = 100, open_only: bool = False) -> list[BatchRecord]:
        """Newest first; ``open_only``: the batches not yet completed."""

    def members(self, batch_id: UUID, *, limit: int = 1000) -> list[UUID]:
        """Member ids in the order they were added, at most ``limit``."""

    def open_count(self) -> int:
        """Batches not yet completed (their callbacks not queued); reads only."""

    def cancel(self, batch_id: UUID, reason: str | None) -> int:
        """Close the batch and cancel its live members, as ``JobDriver.cancel`` does one job,
        each counted as it ends; how many were cancelled. The members' own children are not
        touched, nor anything the batch is a part of (cancel goes down, never up)."""


class Notifier(Protocol):
    def stop(self) -> None: ...


class JobDriver(Protocol):
    """A job store. Every write on a claimed row is fenced on ``state='running'`` and its token.

    This protocol is the only door to storage: callers never ask a driver its name or probe it
    for attributes, so a third driver needs no edit outside its own module.
    """

    #: a label for logs and reports (never a switch)
    name: str
    #: the Django database alias holding the jobs, or None when they are not in a database
    database: str | None
    #: can a child process the worker starts reach these same jobs (to run a suspect alone)?
    supports_child_runs: bool

    def enqueue(self, request: EnqueueRequest) -> EnqueueResult:
        """Insert one job (under ``request.id`` when set), unless a live row holds its key: then
        that row's ids with ``deduped=True``; a row already under ``request.id`` is returned as is."""

    def enqueue_many(self, requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
        """``enqueue`` for each request, in order, as one write: one result per request; a key
        an earlier request of the batch inserted dedupes to that job; one wake-up per queue."""

    def enqueue_chunks(self, chunks: Iterable[Sequence[EnqueueRequest]]) -> list[EnqueueResult]:
        """``enqueue_many`` for one call's requests made a chunk at a time, in one transaction:
        a driver may write a chunk while the caller makes the next, and an error raised while
        making one leaves nothing written. Plain requests only (neither ``replace`` nor
        ``after``: InvariantError); one result per request, in order."""

    def claim(
        self,
        *,
        queues: Sequence[str],
        limit: int,
        visibility_timeout: float,
        worker_id: str,
        lapsed: bool = True,
        limits: ClaimLimits | None = None,
    ) -> list[ClaimedJob]:
        """Lock and take up to ``limit`` due rows (and, with ``lapsed``, running rows whose
        lease lapsed), each with a fresh lease token that fences every later write; priority,
        then run_at order. A lapsed run's holder is judged from its presence (SPEC LEASE-16):
        a run that died with it is marked (``died_with``), never counted.
        ``lapsed=False`` is the cheaper claim a worker makes between its lapsed-lease sweeps.
        With ``limits``, only runs within them (limits/claims.py): a key's runs at once
        and starts per window, a key's pause, a queue's cap (SPEC LIMIT-10..16)."""

    # settling a claimed run: one call per settle value, each fenced on 'running' and its token
    def ack(self, completes: Sequence[Complete]) -> set[UUID]:
        """Every run held by its token becomes ``done``, in one statement; the ids that did."""

    def retry(self, retry: RetryAt) -> bool:
        """Ready again at now + delay; the failure joins the history in the same write."""

    def suspend(self, suspend: SuspendUntil) -> bool:
        """Suspended until now + delay, the attempt given back."""

    def shed(self, shed: Shed) -> bool:
        """Ready again at now + delay (or in its old place), the attempt given back, the crash
        count kept."""

    def finish(self, finish: Finish) -> bool:
        """Dead or failed for good; the failure joins the history in the same write."""

    def progress(self, job_id: UUID, lease_token: UUID, progress: dict[str, Any]) -> bool:
        """Store the run's progress (``done``, ``total``, ``note``) stamped ``at`` the store's
        now, only while 'running' under this token; False when the run no longer holds it."""

    def heartbeat(self, job_id: UUID, lease_token: UUID, visibility_timeout: float) -> bool:
        """Extend the lease to now + visibility_timeout, only while 'running' under this token;
        False when the run no longer holds the job (lapsed, re-claimed or cancelled)."""

    # worker presence: one statement per beat for the worker, never per job
    def renew_presence(self, presence: Presence, ttl: float) -> None:
        """Upsert the worker's row: seen now, alive until now + ttl; a beat later than ttl / 2
        after the last one (or from a new process) starts a new unbroken streak."""

    def release_presence(self, worker_id: str) -> None:
        """Delete the worker's row (a clean stop)."""

    def stop_presence(self, worker_id: str) -> None:
        """The process exits past its shutdown timeout with runs in flight: its row stays,
        marked stopped and lapsed, and a lapse of its runs is recorded as that exit."""

    def workers(self) -> list[WorkerSnapshot]:
        """Every presence row, oldest start first; reads only."""

    def stats(self) -> list[QueueStats]:
        """Depth per queue (a due delayed row counts as ready); reads only."""

    def get_job(self, job_id: UUID) -> JobSnapshot | None:
        """The row, or None; reads only."""

    def list_jobs(
        self,
        *,
        queue: str | None = None,
        name: str | None = None,
        state: str | None = None,
        limit: int = 100,
    ) -> list[JobSnapshot]:
        """Rows newest first, filtered, at most ``limit``; reads only. ``state`` is the state
        shown (``states.shown_state``): ``ready`` is every due waiting row, ``delayed`` every
        waiting row not yet due, on the store's clock."""

    def job_ids_between(self, low: UUID, high: UUID, *, limit: int) -> list[UUID]:
        """Up to ``limit`` job ids in ``[low, high]``, smallest first: the ids an id prefix
        names (an operator's lookup; the primary key's range, never a scan); reads only."""

    def dead_letters(self, *, limit: int = 100) -> list[JobSnapshot]:
        """``dead`` rows, most recently failed first; reads only."""

    def standing(self, job_id: UUID, *, cap: int, fair: bool = False) -> Standing | None:
        """What a claim weighs for job ``job_id`` (None: no such job), counted, never loaded:
        each count stops at ``cap``; ``fair``: count its fair-share turn too. Reads only."""

    def job_states(self, ids: Sequence[UUID]) -> dict[UUID, str]:
        """The state of each of ``ids`` that names a job (an unknown id is left out), and
        nothing else of the rows; reads only."""

    def notify_on_ready(
        self,
        queues: Iterable[str],
        callback: Callable[[], None],
        on_control: Callable[[], None] | None = None,
    ) -> Notifier:
        """Call ``callback`` (ids never payloads) when a row becomes ready on ``queues``, and
        ``on_control`` when an operator paused or resumed a queue (and once on listening, for
        what it missed); polling stays the fallback, so a lost notification only delays."""

    # fleet-wide queue controls: read by workers once a poll and when told, never per claim
    def pause_queue(self, queue: str, by: str | None) -> QueueState:
        """Paused from now on, for every worker; pausing a paused queue keeps its first pause."""

    def resume_queue(self, queue: str) -> QueueState:
        """No longer paused; resuming a queue that is not paused changes nothing."""

    def queue_controls(self) -> list[QueueState]:
        """Every queue an operator ever set, by name; reads only."""

    def paused_queues(self) -> frozenset[str]:
        """The names of the paused queues; reads only."""

    def set_queue_limit(self, queue: str, concurrency: int | None) -> QueueState:
        """At most ``concurrency`` runs of ``queue`` at once, fleet-wide (None: no cap)."""

    def queue_limits(self) -> dict[str, int]:
        """The operators' caps by queue; reads only."""

    def pause_key(self, key: str, delay: float) -> None:
        """No run of limit key ``key`` is claimed for ``delay`` seconds (``RateLimited``)."""

    def key_usage(self, limit: int = 500) -> list[tuple[str, Any, int, list[Any]]]:
        """(key, paused until, running, recorded starts) per limit key used within a day."""

    def prune_limit_keys(self, windows: Mapping[str, float], idle_for: float) -> int:
        """Delete the state of each limit key with no run waiting or running, no pause in
        force, no start inside its job's window (``windows``: rate window by job name) and
        untouched for ``idle_for`` seconds; how many went. A key a claim holds is left for the
        next prune."""

    # steps and events (SPEC §4)
    @property
    def steps(self) -> StepStore:
        """Step records of runs; writes fenced like settles, times on the store's clock."""

    @property
    def events(self) -> EventStore:
        """Published events; times on the store's clock."""

    @property
    def leases(self) -> LeaseStore | None:
        """Fleet concurrency slots; None when this driver cannot enforce them (SPEC WORK-02)."""

    @property
    def backfills(self) -> BackfillLedger | None:
        """The backfill ledger; None runs passes with no bookkeeping (SPEC BF-07)."""

    @property
    def rollups(self) -> RollupStore:
        """The per-minute rollup its settles write (rollup.py): read and pruned here."""

    @property
    def depths(self) -> DepthStore:
        """Queue depth sampled once a minute for the fleet (``x_queue_depth``)."""

    @property
    def batches(self) -> BatchStore:
        """Batches and their counts (``Batch``, issue 32)."""

    # operator actions (SPEC CANCEL-*, INSP-06, DESIGN Q-03/04/08/09)
    def cancel(self, job_id: UUID, reason: str | None) -> JobSnapshot:
        """Cancel a live job; a cancelled one is returned as is. Raises JobNotFoundError or
        JobNotCancellableError (done/dead/failed)."""

    def run_now(self, job_id: UUID) -> JobSnapshot:
        """Make a waiting (ready or delayed) job due now: its run_at moved to now (an earlier one
        kept) and its queue woken. Raises JobNotFoundError, or JobNotWaitingError for a job that
        runs, is parked or has ended (issue 42)."""

    def requeue(self, job_id: UUID, *, from_step: str | None, force: bool) -> JobSnapshot:
        """Make a dead/failed (or, with force, cancelled) job ready again: attempt 0, run_at now,
        same run_id; ``from_step`` deletes that step and every step recorded after it."""

    def preflight(self, alias: str, table: str = "x_jobs") -> None:
        """Before a role starts: raise one clear ``DriverUnavailableError`` when database
        ``alias`` cannot be reached or has no ``table``, instead of a traceback later."""

    def age(self, seconds: float, *, only: Collection[str] = AGED) -> None:
        """Test support: make every stored time ``seconds`` earlier, the same as that much
        time passing, for the families in ``only`` (``"jobs"`` — rows and the workers'
        presence —, ``"steps"``, ``"events"``). ``django_xjobs.testing`` and the test harness
        move time only through this, on either driver."""

    def event_store(self, alias: str) -> EventStore:
        """The events published on database ``alias`` (``publish_event(using=...)``): this
        driver's own ``events`` when ``alias`` is its database."""

    def outbox_store(self, alias: str, claim_lease: Any = None) -> OutboxStore:
        """The outbox that stages enqueues made inside ``atomic()`` on database ``alias``;
        ``claim_lease`` (a duration) overrides ``XJOBS["OUTBOX_CLAIM_LEASE"]`` for its relay."""

    def scheduler_store(self) -> SchedulerStore:
        """The cron scheduler's watermarks and leader lease, beside these jobs."""

    def prune(
        self, *, older_than: float, states: Sequence[str], dry_run: bool = False
    ) -> dict[str, int]:
        """Delete jobs in the finished ``states`` last updated over ``older_than`` seconds ago,
        with their steps; the count per state (with ``dry_run``: what would go, nothing does)."""

    def close(self) -> None:
        """Let go of connections and listeners this driver opened."""


def check_claim_args(queues: Sequence[str], limit: int, visibility_timeout: float) -> None:
    """Both drivers refuse the same claims (closes the SPEC DRV-05 empty-queue-list gap)."""
    if isinstance(queues, str) or not queues:
        raise InvariantError(
            f"claim needs a non-empty list of queue names, got {queues!r}", hint='e.g. ["default"]'
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvariantError(f"claim limit={limit!r} must be a positive integer")
    if not 0 < visibility_timeout <= MAX_SECONDS:
        raise InvariantError(
            f"visibility_timeout={visibility_timeout!r} must be positive and at most "
            f"{MAX_SECONDS:.0f}s ({MAX_TEXT})",
            hint="a lease is renewed every third of it; minutes are usual",
        )


#: the fields of an enqueue request one call usually shares across its whole batch (one job,
#: one set of options): sent once, not as an array with the same value in every element
_SHARED = operator.attrgetter(
    "name",
    "queue",
    "max_attempts",
    "priority",
    "run_at",
    "delay",
    "tenant_id",
    "enqueued_by",
    "traceparent",
    "expires_at",
    "expires_in",
)


def row_by_row(requests: Iterable[EnqueueRequest]) -> bool:
    """Whether any of ``requests`` must be decided on its own (a ``replace`` reads the live
    holder first; an ``after`` names its dependencies): such a batch is enqueued one by one."""
    return any(r.replace or r.after is not None for r in requests)


def refuse_row_by_row(requests: Sequence[EnqueueRequest]) -> None:
    """``enqueue_chunks`` takes plain requests only (``row_by_row``)."""
    if row_by_row(requests):
        raise InvariantError(
            f"job {requests[0].name!r}: enqueue_chunks takes plain requests",
            hint="enqueue a replace or an after one by one (enqueue_many)",
        )


def shared_columns(requests: Sequence[EnqueueRequest]) -> dict[str, Any] | None:
    """The per-call columns of ``requests`` as single values when every request has the same
    ones (``enqueue_many`` on one job), else None (a relay's batch of many jobs)."""
    first = _SHARED(requests[0])
    if any(_SHARED(request) != first for request in requests):
        return None
    (
        name,
        queue,
        max_attempts,
        priority,
        run_at,
        delay,
        tenant_id,
        enqueued_by,
        traceparent,
        expires_at,
        expires_in,
    ) = first
    return {
        "expires_at": expires_at,
        "expires_in": expires_in,
        "name": name,
        "queue": queue,
        "max_attempts": max_attempts,
        "priority": priority,
        "run_at": run_at,
        "delay": delay or 0.0,
        "tenant": tenant_id,
        "enqueued_by": enqueued_by,
        "traceparent": traceparent,
    }


def request_columns(requests: Sequence[EnqueueRequest]) -> dict[str, Any]:
    """The columns of many enqueue requests, one array each in request order, as the multi-row
    statements (``enqueue_many``, the outbox's ``stage_many``) take them; the inputs go as one
    JSON array (a text array of JSON would be quoted element by element)."""
    return {
        "names": [r.name for r in requests],
        "queues": [r.queue for r in requests],
        "inputs": "[" + ",".join(r.input_json for r in requests) + "]",
        "keys": [r.idempotency_key for r in requests],
        "max_attempts": [r.max_attempts for r in requests],
        "priorities": [r.priority for r in requests],
        "run_ats": [r.run_at for r in requests],
        "delays": [r.delay or 0.0 for r in requests],
        "tenants": [r.tenant_id for r in requests],
        "enqueued_by": [r.enqueued_by for r in requests],
        "traceparents": [r.traceparent for r in requests],
        "expires_ats": [r.expires_at for r in requests],
        "expires_ins": [r.expires_in for r in requests],
    }


# --- the outbox store (SPEC §9): what it does, and the row it hands the relay


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


class OutboxStore(Protocol):
    """Staged enqueues. A row's id is the job id its enqueue returned (SPEC OUTBOX-02)."""

    claim_lease: float
    #: True when ``stage`` writes in the caller's transaction (a rollback takes the row away);
    #: False when the store cannot, and the row is staged only once the transaction commits.
    transactional: bool

    def stage(self, request: EnqueueRequest, *, notify: bool = True) -> UUID:
        """Write ``request`` as an unpublished row whose id is ``request.id`` (minted when None)
        and is the id of the job it publishes as; returns that id. ``notify=False``: an earlier
        row of the same transaction already woke the relays."""

    def stage_many(self, requests: Sequence[EnqueueRequest]) -> None:
        """``stage`` for many requests, each with its ``id`` set, in one write."""

    def notify_on_staged(self, callback: Callable[[], None]) -> Notifier | None:
        """Call ``callback`` when a commit staged rows here, from a listener this returns (stop
        it with ``stop()``); None when this store cannot notify (a pooler, memory): poll."""

    def publish_ids(self, driver: JobDriver, ids: Sequence[UUID], token: str) -> int:
        """Claim the unpublished rows among ``ids`` under ``token`` and publish them, a bounded
        chunk at a time (on the jobs' own database: claim, insert and mark in one transaction,
        so a failure leaves the chunk to the relay untouched). Returns how many were published."""

    def claim(self, limit: int, token: str) -> list[OutboxRow]: ...

    def claim_ids(self, ids: Sequence[UUID], token: str) -> list[OutboxRow]: ...

    def release(self, ids: Sequence[UUID], token: str) -> int: ...

    def publishes_together(self, driver: JobDriver) -> bool:
        """Whether ``publish_claimed`` can commit a batch's jobs and marks as one transaction
        with ``driver`` (the jobs live on this store's database)."""

    def publish_claimed(
        self, driver: JobDriver, rows: Sequence[OutboxRow], token: str
    ) -> set[UUID]:
        """Publish ``rows``, claimed under ``token``, in one transaction: mark the rows still
        ours, insert their jobs in ``rows`` order, record collapses. Returns the ids marked (a
        row missing was taken by another relay). Raises with nothing published on a failure.
        Only when ``publishes_together(driver)``."""

    def publish(self, driver: JobDriver, row: OutboxRow, token: str) -> tuple[EnqueueResult, bool]:
        """Enqueue ``row`` and mark it published under ``token``, recording the job it became
        (itself, or the live duplicate it collapsed into). Returns the enqueue's result and
        whether the mark landed (False: another relay holds the row now)."""

    def resolve(self, job_id: UUID) -> UUID | None:
        """The job a published row with this id collapsed into, if it collapsed (None when it is
        its own job, unpublished, or unknown)."""

    def pending(self) -> tuple[int, float]:
        """(unpublished rows, age in seconds of the oldest), quarantined rows left out."""

    def quarantine(self, row_id: UUID, token: str, code: str, error: str) -> bool:
        """Keep the row, claimed under ``token``, out of every later batch with ``error``
        (issue 24). False when the row is no longer ours."""

    def quarantined(self, limit: int = 100) -> list[QuarantinedRow]:
        """The quarantined rows, oldest quarantine first."""

    def quarantined_count(self) -> int: ...

    def unquarantine(self, row_id: UUID) -> bool:
        """Hand a quarantined row back to the relay (False: no quarantined row has this id)."""

    def discard(self, row_id: UUID) -> bool:
        """Delete a quarantined row (False: no quarantined row has this id)."""

    def prune(self, retention: float) -> int: ...


# --- the scheduler store: a forward-only watermark per cron and an expiring leader lease


#: the lease key the scheduler role's leader holds (read by the metrics and the admin too)
LEADER_KEY = "scheduler"


class NotLeaderError(Exception):
    """The dispatch found this scheduler no longer leads; its transaction rolls back."""


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


class SchedulerStore(Protocol):
    """Watermarks and the leader lease; every time is the store's own clock (the database's)."""

    def watermark(self, cron: str) -> datetime | None:
        """The last occurrence of ``cron`` that fired, or None before its first."""

    def mark_fired(self, cron: str, at: datetime) -> None:
        """Move the watermark forward to ``at``; never backward."""

    def acquire(self, key: str, holder: str, ttl: float) -> bool:
        """Take or renew the lease on ``key`` for ``ttl`` seconds; False while another holds it."""

    def confirm(self, key: str, holder: str) -> None:
        """Raise NotLeaderError unless ``holder`` still holds an unexpired lease on ``key``."""

    def release(self, key: str, holder: str) -> None:
        """Give the lease up, only ``holder``'s own."""

    def leader(self, key: str) -> str | None:
        """The holder of the unexpired lease on ``key``, if any."""

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """Dispatched jobs and the watermark advance commit together (DESIGN Q-07)."""

    def pause_cron(self, cron: str, by: str | None) -> CronState:
        """Paused from now on; pausing a paused cron keeps its first pause."""

    def resume_cron(self, cron: str) -> CronState:
        """No longer paused; the watermark stays, so the next round catches up by the cron's rule."""

    def mark_run(self, cron: str, key: str) -> datetime | None:
        """Record a "run now" under ``key``; None when ``key`` is already the latest one."""

    def cron_controls(self) -> list[CronState]:
        """Every cron an operator ever set, by name; reads only."""

    def paused_crons(self) -> frozenset[str]:
        """The names of the paused crons; reads only."""
