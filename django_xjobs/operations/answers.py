"""What the operator calls answer: frozen values that still read as the JSON they print.

Each answer is a frozen dataclass whose fields hold JSON-ready values (ids and times as text,
durations in seconds, lists as lists), so a typed caller reads ``trace.state`` and
``trace.steps[0].name`` while ``trace["state"]`` and ``trace["steps"][0]["name"]``, the shape
documented since the first release, keep answering. ``to_json()`` is the plain document the
``--json`` output prints. User payloads (a job's ``input`` and ``result``, a step's ``output``,
``progress``) stay the plain JSON they were stored as.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar


class Answer:
    """A frozen dataclass that also answers as the dict it replaced: ``answer["field"]``,
    ``answer.get("field")``, ``"field" in answer``, ``keys()``, ``items()``, ``{**answer}``,
    ``==`` a dict, and ``to_json()``. A field listed in ``_absent_when_none`` is left out of all of these while it
    is None, as the dict left its key out."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    _absent_when_none: ClassVar[frozenset[str]] = frozenset()

    def keys(self) -> list[str]:
        """The field names, in order, less those left out while None."""
        return [
            f.name
            for f in dataclasses.fields(self)
            if f.name not in self._absent_when_none or getattr(self, f.name) is not None
        ]

    def __getitem__(self, key: str) -> Any:
        if isinstance(key, str) and key in self.keys():
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: object = None) -> Any:
        """The field ``key``'s value, as ``dict.get`` answers (``default`` for no such key)."""
        return getattr(self, key) if key in self.keys() else default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self.keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def items(self) -> list[tuple[str, Any]]:
        """(key, value) for each of ``keys()``; nested answers stay answers."""
        return [(key, getattr(self, key)) for key in self.keys()]

    def values(self) -> list[Any]:
        """The value of each of ``keys()``."""
        return [getattr(self, key) for key in self.keys()]

    def to_json(self) -> dict[str, Any]:
        """The answer as plain JSON, nested answers included, keys in field order."""
        return {key: _plain(getattr(self, key)) for key in self.keys()}

    def __eq__(self, other: object) -> bool:
        """Equal to an answer of its kind holding the same values, and to the dict it reads as
        (``trace["steps"][0] == {"name": "load", ...}`` held when answers were dicts); unhashable,
        as a dict is."""
        if isinstance(other, Answer):
            return type(self) is type(other) and self.to_json() == other.to_json()
        if isinstance(other, dict):
            return self.to_json() == other
        return NotImplemented


def _plain(value: object) -> object:
    if isinstance(value, Answer):
        return value.to_json()
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def json_default(value: object) -> dict[str, Any]:
    """``json.dumps``'s ``default=`` for a document that holds answers: each dumps as its
    ``to_json()``; anything else JSON has no form for is refused, as without it."""
    if isinstance(value, Answer):
        return value.to_json()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# --- jobs ---------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class StepTrace(Answer):
    """One recorded step of a run: ``duration`` in seconds once it completed."""

    name: str
    status: str
    started_at: str | None
    completed_at: str | None
    wake_at: str | None
    duration: float | None
    attempts: int
    error: str | None
    output: Any


@dataclass(frozen=True, eq=False)
class AttemptTrace(Answer):
    """One failed attempt (or snooze) of a job's history, oldest first in its trace."""

    attempt: int
    at: str | None
    code: str | None
    message: str
    exception: str
    traceback: str
    outcome: str


@dataclass(frozen=True, eq=False)
class BackfillSection(Answer):
    """A backfill pass's ledger row in its job's trace; a pass not started yet reads status
    None and zero counts."""

    name: str
    status: str | None
    environment: str | None
    rows: int
    pages: int
    cursor: str | None
    started_at: str | None
    completed_at: str | None
    error: str | None


