"""The driver's verbs on jobs as a whole: enqueue, the operator's actions and housekeeping
(``JobStore``), and the reads (``ReadStore``)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Protocol
from uuid import UUID

from ...payload import JSONValue
from .bulk import AuditStore, BulkStore
from .moves import MoveStore
from .payloads import PayloadStore
from .records import AGED, JobSnapshot, QueueStats, Standing, VersionCount, WorkerSnapshot
from .requests import EnqueueRequest, EnqueueResult
from .tenants import TenantStore


class JobStore(Protocol):
    """Writing jobs: enqueue, the operator's actions on one job, pruning and ageing."""

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

    # operator actions (SPEC CANCEL-*, INSP-06, DESIGN Q-03/04/08/09)
    def cancel(self, job_id: UUID, reason: str | None) -> JobSnapshot:
        """Cancel a live job; a cancelled one is returned as is. Raises JobNotFoundError or
        JobNotCancellableError (done/dead/failed)."""

    def run_now(self, job_id: UUID) -> JobSnapshot:
        """Make a waiting (ready or delayed) job due now: its run_at moved to now (an earlier one
        kept) and its queue woken. Raises JobNotFoundError, or JobNotWaitingError for a job that
        runs, is parked or has ended (issue 42)."""

    def requeue(
        self, job_id: UUID, *, from_step: str | None, force: bool, restart: bool = False
    ) -> JobSnapshot:
        """Make a dead/failed (or, with force, cancelled) job ready again: attempt 0, run_at now,
        same run_id; ``from_step`` deletes that step and every step recorded after it.
        ``restart``: every step is deleted and the run starts again under the version its next
        claim stamps; a run parked by a worker of a newer version is taken too (SPEC VER-09)."""

    def bulk(self) -> BulkStore:
        """The operator's verbs on every job a filter admits, a batch at a time (issue 45)."""

    def audit(self) -> AuditStore:
        """The audit trail of operator actions beside these jobs (issue 45)."""

    def payloads(self) -> PayloadStore:
        """These jobs' stored payloads, rewritten in place by key rotation (issue 46)."""

    def tenants(self) -> TenantStore:
        """A tenant's jobs, steps, events and outbox rows, counted and erased (issue 46)."""

    def moves(self) -> MoveStore:
        """A queue's waiting jobs moved out of this database or into it (issue 48)."""

    def preflight(self, alias: str, table: str = "x_jobs") -> None:
        """Before a role starts: raise one clear ``DriverUnavailableError`` when database
        ``alias`` cannot be reached or has no ``table``, instead of a traceback later."""

    def age(self, seconds: float, *, only: Collection[str] = AGED) -> None:
        """Test support: make every stored time ``seconds`` earlier, the same as that much
        time passing, for the families in ``only`` (``"jobs"`` — rows and the workers'
        presence —, ``"steps"``, ``"events"``). ``django_xjobs.testing`` and the test harness
        move time only through this, on either driver."""

    def prune(
        self, *, older_than: float, states: Sequence[str], dry_run: bool = False
    ) -> dict[str, int]:
        """Delete jobs in the finished ``states`` last updated over ``older_than`` seconds ago,
        with their steps; the count per state (with ``dry_run``: what would go, nothing does)."""


class ReadStore(Protocol):
    """Reading jobs, queues and workers; none of these writes."""

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
        error_code: str | None = None,
        input: Mapping[str, JSONValue] | None = None,
    ) -> list[JobSnapshot]:
        """Rows newest first, filtered, at most ``limit``; reads only. ``state`` is the state
        shown (``states.shown_state``): ``ready`` is every due waiting row, ``delayed`` every
        waiting row not yet due, on the store's clock; ``error_code`` the code before the first
        colon of last_error; ``input`` a JSON object the input contains (``jsonb @>``)."""

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

    def live_versions(self) -> list[VersionCount]:
        """The live runs counted per job and the version each started under (issue 44), by
        name then version (never-claimed first); reads only."""
