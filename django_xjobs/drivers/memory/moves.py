"""``MoveStore`` in process: the PostgreSQL store's page read, written elsewhere and deleted
here, under the driver's lock from the read to the delete (a claim waits for it, as a claim
passes over the locked rows in PostgreSQL), and its write that leaves a job held by id or by
live idempotency key as it is (issue 48)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from ...errors import InvariantError
from ...states import LIVE_STATES
from ..contract import MOVED_STATES, JobSnapshot, MoveHolds, MovingJob, StepRecord

if TYPE_CHECKING:
    from .jobs import MemoryJobs


@dataclass(frozen=True)
class _Held:
    """What this store holds of one job: its row, its run's steps, its limit key."""

    row: JobSnapshot
    steps: tuple[tuple[str, StepRecord], ...]
    limit_key: str | None


def _linked(row: JobSnapshot) -> bool:
    return (
        row.batch_id is not None
        or row.after is not None
        or row.dependants is not None
        or row.waiting_on is not None
    )


class MemoryMoveStore:
    def __init__(self, jobs: MemoryJobs) -> None:
        self._jobs = jobs

    def holds(self, queue: str, *, limit: int = 10) -> MoveHolds:
        jobs = self._jobs
        with jobs._lock:
            rows = [r for r in jobs._rows.values() if r.queue == queue]
            linked = sorted(r.id for r in rows if r.state in MOVED_STATES and _linked(r))
            running = sum(r.state == "running" for r in rows)
            waiting = sum(r.state in MOVED_STATES for r in rows)
        return MoveHolds(running=running, waiting=waiting, linked=tuple(linked[:limit]))

    def move_out(
        self, queue: str, *, limit: int, into: Callable[[Sequence[MovingJob]], object]
    ) -> list[UUID]:
        jobs = self._jobs
        with jobs._lock:
            page = sorted(
                (
                    r
                    for r in jobs._rows.values()
                    if r.queue == queue and r.state in MOVED_STATES and not _linked(r)
                ),
                key=lambda r: r.id,
            )[:limit]
            if not page:
                return []
            into([MovingJob(id=r.id, held=self._held(r)) for r in page])
            for row in page:
                del jobs._rows[row.id]
                jobs._steps.pop(row.run_id, None)
                jobs._limit_keys.pop(row.id, None)
        return [row.id for row in page]

    def _held(self, row: JobSnapshot) -> _Held:
        steps = tuple(self._jobs._steps.get(row.run_id, {}).items())
        return _Held(row=row, steps=steps, limit_key=self._jobs._limit_keys.get(row.id))

    def take(self, jobs: Sequence[MovingJob]) -> list[UUID]:
        store = self._jobs
        written: list[UUID] = []
        with store._lock:
            for job in jobs:
                held = job.held
                if not isinstance(held, _Held):
                    raise InvariantError(
                        f"job {job.id} was read by another kind of store: a move is made "
                        "between two databases of the same driver"
                    )
                row = held.row
                if row.id in store._rows or row.id in store._archived or self._key_held(row):
                    continue
                store._rows[row.id] = row
                if held.steps:
                    store._steps[row.run_id] = dict(held.steps)
                if held.limit_key is not None:
                    store._limit_keys[row.id] = held.limit_key
                written.append(row.id)
            queues = {store._rows[i].queue for i in written}
            woken = [s for s in store._subscriptions if queues & set(s.queues)]
        for sub in woken:
            sub.callback()
        return sorted(written)

    def _key_held(self, row: JobSnapshot) -> bool:
        """A live job here holds ``row``'s idempotency key (the live-key index's conflict)."""
        return any(
            other.state in LIVE_STATES
            and other.name == row.name
            and (other.tenant_id or "") == (row.tenant_id or "")
            and other.idempotency_key == row.idempotency_key
            for other in self._jobs._rows.values()
        )