@dataclass(frozen=True, eq=False)
class Dependencies(Answer):
    """The jobs a job runs after (``using(after=...)``), how many are not done yet, the one
    that failed it, and the jobs waiting for it."""

    after: list[str]
    waiting_on: int | None
    failed: str | None
    run_anyway: bool | None
    dependants: list[str]


@dataclass(frozen=True, eq=False)
class JobTrace(Answer):
    """A job with its step trace, retry schedule and failed attempts (``inspect_job``, and what
    ``cancel_job``, ``retry_job`` and ``run_job_now`` answer). ``collapsed_from`` is there only
    when the id asked for was a staged enqueue that collapsed into this job at publish."""

    _absent_when_none: ClassVar[frozenset[str]] = frozenset({"collapsed_from"})

    id: str
    name: str
    queue: str
    state: str
    attempt: int
    max_attempts: int
    priority: int
    idempotency_key: str
    run_id: str
    run_at: str | None
    created_at: str | None
    updated_at: str | None
    started_at: str | None
    last_attempted_at: str | None
    attempted_by: str | None
    last_error: str | None
    stop_reason: str | None
    input: Any
    result: Any
    tenant_id: str | None
    traceparent: str | None
    enqueued_by: str | None
    steps: list[StepTrace]
    retry_delays: list[float]
    attempts: list[AttemptTrace]
    backfill: BackfillSection | None
    expires_at: str | None
    snoozes: int
    progress: dict[str, Any] | None
    dependencies: Dependencies | None
    #: the version of its job's code the run started under (None: not claimed yet; its first
    #: claim stamps the version its worker declares), and whether a worker of a newer version
    #: parked it (issue 44)
    version: int | None = None
    parked: bool = False
    collapsed_from: str | None = None


@dataclass(frozen=True, eq=False)
class JobSummary(Answer):
    """A job without its trace, as ``list_jobs`` lists it."""

    id: str
    name: str
    queue: str
    state: str
    attempt: int
    max_attempts: int
    stop_reason: str | None
    last_error: str | None
    run_at: str | None
    updated_at: str | None
    started_at: str | None
    progress: dict[str, Any] | None


@dataclass(frozen=True, eq=False)
class DeadLetter(Answer):
    """A ``dead`` job as ``inspect_dead_letters`` lists it, with the command that retries it."""

    id: str
    name: str
    queue: str
    attempt: int
    last_error: str | None
    stop_reason: str | None
    failed_at: str
    retry_command: str


# --- fleet --------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class QueueDepthRow(Answer):
    """One queue's counts by state, its oldest ready job's age, its pause and its cap."""

    queue: str
    ready: int
    delayed: int
    running: int
    suspended: int
    dead: int
    oldest_ready_seconds: float
    paused: bool
    limit: int | None
    #: when the pause ends by itself (``pause_queue(until=)``, ISO), None without an end
    paused_until: str | None = None


@dataclass(frozen=True, eq=False)
class QueuesReport(Answer):
    """``inspect_queues``: the driver's name, a row per queue, totals by state, the oldest
    ready job's age across them, and where they were read (``read_from``)."""

    driver: str
    queues: list[QueueDepthRow]
    totals: dict[str, int]
    oldest_ready_seconds: float
    #: where the figures were read and how old they are (``drivers/reading.py``'s
    #: ``ReadSource``: database, replica, standby, lag_seconds, problem; SPEC READ-02)
    read_from: dict[str, object] | None = None


@dataclass(frozen=True, eq=False)
class WorkerReport(Answer):
    """A worker's presence row; ``state`` is alive, lapsed or exited."""

    id: str
    host: str
    pid: int
    queues: list[str]
    started_at: str | None
    last_seen: str | None
    expires_at: str | None
    in_flight: int
    alive: bool
    stopped_at: str | None
    state: str


# --- outbox -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class OutboxDatabase(Answer):
    """One outbox database's backlog."""

    pending: int
    oldest_pending_seconds: float
    quarantined: int


