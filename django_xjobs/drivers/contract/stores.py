"""The smaller stores a driver hands out: steps, events, backfills, history and batches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from .records import (
    BackfillRecord,
    BatchCallback,
    BatchRecord,
    DepthSample,
    EventRecord,
    HistoryPartition,
    StepRecord,
)
from .requests import EnqueueRequest, EnqueueResult

if TYPE_CHECKING:
    from ...rollup import RollupRow


class StepStore(Protocol):
    @property
    def using(self) -> str:
        """The Django alias of the jobs database. An atomic step opens its transaction there,
        and ``put`` made inside that transaction joins it (issue 17)."""

    def alias(self, job_id: UUID) -> str:
        """The Django alias job ``job_id``'s steps live in: ``using``, unless jobs are routed to
        several databases (issue 48): then the job's own. An atomic step opens its transaction
        there (SPEC SHARD-05)."""

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
        payload: object,
        correlation_key: str | None,
        ttl: float,
        tenant_id: str | None = None,
        started: int = 0,
        cancelled: int = 0,
        refused: Sequence[Mapping[str, str]] = (),
    ) -> EventRecord:
        """Store an event published now on the store's clock, expiring ``ttl`` seconds later,
        releasing the runs waiting for it (SPEC EVT-06); return it as stored (SPEC EVT-01),
        with how many it released and the ``started``, ``cancelled`` and ``refused`` the
        caller's publish did before (SPEC EVT-11)."""

    def cancel(
        self, name: str, *, tenant_id: str | None, match: Mapping[str, object], reason: str
    ) -> tuple[int, list[UUID]]:
        """Cancel every live run of job ``name`` of ``tenant_id`` (None: of no tenant) whose
        input has each field of ``match`` equal, fenced on its live state, as ``cancel`` does
        one job, with ``reason`` as its ``last_error``: how many (SPEC EVT-09), and those that
        were parked or running, each maybe a parent whose call step waits for child jobs
        (their children are the caller's to cancel, SPEC CANCEL-07)."""

    def find(
        self,
        name: str,
        *,
        after: datetime,
        correlation_key: str | None = None,
        match: Mapping[str, object] | None = None,
        tenant_id: str | None = None,
        any_tenant: bool = False,
    ) -> EventRecord | None:
        """The earliest event named ``name`` published at or after ``after`` and not expired on
        the store's clock (SPEC EVT-02), of ``tenant_id`` (None: of no tenant) unless
        ``any_tenant``."""

    def purge(self) -> int:
        """Delete the events expired on the store's clock; how many went (SPEC EVT-04)."""

    def recent(
        self,
        *,
        name: str | None = None,
        tenant_id: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
    ) -> list[EventRecord]:
        """The operator's list (SPEC EVT-13): events not expired on the store's clock, newest
        first (``published_at``, then id), at most ``limit``; only those named ``name``, of
        ``tenant_id`` and published at or after ``since`` where given. Without their payloads
        (``payload`` None): a list reads what each publish did, ``get`` reads one's data."""

    def get(self, event_id: UUID) -> EventRecord | None:
        """The event with this id, payload and all, while it is not expired on the store's
        clock (SPEC EVT-13); None once it has expired or was never published."""


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


class HistoryStore(Protocol):
    """What the fleet looked like over time, for the overview: the per-minute rollup the settles
    write (rollup.py), and the queue depth sampled once a minute for the whole fleet by the
    workers' presence beat (worker/depth.py), never per job and never per page view."""

    def read_rollups(self, since: datetime) -> list[RollupRow]:
        """Each minute from ``since`` on, per queue, job name and outcome, in that order."""

    def prune_rollups(self, older_than: float) -> int:
        """Delete the minutes older than ``older_than`` seconds; how many rows went."""

    def sample_depth(self) -> int:
        """Record this minute's depth per queue with live rows, on the store's clock, unless
        the minute already holds a sample (another worker took it): then nothing is counted or
        written. How many queues were written."""

    def read_depths(self, since: datetime) -> list[DepthSample]:
        """Every depth sample from ``since`` on, in (minute, queue) order."""

    def prune_depths(self, older_than: float) -> int:
        """Delete the depth samples older than ``older_than`` seconds; how many rows went."""

    # the finished jobs' history (issue 46, HIST-*): x_job_history, a partition per state a day
    def partitions(self) -> list[HistoryPartition]:
        """Every day's partition of the history, by state then day; reads only."""

    def ensure_partitions(self, ahead: int) -> list[HistoryPartition]:
        """A partition for each finished state and day from its oldest row still in the jobs
        table (or today) to ``ahead`` days after today, on the store's clock; those created."""

    def move_finished(self, *, grace: float, batch: int = 1000, batches: int | None = None) -> int:
        """Move finished jobs last updated over ``grace`` seconds ago from the jobs table to
        the history, ``batch`` at a time (each batch one write), until a batch is short or
        ``batches`` were moved; how many moved. Their partitions are made first."""

    def drop_partitions(self, retention: Mapping[str, float]) -> list[HistoryPartition]:
        """Drop each day of a state whose end is over ``retention[state]`` seconds ago (a state
        not named is kept), with its jobs' step records; those dropped."""


class BatchStore(Protocol):
    """Batches (issue 32). A member's final state is counted by the driver call that settles it
    (``complete``, ``finish``, ``cancel``), in the same write: the batch's last member to end queues
    its callbacks in that write, exactly once."""

    def open(
        self, batch_id: UUID, *, input: Mapping[str, object], callbacks: Sequence[BatchCallback]
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
        """Close the batch and cancel its live members, as ``JobStore.cancel`` does one job,
        each counted as it ends; how many were cancelled. The members' own children are not
        touched, nor anything the batch is a part of (cancel goes down, never up)."""


class Notifier(Protocol):
    def stop(self) -> None: ...
