"""The routing driver's stores for an operator's verbs over many jobs: the filter verbs, key
rotation and a tenant's erasure walk every database, merged in the primary key's order, and each
write reaches the database holding the row it names (SPEC SHARD-11). The audit trail stays one,
in the jobs database."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from uuid import UUID

from ...errors import RouteSpansError
from ...payload import JSONValue
from ..contract import BulkAction, JobFilter, PayloadStore, StoredPayload, TenantRows
from .place import Placement


class RoutedBulk:
    """``BulkStore`` over every alias: ids are UUIDv7, unique and time-ordered in every
    database, so the smallest ``limit`` of each alias's walk past ``after`` are the walk's."""

    def __init__(self, place: Placement) -> None:
        self.place = place

    def match(
        self, where: JobFilter, *, states: Sequence[str], after: UUID | None, limit: int
    ) -> list[UUID]:
        found = self.place.gather(
            lambda d: d.jobs().bulk().match(where, states=states, after=after, limit=limit)
        )
        return sorted(i for ids in found for i in ids)[:limit]

    def count(self, where: JobFilter, *, states: Sequence[str]) -> int:
        return sum(self.place.gather(lambda d: d.jobs().bulk().count(where, states=states)))

    def act(
        self, action: BulkAction, ids: Sequence[UUID], where: JobFilter
    ) -> tuple[int, list[UUID]]:
        changed, ended = 0, list[UUID]()
        for alias, driver in self.place.drivers.items():
            held = list(driver.reads().job_states(ids))
            if not held:
                continue
            queue = action.queue
            if queue is not None and alias not in self.place.routing.queue_aliases(queue):
                raise RouteSpansError(
                    f"requeue to queue {queue!r} would move jobs out of database {alias!r}, "
                    "where they live, to a queue claimed from another",
                    hint="move a queue between databases by draining it there and re-routing "
                    "it; requeue within the queues of one database",
                )
            count, stopped = driver.jobs().bulk().act(action, held, where)
            changed, ended = changed + count, ended + stopped
        return changed, ended


class RoutedPayloads:
    """``PayloadStore`` over every alias, walked in (row, name) order."""

    def __init__(self, place: Placement) -> None:
        self.place = place

    def sealed(
        self, place: str, *, after: tuple[UUID, str] | None, limit: int, alias: str | None = None
    ) -> list[StoredPayload]:
        return self._walk(lambda store: store.sealed, place, after, limit, alias)

    def unsealed(
        self, place: str, *, after: tuple[UUID, str] | None, limit: int, alias: str | None = None
    ) -> list[StoredPayload]:
        return self._walk(lambda store: store.unsealed, place, after, limit, alias)

    def _walk(
        self,
        walk: Callable[[PayloadStore], Callable[..., list[StoredPayload]]],
        place: str,
        after: tuple[UUID, str] | None,
        limit: int,
        alias: str | None,
    ) -> list[StoredPayload]:
        """A page of ``place`` in (row, name) order: an outbox database's place where it is
        (``alias``), a jobs database's merged from every one."""
        if alias is not None:
            store = self.place.primary.jobs().payloads()
            found = [walk(store)(place, after=after, limit=limit, alias=alias)]
        else:
            found = self.place.gather(
                lambda driver: walk(driver.jobs().payloads())(place, after=after, limit=limit)
            )
        rows = (row for rows in found for row in rows)
        return sorted(rows, key=lambda row: (row.row, row.name))[:limit]

    def reseal(
        self, changes: Sequence[tuple[StoredPayload, JSONValue]], alias: str | None = None
    ) -> int:
        if alias is not None:
            return self.place.primary.jobs().payloads().reseal(changes, alias)
        # each swap is fenced on the value read: only the database holding the row changes it
        return sum(self.place.gather(lambda d: d.jobs().payloads().reseal(changes)))


class RoutedTenants:
    """``TenantStore`` over every alias: a tenant's rows wherever its jobs were placed."""

    def __init__(self, place: Placement) -> None:
        self.place = place

    def count(self, tenant_id: str) -> TenantRows:
        return sum(self.place.gather(lambda d: d.jobs().tenants().count(tenant_id)), TenantRows())

    def erase(self, tenant_id: str, *, batch: int, running: bool) -> TenantRows:
        erased = self.place.gather(
            lambda d: d.jobs().tenants().erase(tenant_id, batch=batch, running=running)
        )
        return sum(erased, TenantRows())