@dataclass(frozen=True, eq=False)
class QuarantinedEntry(Answer):
    """A quarantined outbox row: its publish failed for a reason that fails the same way again."""

    id: str
    database: str
    job: str
    queue: str
    tenant_id: str | None
    staged_at: str | None
    quarantined_at: str | None
    error_code: str
    error: str
    key_bytes: int
    tenant_bytes: int | None
    name_bytes: int
    key_start: str


@dataclass(frozen=True, eq=False)
class OutboxReport(Answer):
    """``inspect_outbox`` (and what ``retry_outbox_entry`` and ``discard_outbox_entry``
    answer): pending rows and their oldest's age over every outbox database, the quarantined
    rows, and each database's own counts."""

    pending: int
    oldest_pending_seconds: float
    quarantined: int
    entries: list[QuarantinedEntry]
    databases: dict[str, OutboxDatabase]


#: what retrying or discarding a quarantined row answers: the outbox after it
OutboxAction = OutboxReport


# --- crons, batches, backfills -----------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CronReport(Answer):
    """A declared cron: its schedule, its pause, its last firing and its next fire times."""

    name: str
    schedule: str
    seconds: str | None
    tz: str
    catch_up: str
    max_catch_up: int | None
    jobs: list[str]
    paused: bool
    paused_at: str | None
    paused_by: str | None
    last_fired: str | None
    next_fires: list[str]


@dataclass(frozen=True, eq=False)
class KeyUseReport(Answer):
    """A limit key used within a day (``inspect_limits``): its job and the key as rendered, what
    the job declares (``concurrency``, ``rate_limit`` as written), its runs now, its starts inside
    the rate window, and a ``RateLimited`` pause not yet over (ISO time, else None)."""

    job: str
    key: str
    running: int
    concurrency: int | None
    rate_limit: str | None
    starts_in_window: int
    paused_until: str | None


@dataclass(frozen=True, eq=False)
class BatchCallbackReport(Answer):
    """A batch callback's job: when it runs (``on``), its name, id and queue."""

    on: str
    name: str
    job_id: str
    queue: str


@dataclass(frozen=True, eq=False)
class BatchMember(Answer):
    """A member of a batch: its id, and its name and state while its row exists."""

    id: str
    name: str | None
    state: str | None


@dataclass(frozen=True, eq=False)
class BatchReport(Answer):
    """A batch's counts, state and callbacks (``inspect_batch``, with ``members``; ``cancel_batch``
    adds ``cancelled_now``). Absent keys stay absent: ``members`` only where the call lists them,
    ``cancelled_now`` only from a cancel."""

    _absent_when_none: ClassVar[frozenset[str]] = frozenset({"members", "cancelled_now"})

    id: str
    state: str
    total: int
    pending: int
    done: int
    dead: int
    failed: int
    cancelled: int
    input: Any
    created_at: str
    closed_at: str | None
    completed_at: str | None
    callbacks: list[BatchCallbackReport]
    members: list[BatchMember] | None = None
    cancelled_now: int | None = None


@dataclass(frozen=True, eq=False)
class BackfillPass(Answer):
    """A backfill pass's ledger row."""

    run_id: str
    job_id: str | None
    status: str
    environment: str | None
    rows: int
    pages: int
    cursor: str | None
    started_at: str | None
    completed_at: str | None
    error: str | None


@dataclass(frozen=True, eq=False)
class BackfillReport(Answer):
    """A declared backfill: its declaration, whether it runs and is pending here, and its latest
    pass in any environment (None before the first)."""

    name: str
    environments: list[str] | None
    batch: int
    rate: float
    requires: str | None
    queue: str
    runs_here: bool
    pending: bool
    latest: BackfillPass | None


# --- bulk actions and the audit trail (issue 45) ----------------------------------------------


