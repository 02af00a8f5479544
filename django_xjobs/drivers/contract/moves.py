"""A queue's waiting jobs moved from one jobs database to another (issue 48): read a page of
them in the source with all they live by, written in the target, then deleted in the source,
each page locked in the source from its read to its delete so no claim takes a row on its way
(SPEC SHARD-30)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

#: the states a move takes a job in: every one a claim may take it from
MOVED_STATES = ("ready", "delayed", "suspended")


@dataclass(frozen=True)
class MovingJob:
    """One waiting job on its way: its id and what the source store holds of it (its row, its
    steps, its limit key), in the store's own form, which only a store of the same kind
    reads back (``MoveStore.take``)."""

    id: UUID
    held: object


@dataclass(frozen=True)
class MoveHolds:
    """What keeps a queue in its database: its runs running there, and the waiting jobs that
    belong to a batch or to a chain of dependencies (``after=``, children), which live with
    their batch or their chain (SPEC SHARD-31). At most ``limit`` ids of the latter."""

    running: int
    #: its waiting jobs here, linked or not
    waiting: int
    linked: tuple[UUID, ...]


class MoveStore(Protocol):
    """A queue's waiting jobs copied out of this database, or into it."""

    def holds(self, queue: str, *, limit: int = 10) -> MoveHolds:
        """What keeps ``queue``'s jobs here (running runs, linked waiting jobs)."""

    def move_out(
        self, queue: str, *, limit: int, into: Callable[[Sequence[MovingJob]], object]
    ) -> list[UUID]:
        """Up to ``limit`` of ``queue``'s waiting jobs that nothing links, lowest ids first,
        handed to ``into`` (which writes them elsewhere and commits there) and then deleted
        here. The page stays locked from its read to its delete: a claim passes over it, so no
        job runs here once ``into`` wrote it (rows a claim holds are left for the next page).
        An error in ``into`` deletes nothing. Answers the ids deleted."""

    def take(self, jobs: Sequence[MovingJob]) -> list[UUID]:
        """Write ``jobs`` (from a store of the same kind) here with their steps, each one this
        store already holds by id (a move repeated after a crash) or whose live idempotency
        key a job here already holds left as it is. Answers the ids written."""
