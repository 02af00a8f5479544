"""The outbox store (SPEC §9): what it does for the relay and for ``atomic()`` enqueues."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol
from uuid import UUID

from .jobs import JobStore
from .records import OutboxRow, QuarantinedRow
from .requests import EnqueueRequest, EnqueueResult
from .stores import Notifier


class PublishTarget(Protocol):
    """What a publish enqueues into: a driver's job store, and the alias its jobs live in (a
    ``JobDriver`` is one)."""

    #: the Django alias of the jobs, or None: a publish in the outbox's own database enqueues
    #: in its transaction
    database: str | None

    def jobs(self) -> JobStore:
        """The job store a published row is enqueued in."""


class QuarantineStore(Protocol):
    """An outbox's quarantined rows (issue 24): staged rows whose publish was refused for their
    own values, kept out of every batch until an operator retries or discards them."""

    def hold(self, row_id: UUID, token: str, code: str, error: str) -> bool:
        """Keep the row, claimed under ``token``, out of every later batch with ``error``
        (``code``: the SQLSTATE, else the library's code). False when the row is no longer
        ours."""

    def rows(self, limit: int = 100) -> list[QuarantinedRow]:
        """The quarantined rows, oldest quarantine first."""

    def count(self) -> int:
        """How many rows are quarantined."""

    def retry(self, row_id: UUID) -> bool:
        """Hand a quarantined row back to the relay (False: no quarantined row has this id)."""

    def discard(self, row_id: UUID) -> bool:
        """Delete a quarantined row (False: no quarantined row has this id)."""


class OutboxStore(Protocol):
    """Staged enqueues. A row's id is the job id its enqueue returned (SPEC OUTBOX-02). Its
    claim lease is given when the store is built (``driver.outbox(alias, claim_lease)``)
    and checked there (SPEC OUTBOX-14); its quarantined rows are ``quarantine``'s."""

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

    def publish_ids(self, driver: PublishTarget, ids: Sequence[UUID], token: str) -> int:
        """Claim the unpublished rows among ``ids`` under ``token`` and publish them, a bounded
        chunk at a time (on the jobs' own database: claim, insert and mark in one transaction,
        so a failure leaves the chunk to the relay untouched). Returns how many were published."""

    def claim(self, limit: int, token: str) -> list[OutboxRow]: ...

    def claim_ids(self, ids: Sequence[UUID], token: str) -> list[OutboxRow]: ...

    def release(self, ids: Sequence[UUID], token: str) -> int: ...

    def publishes_together(self, driver: PublishTarget) -> bool:
        """Whether ``publish_claimed`` can commit a batch's jobs and marks as one transaction
        with ``driver`` (the jobs live on this store's database)."""

    def publish_claimed(
        self, driver: PublishTarget, rows: Sequence[OutboxRow], token: str
    ) -> set[UUID]:
        """Publish ``rows``, claimed under ``token``, in one transaction: mark the rows still
        ours, insert their jobs in ``rows`` order, record collapses. Returns the ids marked (a
        row missing was taken by another relay). Raises with nothing published on a failure.
        Only when ``publishes_together(driver)``."""

    def publish(
        self, driver: PublishTarget, row: OutboxRow, token: str
    ) -> tuple[EnqueueResult, bool]:
        """Enqueue ``row`` and mark it published under ``token``, recording the job it became
        (itself, or the live duplicate it collapsed into). Returns the enqueue's result and
        whether the mark landed (False: another relay holds the row now)."""

    def resolve(self, job_id: UUID) -> UUID | None:
        """The job a published row with this id collapsed into, if it collapsed (None when it is
        its own job, unpublished, or unknown)."""

    def pending(self) -> tuple[int, float]:
        """(unpublished rows, age in seconds of the oldest), quarantined rows left out."""

    @property
    def quarantine(self) -> QuarantineStore:
        """The rows this outbox holds out of every batch, for an operator to act on."""

    def prune(self, retention: float) -> int: ...
