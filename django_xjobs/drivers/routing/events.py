"""The routing driver's events: an event is stored where it is published (the caller's
database, in its transaction) and, once that commits, in every other jobs database under the
same id, so the runs waiting for it there are released at once and find it beside them; a
``cancel_on`` reaches the runs of every database (SPEC SHARD-08)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from uuid import UUID

from django.db import connections, transaction

from ..contract import EventRecord, EventStore
from .place import Placement


class RoutedEvents:
    """``EventStore`` of database ``alias`` (where a publish is stored and read back), with
    every other jobs database told of each publish."""

    def __init__(self, place: Placement, alias: str, home: EventStore) -> None:
        self.place, self.alias, self.home = place, alias, home

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
        record = self.home.publish(
            id=id,
            name=name,
            payload=payload,
            correlation_key=correlation_key,
            ttl=ttl,
            tenant_id=tenant_id,
            started=started,
            cancelled=cancelled,
            refused=refused,
        )
        copy = partial(
            self._copy,
            id=id,
            name=name,
            payload=payload,
            correlation_key=correlation_key,
            ttl=ttl,
            tenant_id=tenant_id,
        )
        if self.alias in connections and connections[self.alias].in_atomic_block:
            # a publish rolled back with the caller's transaction was never made: told at commit
            transaction.on_commit(copy, using=self.alias)
            return record
        return _released(record, copy())

    def _copy(
        self,
        *,
        id: UUID,
        name: str,
        payload: object,
        correlation_key: str | None,
        ttl: float,
        tenant_id: str | None,
    ) -> int:
        """The event stored in each other jobs database; how many runs that released there."""
        released = 0
        for alias, driver in self.place.drivers.items():
            if alias == self.alias:
                continue
            stored = driver.events().publish(
                id=id,
                name=name,
                payload=payload,
                correlation_key=correlation_key,
                ttl=ttl,
                tenant_id=tenant_id,
            )
            released += stored.released
        return released

    def cancel(
        self, name: str, *, tenant_id: str | None, match: Mapping[str, object], reason: str
    ) -> tuple[int, list[UUID]]:
        answers = self.place.gather(
            lambda driver: driver.events().cancel(
                name, tenant_id=tenant_id, match=match, reason=reason
            )
        )
        return sum(count for count, _ in answers), [i for _, ids in answers for i in ids]

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
        return self.home.find(
            name,
            after=after,
            correlation_key=correlation_key,
            match=match,
            tenant_id=tenant_id,
            any_tenant=any_tenant,
        )

    def purge(self) -> int:
        return sum(self.place.gather(lambda driver: driver.events().purge()))

    def recent(
        self,
        *,
        name: str | None = None,
        tenant_id: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
    ) -> list[EventRecord]:
        return self.home.recent(name=name, tenant_id=tenant_id, since=since, limit=limit)

    def get(self, event_id: UUID) -> EventRecord | None:
        return self.home.get(event_id)


def _released(record: EventRecord, elsewhere: int) -> EventRecord:
    return replace(record, released=record.released + elsewhere) if elsewhere else record
