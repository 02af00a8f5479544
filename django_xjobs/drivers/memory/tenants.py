"""``TenantStore`` in process: the PostgreSQL store's count and batched erase over the driver's
rows, step records, events and outbox, under the driver's lock (issue 46)."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING
from uuid import UUID

from ...limits.keys import tenant_key
from ..contract import OutboxRow, TenantRows

if TYPE_CHECKING:
    from .jobs import MemoryJobs
    from .steps import MemoryEventStore


class MemoryTenantStore:
    def __init__(
        self,
        jobs: MemoryJobs,
        events: MemoryEventStore,
        outbox: Callable[[], MutableMapping[UUID, OutboxRow]],
    ) -> None:
        self._jobs, self._events, self._outbox = jobs, events, outbox

    def count(self, tenant_id: str) -> TenantRows:
        jobs = self._jobs
        with jobs._lock:
            held = [*jobs._rows.values(), *jobs._archived.values()]  # ERASE-04: the history too
            rows = [r for r in held if r.tenant_id == tenant_id]
            steps = sum(len(jobs._steps.get(r.run_id, {})) for r in rows)
            return TenantRows(
                jobs=len(rows),
                running=sum(r.state == "running" for r in rows),
                steps=steps,
                events=sum(e.tenant_id == tenant_id for e in self._events._events),
                outbox=sum(o.tenant_id == tenant_id for o in self._outbox().values()),
                limit_keys=int(tenant_key(tenant_id) in jobs._key_state),
            )

    def erase(self, tenant_id: str, *, batch: int, running: bool) -> TenantRows:
        jobs = self._jobs
        with jobs._lock:
            doomed = [
                r
                for r in jobs._rows.values()
                if r.tenant_id == tenant_id and (running or r.state != "running")
            ][:batch]
            moved = [r for r in jobs._archived.values() if r.tenant_id == tenant_id][:batch]
            steps = sum(len(jobs._steps.pop(r.run_id, {})) for r in [*doomed, *moved])
            for row in doomed:
                del jobs._rows[row.id]
                jobs._limit_keys.pop(row.id, None)
            for row in moved:
                del jobs._archived[row.id]
            keys = int(jobs._key_state.pop(tenant_key(tenant_id), None) is not None)
            gone = [e for e in self._events._events if e.tenant_id == tenant_id][:batch]
            for event in gone:
                self._events._events.remove(event)
            outbox = self._outbox()
            staged = [k for k, o in outbox.items() if o.tenant_id == tenant_id][:batch]
            for key in staged:
                del outbox[key]
        return TenantRows(
            jobs=len(doomed) + len(moved),
            running=sum(r.state == "running" for r in doomed),
            steps=steps,
            events=len(gone),
            outbox=len(staged),
            limit_keys=keys,
        )
