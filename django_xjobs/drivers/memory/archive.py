"""The memory driver's history of finished jobs (issue 46), as the PostgreSQL driver keeps
``x_job_history``: a partition per finished state and UTC day, made ahead, moved into in
batches after a grace, dropped whole by retention with the step records of its jobs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from ...states import FINISHED_STATES
from ..contract import HistoryPartition

if TYPE_CHECKING:
    from .state import MemoryState


def _name(state: str, day: date) -> str:
    return f"x_job_history_{state}_p{day:%Y%m%d}"


def _day(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


class MemoryArchive:
    def __init__(self, state: MemoryState) -> None:
        self._state = state

    def partitions(self) -> list[HistoryPartition]:
        with self._state._lock:
            days = sorted(self._state._partitions)
        return [HistoryPartition(state=s, day=d, name=_name(s, d)) for s, d in days]

    def ensure(self, ahead: int) -> list[HistoryPartition]:
        created = []
        with self._state._lock:
            today = _day(self._state._now())
            for state in FINISHED_STATES:
                times = [r.updated_at for r in self._state._rows.values() if r.state == state]
                day = min(_day(min(times)), today) if times else today
                while day <= today + timedelta(days=ahead):
                    if (state, day) not in self._state._partitions:
                        self._state._partitions.add((state, day))
                        created.append(
                            HistoryPartition(state=state, day=day, name=_name(state, day))
                        )
                    day += timedelta(days=1)
        return sorted(created, key=lambda p: (p.state, p.day))

    def move(self, *, grace: float, batch: int, batches: int | None) -> int:
        self.ensure(0)
        moved, rounds = 0, 0
        while batches is None or rounds < batches:
            with self._state._lock:
                cutoff = self._state._now() - timedelta(seconds=grace)
                picked = [
                    r.id
                    for r in self._state._rows.values()
                    if r.state in FINISHED_STATES and r.updated_at < cutoff
                ][:batch]
                for job_id in picked:
                    self._state._archived[job_id] = self._state._rows.pop(job_id)
            moved, rounds = moved + len(picked), rounds + 1
            if len(picked) < batch:
                break
        return moved

    def restore(self, job_id: UUID) -> bool:
        """Back from the history into the jobs (the caller holds the state's lock)."""
        row = self._state._archived.pop(job_id, None)
        if row is None:
            return False
        self._state._rows[job_id] = row
        return True

    def drop(self, retention: Mapping[str, float]) -> list[HistoryPartition]:
        dropped = []
        with self._state._lock:
            now = self._state._now()
            for state, day in sorted(self._state._partitions):
                kept = retention.get(state)
                end = datetime.combine(day + timedelta(days=1), time(0), UTC)
                if kept is None or end > now - timedelta(seconds=kept):
                    continue
                for job_id, row in list(self._state._archived.items()):
                    if row.state == state and _day(row.updated_at) == day:
                        del self._state._archived[job_id]
                        self._state._steps.pop(row.run_id, None)
                self._state._partitions.discard((state, day))
                dropped.append(HistoryPartition(state=state, day=day, name=_name(state, day)))
        return dropped
