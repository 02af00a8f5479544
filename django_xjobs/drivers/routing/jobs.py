"""The routing driver's job store and reads: each enqueue written to the alias its queue (and
tenant) routes to, each action on one job sent to the alias holding it, and every read asked of
every alias and merged (SPEC SHARD-03, SHARD-06)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from uuid import UUID

from ...payload import JSONValue
from ..contract import (
    AGED,
    AuditStore,
    BulkStore,
    EnqueueRequest,
    EnqueueResult,
    JobSnapshot,
    JobStore,
    MoveStore,
    PayloadStore,
    QueueStats,
    Standing,
    TenantStore,
    VersionCount,
    WorkerSnapshot,
)
from .operator import RoutedBulk, RoutedPayloads, RoutedTenants
from .place import Placement, answering


class RoutedJobs:
    """``JobStore`` over every alias."""

    def __init__(self, place: Placement) -> None:
        self.place = place
        self._bulk = RoutedBulk(place)
        self._payloads = RoutedPayloads(place)
        self._tenants = RoutedTenants(place)

    def enqueue(self, request: EnqueueRequest) -> EnqueueResult:
        alias = self.place.alias(request)  # SPEC SHARD-03
        self.place.check_after(alias, request)
        return self.place.drivers[alias].jobs().enqueue(request)

    def enqueue_many(self, requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
        return self._spread(requests, lambda jobs, part: jobs.enqueue_many(part))

    def enqueue_chunks(self, chunks: Iterable[Sequence[EnqueueRequest]]) -> list[EnqueueResult]:
        # every chunk is made before anything is written: an error while making one still
        # leaves nothing written; each alias's share is then one transaction there
        requests = [request for chunk in chunks for request in chunk]
        return self._spread(requests, lambda jobs, part: jobs.enqueue_chunks([part]))

    def _spread(
        self,
        requests: Sequence[EnqueueRequest],
        write: Callable[[JobStore, list[EnqueueRequest]], list[EnqueueResult]],
    ) -> list[EnqueueResult]:
        results: list[EnqueueResult | None] = [None] * len(requests)
        for alias, positions in self.place.group(requests).items():
            part = [requests[i] for i in positions]
            for index, result in zip(
                positions, write(self.place.drivers[alias].jobs(), part), strict=False
            ):
                results[index] = result
        return [result for result in results if result is not None]

    def cancel(self, job_id: UUID, reason: str | None) -> JobSnapshot:
        return self.place.owner(job_id).jobs().cancel(job_id, reason)

    def run_now(self, job_id: UUID) -> JobSnapshot:
        return self.place.owner(job_id).jobs().run_now(job_id)

    def requeue(
        self, job_id: UUID, *, from_step: str | None, force: bool, restart: bool = False
    ) -> JobSnapshot:
        jobs = self.place.owner(job_id).jobs()
        return jobs.requeue(job_id, from_step=from_step, force=force, restart=restart)

    def bulk(self) -> BulkStore:
        return self._bulk

    def audit(self) -> AuditStore:
        # one trail of the operators' actions, in the jobs database, whichever jobs they touched
        return self.place.primary.jobs().audit()

    def payloads(self) -> PayloadStore:
        return self._payloads

    def tenants(self) -> TenantStore:
        return self._tenants

    def moves(self) -> MoveStore:
        # a move is made between two aliases' own stores (operations/moves.py); the routing
        # driver's answer is its jobs database's
        return self.place.primary.jobs().moves()

    def preflight(self, alias: str, table: str = "x_jobs") -> None:
        self.place.primary.jobs().preflight(alias, table)

    def age(self, seconds: float, *, only: Collection[str] = AGED) -> None:
        self.place.gather(lambda driver: driver.jobs().age(seconds, only=only))

    def prune(
        self, *, older_than: float, states: Sequence[str], dry_run: bool = False
    ) -> dict[str, int]:
        counts: dict[str, int] = {}
        for each in self.place.gather(
            lambda driver: driver.jobs().prune(
                older_than=older_than, states=states, dry_run=dry_run
            )
        ):
            for state, count in each.items():
                counts[state] = counts.get(state, 0) + count
        return counts


def _newest_first(rows: Iterable[JobSnapshot], limit: int) -> list[JobSnapshot]:
    return sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)[:limit]


class RoutedReads:
    """``ReadStore`` over every alias: each read asks them all and merges (SPEC SHARD-06)."""

    def __init__(self, place: Placement) -> None:
        self.place = place

    def workers(self) -> list[WorkerSnapshot]:
        # a worker's presence is written to every alias; the jobs database's rows are the fleet
        with answering(self.place.routing.default):
            return self.place.primary.reads().workers()

    def stats(self) -> list[QueueStats]:
        merged: dict[str, QueueStats] = {}
        for rows in self.place.gather(lambda driver: driver.reads().stats()):
            for row in rows:
                seen = merged.get(row.queue)
                merged[row.queue] = row if seen is None else _added(seen, row)
        return sorted(merged.values(), key=lambda row: row.queue)

    def get_job(self, job_id: UUID) -> JobSnapshot | None:
        alias = self.place.find(job_id)
        if alias is None:
            return None
        with answering(alias):
            return self.place.drivers[alias].reads().get_job(job_id)

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
        found = self.place.gather(
            lambda driver: driver.reads().list_jobs(
                queue=queue, name=name, state=state, limit=limit, error_code=error_code, input=input
            )
        )
        return _newest_first((row for rows in found for row in rows), limit)

    def job_ids_between(self, low: UUID, high: UUID, *, limit: int) -> list[UUID]:
        found = self.place.gather(lambda d: d.reads().job_ids_between(low, high, limit=limit))
        return sorted(i for ids in found for i in ids)[:limit]

    def dead_letters(self, *, limit: int = 100) -> list[JobSnapshot]:
        found = self.place.gather(lambda driver: driver.reads().dead_letters(limit=limit))
        rows = (row for each in found for row in each)
        return sorted(rows, key=lambda r: (r.updated_at, r.id), reverse=True)[:limit]

    def standing(self, job_id: UUID, *, cap: int, fair: bool = False) -> Standing | None:
        alias = self.place.find(job_id)
        if alias is None:
            return None
        with answering(alias):
            return self.place.drivers[alias].reads().standing(job_id, cap=cap, fair=fair)

    def job_states(self, ids: Sequence[UUID]) -> dict[UUID, str]:
        states: dict[UUID, str] = {}
        for each in self.place.gather(lambda driver: driver.reads().job_states(ids)):
            states.update(each)
        return states

    def live_versions(self) -> list[VersionCount]:
        merged: dict[tuple[str, int | None], VersionCount] = {}
        for rows in self.place.gather(lambda driver: driver.reads().live_versions()):
            for row in rows:
                key = (row.name, row.version)
                seen = merged.get(key)
                merged[key] = (
                    row
                    if seen is None
                    else replace(
                        seen,
                        running=seen.running + row.running,
                        waiting=seen.waiting + row.waiting,
                        parked=seen.parked + row.parked,
                    )
                )
        return sorted(
            merged.values(), key=lambda r: (r.name, r.version is not None, r.version or 0)
        )


def _added(one: QueueStats, other: QueueStats) -> QueueStats:
    """One queue's depth in two databases (a router may place its tenants in each)."""
    return replace(
        one,
        ready=one.ready + other.ready,
        delayed=one.delayed + other.delayed,
        running=one.running + other.running,
        suspended=one.suspended + other.suspended,
        dead=one.dead + other.dead,
        oldest_ready_seconds=max(one.oldest_ready_seconds, other.oldest_ready_seconds),
    )