@dataclass(frozen=True, eq=False)
class BulkResult(Answer):
    """What a bulk verb did (or, with ``dry_run``, would do): ``matched`` jobs the filter
    admitted in the states the verb acts on, ``changed`` of them, ``skipped`` ones that moved
    on meanwhile (settled, retried, cancelled by someone else) or whose key a live job holds;
    ``sample`` is a few of the matched jobs (a dry run's look before acting), ``note`` says why
    nothing was done when nothing was."""

    verb: str
    filter: dict[str, Any]
    dry_run: bool
    matched: int
    changed: int
    skipped: int
    batches: int
    sample: list[JobSummary]
    note: str | None
    #: the audit record of a call that acted (``inspect_action`` reads it back)
    audit_id: str | None = None


@dataclass(frozen=True, eq=False)
class AuditEntry(Answer):
    """One operator action of the audit trail, newest first in ``inspect_audit``; a bulk
    action a background job does also says where it is (``status``: queued, running, done,
    failed; None for an action done at once) and how far of the ``expected`` count."""

    id: str
    at: str | None
    actor: str
    verb: str
    job_id: str | None
    target: str | None
    filter: dict[str, Any] | None
    reason: str | None
    matched: int | None
    changed: int | None
    skipped: int | None
    status: str | None = None
    expected: int | None = None
    started_at: str | None = None
    finished_at: str | None = None
    error: str | None = None
    by_job: str | None = None


# --- events -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EventSummary(Answer):
    """A live event as ``list_events`` lists it: who it was for, how old it is on the store's
    clock, and what its publish did (issue 43): waiting runs ``released``, jobs ``started`` by
    ``on_event`` declarations, live runs ``cancelled`` by ``cancel_on`` ones, and how many
    ``on_event`` declarations it ``refused`` (``inspect_event`` says which, and why)."""

    id: str
    name: str
    tenant_id: str | None
    correlation_key: str | None
    published_at: str
    expires_at: str
    age_seconds: float
    released: int
    started: int
    cancelled: int
    refused: int


@dataclass(frozen=True, eq=False)
class EventRefusal(Answer):
    """An ``on_event`` declaration an event could not start: the job, the coded error's code
    and its message (the publish itself committed)."""

    job: str
    code: str
    message: str


@dataclass(frozen=True, eq=False)
class EventReport(EventSummary):
    """One live event (``inspect_event``): an ``EventSummary`` with its ``payload`` (values
    under ``XJOBS["REDACT_KEYS"]`` masked unless revealed) and each of its ``refusals``."""

    payload: Any
    refusals: list[EventRefusal]


__all__ = [
    "Answer",
    "AttemptTrace",
    "AuditEntry",
    "BackfillPass",
    "BackfillReport",
    "BackfillSection",
    "BatchCallbackReport",
    "BatchMember",
    "BatchReport",
    "BulkResult",
    "CronReport",
    "DeadLetter",
    "Dependencies",
    "EventRefusal",
    "EventReport",
    "EventSummary",
    "JobSummary",
    "JobTrace",
    "OutboxAction",
    "OutboxDatabase",
    "OutboxReport",
    "QuarantinedEntry",
    "QueueDepthRow",
    "QueuesReport",
    "StepTrace",
    "WorkerReport",
    "json_default",
]


@dataclass(frozen=True, eq=False)
class RunVersion(Answer):
    """The live runs of one job started under one version, and what the workers of this code
    do with them (``inspect_versions``, issue 44). ``version`` None: runs not claimed yet (their
    first claim stamps the version the claiming worker declares). ``declared`` and ``old_runs``
    are this code's (None: it does not declare the job). ``fate``: ``current`` (its version),
    ``new`` (not started yet), ``replay``, ``restart`` or ``park`` (an older version, by the
    job's ``old_runs``), ``newer`` (a version this code is older than: none of its workers runs
    it) or ``undeclared`` (a job this code does not declare)."""

    job: str
    version: int | None
    declared: int | None
    old_runs: str | None
    running: int
    waiting: int
    parked: int
    fate: str

    @property
    def blocks(self) -> bool:
        """Whether a deploy of this code would leave these runs parked or run by no worker."""
        return self.fate in ("park", "newer", "undeclared") or self.parked > 0
