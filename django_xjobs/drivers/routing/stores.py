"""The routing driver's limits, history and batches: a queue's controls in the alias its jobs
live in, the fleet-wide slots in the jobs database, each batch in one alias with every member
and callback of it (SPEC SHARD-04)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from ...errors import RouteSpansError
from ..contract import (
    BatchCallback,
    BatchRecord,
    DepthSample,
    EnqueueRequest,
    EnqueueResult,
    HistoryPartition,
    JobPause,
    KeyUse,
    QueueState,
)
from .place import Placement

if TYPE_CHECKING:
    from ...rollup import RollupRow


class RoutedLimits:
    """``LimitStore`` over every alias: a queue's pause and cap where its jobs are claimed, a
    limit key's pause everywhere its jobs may be, the fleet slots in the jobs database."""

    def __init__(self, place: Placement) -> None:
        self.place = place

    def pause_queue(self, queue: str, by: str | None, until: datetime | None = None) -> QueueState:
        states = [
            self.place.drivers[alias].limits().pause_queue(queue, by, until)
            for alias in self.place.routing.queue_aliases(queue)
        ]
        return states[0]

    def resume_queue(self, queue: str) -> QueueState:
        states = [
            self.place.drivers[alias].limits().resume_queue(queue)
            for alias in self.place.routing.queue_aliases(queue)
        ]
        return states[0]

    def set_queue_limit(self, queue: str, concurrency: int | None) -> QueueState:
        # a cap in each alias the queue lives in: with a router, each holds it to the cap
        states = [
            self.place.drivers[alias].limits().set_queue_limit(queue, concurrency)
            for alias in self.place.routing.queue_aliases(queue)
        ]
        return states[0]

    def queue_controls(self) -> list[QueueState]:
        # a queue's state where its jobs are claimed, else where it is stored: a pause left in
        # a database a queue moved out of (move_queue) does not stop it where it lives now
        merged: dict[str, QueueState] = {}
        found = self.place.gather(lambda driver: driver.limits().queue_controls())
        for alias, states in zip(self.place.drivers, found, strict=True):
            for state in states:
                if alias in self.place.routing.queue_aliases(state.queue):
                    merged.setdefault(state.queue, state)
        for states in found:
            for state in states:
                merged.setdefault(state.queue, state)
        return sorted(merged.values(), key=lambda state: state.queue)

    def paused_queues(self) -> frozenset[str]:
        # a queue is paused for the fleet where its jobs are claimed (SPEC SHARD-33)
        paused = self.place.gather(lambda driver: driver.limits().paused_queues())
        routing = self.place.routing
        return frozenset(
            queue
            for alias, queues in zip(self.place.drivers, paused, strict=True)
            for queue in queues
            if alias in routing.queue_aliases(queue)
        )

    # an operator's pause of a job or a key is one control for the fleet, kept in the jobs
    # database like the fleet slots; each worker hands it to its claims in every alias
    def pause_job(
        self, name: str, key: str | None, by: str | None, until: datetime | None = None
    ) -> JobPause:
        return self.place.primary.limits().pause_job(name, key, by, until)

    def resume_job(self, name: str, key: str | None) -> bool:
        if key is None:
            return self.place.primary.limits().resume_job(name, key)
        # a key's pause with an end is in the key's row of every alias (pause_key writes each,
        # a RateLimited one where its run was): lifted in each, the jobs database first, every
        # worker told there (SPEC SHARD-56); one that does not answer raises, and a resume
        # made again lifts the rest
        lifted = self.place.gather(lambda driver: driver.limits().resume_job(name, key))
        return any(lifted)

    def job_pauses(self) -> list[JobPause]:
        return self.place.primary.limits().job_pauses()

    def pause_key(self, key: str, delay: float) -> None:
        self.place.gather(lambda driver: driver.limits().pause_key(key, delay))

    def key_usage(self, limit: int = 500) -> list[KeyUse]:
        found = self.place.gather(lambda driver: driver.limits().key_usage(limit))
        return sorted((use for uses in found for use in uses), key=lambda use: use[0])[:limit]

    def prune_limit_keys(self, windows: Mapping[str, float], idle_for: float) -> int:
        pruned = self.place.gather(lambda d: d.limits().prune_limit_keys(windows, idle_for))
        return sum(pruned)

    def acquire_slot(self, key: str, limit: int, ttl: float, holder: str) -> int | None:
        return self.place.primary.limits().acquire_slot(key, limit, ttl, holder)

    def renew_slot(self, key: str, slot: int, ttl: float, holder: str) -> bool:
        return self.place.primary.limits().renew_slot(key, slot, ttl, holder)

    def release_slot(self, key: str, slot: int, holder: str) -> bool:
        return self.place.primary.limits().release_slot(key, slot, holder)

    def held_slots(self, key: str) -> int:
        return self.place.primary.limits().held_slots(key)


