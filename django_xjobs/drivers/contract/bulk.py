"""The operator's verbs on many jobs at once (issue 45): the filter that picks them
(``JobFilter``), what is done to them (``BulkAction``), the store that selects and acts on them a
batch at a time (``BulkStore``), and the audit trail every operator action leaves
(``OperatorRecord``, ``AuditStore``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol
from uuid import UUID

from ...payload import JSONValue

#: the verbs a bulk action does, each what its single-job verb does to one job
BulkVerb = Literal["retry", "cancel", "delete", "requeue"]

#: the fields a filter has, in the order they are shown
FILTER_FIELDS = (
    "state",
    "queue",
    "name",
    "tenant_id",
    "error_code",
    "stop_reason",
    "created_after",
    "created_before",
    "updated_after",
    "updated_before",
    "input",
    "ids",
)


@dataclass(frozen=True, eq=True)
class JobFilter:
    """Which jobs a bulk verb acts on: every field given must hold (AND); a field left None
    (``state``: empty) admits every job. ``state`` holds the states a surface shows (a waiting
    row is ``ready`` once due, ``delayed`` until then); ``error_code`` is the code at the start
    of ``last_error`` (``X_TERMINAL`` of ``"X_TERMINAL: ..."``, ``ValueError`` of
    ``"ValueError: ..."``); ``created_*``/``updated_*`` bound a time range (after: at or after,
    before: strictly before); ``input`` is a JSON object the job's input must contain (as
    PostgreSQL's ``@>``); ``ids`` names the jobs themselves (the admin's selected rows)::

        JobFilter(state=("dead",), queue="emails", input={"order_id": 4711})
    """

    state: tuple[str, ...] = ()
    queue: str | None = None
    name: str | None = None
    tenant_id: str | None = None
    error_code: str | None = None
    stop_reason: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    input: Mapping[str, JSONValue] | None = field(default=None, hash=False)
    ids: tuple[UUID, ...] = ()

    def to_json(self) -> dict[str, object]:
        """The fields given, as JSON (times as ISO text); the empty filter is ``{}``."""
        shown: dict[str, object] = {}
        for name in FILTER_FIELDS:
            value = getattr(self, name)
            if value is None or value == ():
                continue
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, tuple):
                value = [str(item) for item in value] if name == "ids" else list(value)
            shown[name] = value
        return shown


@dataclass(frozen=True)
class BulkAction:
    """What a bulk verb does to each job of a batch, fenced on ``states`` (the stored states it
    may act on, the filter's and the verb's together): ``retry`` and ``requeue`` make a job
    ready again (``requeue`` into ``queue``: a waiting job keeps its place there), ``cancel``
    ends a live one with ``reason``, ``delete`` removes a finished one and its steps."""

    verb: BulkVerb
    states: tuple[str, ...]
    reason: str | None = None
    queue: str | None = None


class BulkStore(Protocol):
    """Selecting jobs by a filter and acting on them, a batch of ids per statement: no
    statement holds a lock on more than a batch (SPEC BULK-03)."""

    def match(
        self, where: JobFilter, *, states: Sequence[str], after: UUID | None, limit: int
    ) -> list[UUID]:
        """Up to ``limit`` ids of jobs ``where`` admits whose stored state is one of ``states``,
        greater than ``after``, smallest first (the primary key's order: a walk that resumes
        where it stopped); reads only."""

    def count(self, where: JobFilter, *, states: Sequence[str]) -> int:
        """How many jobs ``match`` would walk through; reads only."""

    def act(
        self, action: BulkAction, ids: Sequence[UUID], where: JobFilter
    ) -> tuple[int, list[UUID]]:
        """Do ``action`` to each of ``ids`` that still matches ``where`` and is in one of
        ``action.states``, in one transaction: how many it changed (a job that moved on
        meanwhile, or whose idempotency key a live job now holds, is left as it is), and the
        jobs a cancel ended that were parked or running, each maybe a parent whose call step
        waits for child jobs (their children are the caller's to cancel)."""


@dataclass(frozen=True)
class OperatorRecord:
    """One operator action as the audit trail keeps it (``x_operator_actions``): who, when,
    which verb, on which job or filter, why, and what it changed."""

    id: UUID
    at: datetime
    actor: str
    verb: str
    job_id: str | None = None
    target: str | None = None
    filter: Mapping[str, object] | None = field(default=None, hash=False)
    reason: str | None = None
    matched: int | None = None
    changed: int | None = None
    skipped: int | None = None
    #: a bulk action done by a background job: queued, running, done or failed (None: done at
    #: once), the count asked about, when its run started and finished, why it failed, the job
    status: str | None = None
    expected: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    by_job: str | None = None


class AuditStore(Protocol):
    """The audit trail of operator actions (issue 45): written once per action, read newest
    first, pruned by age."""

    def record(self, entry: OperatorRecord) -> None:
        """Keep ``entry`` (its ``at`` is replaced by the store's clock)."""

    def recent(self, *, limit: int = 100, verb: str | None = None) -> list[OperatorRecord]:
        """The newest ``limit`` records (of ``verb`` only, when given), newest first; reads only."""

    def get(self, record_id: UUID) -> OperatorRecord | None:
        """One record by its id; reads only."""

    def progress(
        self,
        record_id: UUID,
        *,
        status: str,
        counts: tuple[int, int, int],
        error: str | None = None,
        by_job: str | None = None,
    ) -> None:
        """A background action's progress: its ``status``, its (matched, changed, skipped) so
        far, the error of a failed run (cleared by a later one); ``started_at`` is stamped
        by the store's clock at the first ``running``, ``finished_at`` at ``done`` or
        ``failed`` (cleared while it runs again); ``by_job`` once given is kept."""

    def prune(self, older_than: float) -> int:
        """Delete the records older than ``older_than`` seconds; how many went."""
