"""``PayloadStore`` in process: the PostgreSQL store's walk and fenced swap over the driver's
rows, step records, staged outbox rows and events, under its lock (issue 46). Memory has no
databases: ``alias`` names none."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING
from uuid import UUID

from ...payload import JSONValue, decode
from ..contract import OutboxRow, StoredPayload

if TYPE_CHECKING:
    from .jobs import MemoryJobs
    from .steps import MemoryEventStore

MARK = "xjobs:fernet"  # crypt.MARK: a store matches the stored shape, as payloads.sql does


def _sealed(value: object) -> bool:
    return isinstance(value, dict) and MARK in value


def _clear(p: StoredPayload, status: str = "completed", wake_at: object = None) -> bool:
    """As payloads.sql's ``unsealed_*``: not null, not sealed; of a step, a completed one's
    value only (no wake_at, no call step's children)."""
    if p.value is None or _sealed(p.value):
        return False
    if p.place != "step_output":
        return True
    return (
        status == "completed"
        and wake_at is None
        and not (isinstance(p.value, dict) and "children" in p.value)
    )


class MemoryPayloadStore:
    def __init__(
        self,
        driver: MemoryJobs,
        events: MemoryEventStore,
        outbox_rows: Callable[[], dict[UUID, OutboxRow]],
    ) -> None:
        self._driver = driver
        self._events = events
        self._outbox_rows = outbox_rows

    def _all(self, place: str, clear: bool) -> Iterator[StoredPayload]:
        driver = self._driver
        if place == "step_output":
            for run_id, steps in driver._steps.items():
                for name, step in steps.items():
                    p = StoredPayload(place, run_id, name, step.output)
                    if _clear(p, step.status, step.wake_at) if clear else _sealed(p.value):
                        yield p
            return
        if place == "event_data":
            rows = [StoredPayload(place, e.id, "", e.payload) for e in self._events._events]
        elif place == "outbox_input":
            rows = [
                StoredPayload(place, r.id, "", r.input, r.job) for r in self._outbox_rows().values()
            ]
        else:
            held = driver._archived if place.startswith("history_") else driver._rows
            rows = [
                StoredPayload(
                    place, r.id, "", r.input if place.endswith("_input") else r.result, r.name
                )
                for r in held.values()
            ]
        yield from (p for p in rows if (_clear(p) if clear else _sealed(p.value)))

    def _walk(
        self, place: str, after: tuple[UUID, str] | None, limit: int, clear: bool
    ) -> list[StoredPayload]:
        with self._driver._lock:
            found = list(self._all(place, clear))
        found.sort(key=lambda p: (p.row, p.name))
        if after is not None:
            found = [p for p in found if (p.row, p.name) > after]
        return [replace(p, value=decode(p.value)) for p in found[:limit]]  # copies, as read

    def sealed(
        self, place: str, *, after: tuple[UUID, str] | None, limit: int, alias: str | None = None
    ) -> list[StoredPayload]:
        return self._walk(place, after, limit, clear=False)

    def unsealed(
        self, place: str, *, after: tuple[UUID, str] | None, limit: int, alias: str | None = None
    ) -> list[StoredPayload]:
        return self._walk(place, after, limit, clear=True)

    def reseal(
        self, changes: Sequence[tuple[StoredPayload, JSONValue]], alias: str | None = None
    ) -> int:
        driver = self._driver
        with driver._lock:
            return sum(self._swap(payload, new) for payload, new in changes)

    def _swap(self, payload: StoredPayload, new: JSONValue) -> bool:
        """One fenced swap, under the driver's lock: whether the row still held the value read."""
        driver = self._driver
        if payload.place == "step_output":
            step = driver._steps.get(payload.row, {}).get(payload.name)
            if step is None or step.output != payload.value:
                return False
            driver._steps[payload.row][payload.name] = replace(step, output=new)
            return True
        if payload.place == "event_data":
            events = self._events._events
            for i, event in enumerate(events):
                if event.id == payload.row and event.payload == payload.value:
                    events[i] = replace(event, payload=new)
                    return True
            return False
        if payload.place == "outbox_input":
            staged = self._outbox_rows()
            entry = staged.get(payload.row)
            if entry is None or entry.input != payload.value:
                return False
            staged[payload.row] = replace(entry, input=new)
            return True
        held = driver._archived if payload.place.startswith("history_") else driver._rows
        row = held.get(payload.row)
        if row is None:
            return False
        if payload.place.endswith("_input"):
            if row.input != payload.value or not isinstance(new, dict):
                return False
            held[payload.row] = replace(row, input=new)
            return True
        if row.result != payload.value:
            return False
        held[payload.row] = replace(row, result=new)
        return True