class RoutedHistory:
    """``HistoryStore`` over every alias: each keeps its own rollup, depth and history."""

    def __init__(self, place: Placement) -> None:
        self.place = place

    def read_rollups(self, since: datetime) -> list[RollupRow]:
        found = self.place.gather(lambda driver: driver.history().read_rollups(since))
        return [row for rows in found for row in rows]

    def prune_rollups(self, older_than: float) -> int:
        return sum(self.place.gather(lambda d: d.history().prune_rollups(older_than)))

    def sample_depth(self) -> int:
        return sum(self.place.gather(lambda driver: driver.history().sample_depth()))

    def read_depths(self, since: datetime) -> list[DepthSample]:
        found = self.place.gather(lambda driver: driver.history().read_depths(since))
        return sorted((s for samples in found for s in samples), key=lambda s: (s.minute, s.queue))

    def prune_depths(self, older_than: float) -> int:
        return sum(self.place.gather(lambda d: d.history().prune_depths(older_than)))

    def partitions(self) -> list[HistoryPartition]:
        found = self.place.gather(lambda driver: driver.history().partitions())
        return _days(found)

    def ensure_partitions(self, ahead: int) -> list[HistoryPartition]:
        return _days(self.place.gather(lambda d: d.history().ensure_partitions(ahead)))

    def move_finished(self, *, grace: float, batch: int = 1000, batches: int | None = None) -> int:
        moved = self.place.gather(
            lambda d: d.history().move_finished(grace=grace, batch=batch, batches=batches)
        )
        return sum(moved)

    def drop_partitions(self, retention: Mapping[str, float]) -> list[HistoryPartition]:
        return _days(self.place.gather(lambda d: d.history().drop_partitions(retention)))


def _days(found: list[list[HistoryPartition]]) -> list[HistoryPartition]:
    """Each alias's partitions of one day as one (the same names in every database)."""
    days = {(p.state, p.day, p.name): p for parts in found for p in parts}
    return [days[key] for key in sorted(days)]


class RoutedBatches:
    """``BatchStore`` over every alias. A batch lives in one: the alias its callbacks and its
    first members route to; a member or callback routed elsewhere is refused (SPEC SHARD-04).
    An opened batch is written at its first ``add`` (or ``close``), once its alias is known."""

    def __init__(self, place: Placement) -> None:
        self.place = place
        self._opened: dict[UUID, tuple[Mapping[str, object], Sequence[BatchCallback]]] = {}
        self._lock = threading.Lock()

    def open(
        self, batch_id: UUID, *, input: Mapping[str, object], callbacks: Sequence[BatchCallback]
    ) -> None:
        aliases = {self.place.routing.alias(c.queue, c.tenant_id) for c in callbacks}
        if len(aliases) > 1:
            raise RouteSpansError(
                f"batch {batch_id}'s callbacks route to databases {', '.join(sorted(aliases))}",
            )
        if aliases:  # its alias is known: written now, as on one database
            self.place.drivers[aliases.pop()].batches().open(
                batch_id, input=input, callbacks=callbacks
            )
            return
        with self._lock:
            self._opened.setdefault(batch_id, (input, callbacks))

    def _home(self, batch_id: UUID) -> str | None:
        for alias, driver in self.place.drivers.items():
            if driver.batches().get(batch_id) is not None:
                return alias
        return None

    def add(self, batch_id: UUID, requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
        groups = self.place.group(requests)
        home = self._home(batch_id)
        wanted = set(groups) | ({home} if home else set())
        if len(wanted) > 1:
            raise RouteSpansError(
                f"batch {batch_id} would span databases {', '.join(sorted(wanted))}: its "
                f"members route to {', '.join(sorted(groups))}"
                + (f" and it lives in {home!r}" if home else ""),
            )
        alias = wanted.pop() if wanted else self.place.routing.default
        batches = self.place.drivers[alias].batches()
        if home is None:
            self._write_open(batch_id, alias)
        return batches.add(batch_id, requests)

    def _write_open(self, batch_id: UUID, alias: str) -> None:
        with self._lock:
            opened = self._opened.pop(batch_id, None)
        if opened is not None:
            input, callbacks = opened
            self.place.drivers[alias].batches().open(batch_id, input=input, callbacks=callbacks)

    def close(self, batch_id: UUID) -> bool:
        home = self._home(batch_id)
        if home is None:  # opened with no member yet: in the jobs database
            home = self.place.routing.default
            self._write_open(batch_id, home)
        return self.place.drivers[home].batches().close(batch_id)

    def get(self, batch_id: UUID) -> BatchRecord | None:
        for found in self.place.gather(lambda driver: driver.batches().get(batch_id)):
            if found is not None:
                return found
        return None

    def recent(self, *, limit: int = 100, open_only: bool = False) -> list[BatchRecord]:
        found = self.place.gather(
            lambda driver: driver.batches().recent(limit=limit, open_only=open_only)
        )
        rows = (row for rows in found for row in rows)
        return sorted(rows, key=lambda row: row.id, reverse=True)[:limit]

    def members(self, batch_id: UUID, *, limit: int = 1000) -> list[UUID]:
        home = self._home(batch_id)
        return (
            []
            if home is None
            else self.place.drivers[home].batches().members(batch_id, limit=limit)
        )

    def open_count(self) -> int:
        return sum(self.place.gather(lambda driver: driver.batches().open_count()))

    def cancel(self, batch_id: UUID, reason: str | None) -> int:
        home = self._home(batch_id) or self.place.routing.default
        return self.place.drivers[home].batches().cancel(batch_id, reason)
