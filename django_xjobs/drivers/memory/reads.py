"""The memory driver's reads: jobs, queues and workers, as the PostgreSQL driver reads them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ...payload import JSONValue
from ...states import LIVE_STATES, shown_state
from ..contract import (
    JobFilter,
    JobSnapshot,
    QueueStats,
    Standing,
    VersionCount,
    WorkerSnapshot,
)
from . import standing as memory_standing
from .bulk import admits

if TYPE_CHECKING:
    pass
from .state import MemoryState, _read


class MemoryReads(MemoryState):
    """``ReadStore`` in process; none of these writes."""

    def workers(self) -> list[WorkerSnapshot]:
        with self._lock:
            return self._presence.snapshot(self._now())

    def stats(self) -> list[QueueStats]:
        with self._lock:
            now = self._now()
            buckets: dict[str, dict[str, Any]] = {}
            for row in [*self._rows.values(), *self._archived.values()]:  # HIST-04
                b = buckets.setdefault(
                    row.queue,
                    {
                        "ready": 0,
                        "delayed": 0,
                        "running": 0,
                        "suspended": 0,
                        "dead": 0,
                        "oldest": 0.0,
                    },
                )
                if row.state in ("ready", "delayed"):
                    if row.run_at <= now:
                        b["ready"] += 1
                        b["oldest"] = max(b["oldest"], (now - row.run_at).total_seconds())
                    else:
                        b["delayed"] += 1
                elif row.state in ("running", "suspended", "dead"):
                    b[row.state] += 1
            return [
                QueueStats(
                    queue=q,
                    ready=b["ready"],
                    delayed=b["delayed"],
                    running=b["running"],
                    suspended=b["suspended"],
                    dead=b["dead"],
                    oldest_ready_seconds=b["oldest"],
                )
                for q, b in sorted(buckets.items())
            ]

    def get_job(self, job_id: UUID) -> JobSnapshot | None:
        with self._lock:
            row = self._rows.get(job_id) or self._archived.get(job_id)  # HIST-04
        return None if row is None else _read(row)

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
        where = JobFilter(error_code=error_code, input=input)
        with self._lock:
            now = self._now()
            rows = [
                r
                for r in [*self._rows.values(), *self._archived.values()]  # HIST-04
                if (queue is None or r.queue == queue)
                and (name is None or r.name == name)
                # as the database's filter: by the state shown (DESIGN Q-05)
                and (state is None or shown_state(r.state, r.run_at, now) == state)
                and admits(where, r, (r.state,), now)  # a row's state is checked as read
            ]
        rows.sort(key=lambda r: (r.created_at, r.id), reverse=True)  # SPEC SE-06: newest first
        return [_read(r) for r in rows[:limit]]

    def standing(self, job_id: UUID, *, cap: int, fair: bool = False) -> Standing | None:
        with self._lock:
            return memory_standing.standing(self, job_id, cap=cap, fair=fair)

    def job_states(self, ids: Sequence[UUID]) -> dict[UUID, str]:
        with self._lock:
            states = memory_standing.job_states(self, ids)
            states.update({i: self._archived[i].state for i in ids if i in self._archived})
            return states

    def job_ids_between(self, low: UUID, high: UUID, *, limit: int) -> list[UUID]:
        with self._lock:
            # PostgreSQL orders uuids by their bytes, as Python's UUID compares them
            ids = [*self._rows, *self._archived]  # HIST-04
            return sorted(i for i in ids if low <= i <= high)[:limit]

    def dead_letters(self, *, limit: int = 100) -> list[JobSnapshot]:
        with self._lock:
            rows = [
                r for r in [*self._rows.values(), *self._archived.values()] if r.state == "dead"
            ]
        rows.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        return [_read(r) for r in rows[:limit]]

    def live_versions(self) -> list[VersionCount]:
        counts: dict[tuple[str, int | None], list[int]] = {}
        with self._lock:
            for row in self._rows.values():
                if row.state not in LIVE_STATES:
                    continue
                # as the PostgreSQL read: claimed before runs recorded a version reads as 1
                version = 1 if row.version is None and row.started_at else row.version
                n = counts.setdefault((row.name, version), [0, 0, 0])
                n[0 if row.state == "running" else 2 if row.parked else 1] += 1
        found = [VersionCount(name, v, *n) for (name, v), n in counts.items()]
        return sorted(found, key=lambda c: (c.name, -1 if c.version is None else c.version))
