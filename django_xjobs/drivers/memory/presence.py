"""The memory driver's worker presence and crash verdict: the PostgreSQL statements' answers.

A re-claimed lapsed row counts as a crash only when its holder is gone: it has no presence row,
or its presence lapsed while another worker beat without a break (so the database was reachable
all along). Otherwise the holder is kept as pending and judged at the next lapse by whether its
presence lapsed by then — an outage that silenced every worker is not a crash.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from ..contract import Presence, WorkerSnapshot

#: presence rows lapsed this long are deleted by the next beat of any worker
REAP_AFTER = timedelta(days=1)


class MemoryPresence:
    def __init__(self) -> None:
        self._rows: dict[str, WorkerSnapshot] = {}
        self._since: dict[str, datetime] = {}

    def renew(self, presence: Presence, ttl: float, now: datetime) -> None:
        for worker_id, row in list(self._rows.items()):
            if worker_id != presence.worker_id and row.expires_at < now - REAP_AFTER:
                del self._rows[worker_id], self._since[worker_id]
        old = self._rows.get(presence.worker_id)
        same = old is not None and (old.host, old.pid) == (presence.host, presence.pid)
        unbroken = same and old is not None and old.last_seen >= now - timedelta(seconds=ttl / 2)
        self._rows[presence.worker_id] = WorkerSnapshot(
            id=presence.worker_id,
            host=presence.host,
            pid=presence.pid,
            queues=tuple(presence.queues),
            started_at=old.started_at if same and old is not None else now,
            last_seen=now,
            expires_at=now + timedelta(seconds=ttl),
            in_flight=presence.in_flight,
            alive=True,
        )
        if not unbroken:
            self._since[presence.worker_id] = now

    def shift(self, delta: timedelta) -> None:
        for worker_id, row in self._rows.items():
            self._rows[worker_id] = replace(
                row,
                started_at=row.started_at - delta,
                last_seen=row.last_seen - delta,
                expires_at=row.expires_at - delta,
            )
            self._since[worker_id] -= delta

    def stop(self, worker_id: str, now: datetime) -> None:
        row = self._rows.get(worker_id)
        if row is not None:
            expires = min(row.expires_at, now)
            self._rows[worker_id] = replace(row, stopped_at=now, expires_at=expires, in_flight=0)

    def stopped(self, worker_id: str | None) -> bool:
        row = self._rows.get(worker_id or "")
        return row is not None and row.stopped_at is not None

    def release(self, worker_id: str) -> None:
        self._rows.pop(worker_id, None)
        self._since.pop(worker_id, None)

    def snapshot(self, now: datetime) -> list[WorkerSnapshot]:
        rows = sorted(self._rows.values(), key=lambda r: (r.started_at, r.id))
        return [replace(r, alive=r.expires_at >= now and r.stopped_at is None) for r in rows]

    def gone(self, worker_id: str | None, now: datetime) -> bool:
        row = self._rows.get(worker_id or "")
        return row is None or row.expires_at < now

    def verdict(
        self, holder: str | None, pending: str | None, now: datetime, visibility_timeout: float
    ) -> tuple[int, str | None]:
        """(crashes to count, the holder left pending) for one lapsed row being re-claimed."""
        crashes = 1 if pending is not None and self.gone(pending, now) else 0
        row = self._rows.get(holder or "")
        recent = now - timedelta(seconds=visibility_timeout / 2)
        witnessed = row is not None and any(
            other != row.id and self._since[other] <= row.last_seen and w.last_seen >= recent
            for other, w in self._rows.items()
        )
        if row is None or row.stopped_at is not None or (row.expires_at < now and witnessed):
            return crashes + 1, None
        return crashes, holder
