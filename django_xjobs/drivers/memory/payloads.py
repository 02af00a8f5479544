"""``PayloadStore`` in process: the PostgreSQL store's walk and fenced swap over the driver's
rows and step records, under its lock (issue 46)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING
from uuid import UUID

from ...payload import JSONValue, decode
from ..contract import StoredPayload

if TYPE_CHECKING:
    from .jobs import MemoryJobs

MARK = "xjobs:fernet"  # crypt.MARK: a store matches the stored shape, as payloads.sql does


def _sealed(value: object) -> bool:
    return isinstance(value, dict) and MARK in value


class MemoryPayloadStore:
    def __init__(self, driver: MemoryJobs) -> None:
        self._driver = driver

    def _all(self, place: str) -> Iterator[StoredPayload]:
        if place == "step_output":
            for run_id, steps in self._driver._steps.items():
                for name, step in steps.items():
                    yield StoredPayload(place, run_id, name, step.output)
            return
        for row in self._driver._rows.values():
            yield StoredPayload(
                place, row.id, "", row.input if place == "job_input" else row.result
            )

    def sealed(
        self, place: str, *, after: tuple[UUID, str] | None, limit: int
    ) -> list[StoredPayload]:
        with self._driver._lock:
            found = [p for p in self._all(place) if _sealed(p.value)]
        found.sort(key=lambda p: (p.row, p.name))
        if after is not None:
            found = [p for p in found if (p.row, p.name) > after]
        return [replace(p, value=decode(p.value)) for p in found[:limit]]  # copies, as read

    def reseal(self, changes: Sequence[tuple[StoredPayload, JSONValue]]) -> int:
        changed = 0
        driver = self._driver
        with driver._lock:
            for payload, new in changes:
                if payload.place == "step_output":
                    step = driver._steps.get(payload.row, {}).get(payload.name)
                    if step is not None and step.output == payload.value:
                        driver._steps[payload.row][payload.name] = replace(step, output=new)
                        changed += 1
                    continue
                row = driver._rows.get(payload.row)
                if row is None:
                    continue
                if (
                    payload.place == "job_input"
                    and row.input == payload.value
                    and isinstance(new, dict)
                ):
                    driver._rows[payload.row] = replace(row, input=new)
                    changed += 1
                elif payload.place == "job_result" and row.result == payload.value:
                    driver._rows[payload.row] = replace(row, result=new)
                    changed += 1
        return changed
