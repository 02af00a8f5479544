"""The memory driver's worker presence and lapse verdict: the PostgreSQL statements' answers.

A re-claimed lapsed row's holder is judged from its presence row (fragments.sql's lapse_verdict):
``exited`` when it marked the row stopped, ``present`` when it renewed the row after the lease
ran out, else ``died``. None of them counts against the job (issue 39): a ``died`` run is
marked to run alone next.
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

    def release(self, worker_id: str) -> None:
        self._rows.pop(worker_id, None)
        self._since.pop(worker_id, None)

    def snapshot(self, now: datetime) -> list[WorkerSnapshot]:
        rows = sorted(self._rows.values(), key=lambda r: (r.started_at, r.id))
        return [replace(r, alive=r.expires_at >= now and r.stopped_at is None) for r in rows]

    def decided(
        self, holder: str | None, lapsed_at: datetime, now: datetime, visibility_timeout: float
    ) -> bool:
        """Whether a run whose lease ran out at ``lapsed_at`` can be judged now, as fragments.sql's
        lapsed_rows says: its holder is gone, stopped or seen since, or stayed silent through
        a whole presence TTL while another worker beat without a break."""
        row = self._rows.get(holder or "")
        if row is None or row.stopped_at is not None or row.last_seen >= lapsed_at:
            return True
        ttl = row.expires_at - row.last_seen
        recent = now - timedelta(seconds=visibility_timeout / 2)
        return any(
            other != row.id
            and seen.stopped_at is None
            and seen.last_seen >= recent
            and seen.last_seen >= max(self._since[other], row.last_seen) + ttl
            for other, seen in self._rows.items()
        )

    def verdict(self, holder: str | None, lapsed_at: datetime) -> str:
        """``exited``, ``present`` or ``died``: what the holder of a run whose lease ran out at
        ``lapsed_at`` was, as fragments.sql's lapse_verdict reads it (SPEC LEASE-16)."""
        row = self._rows.get(holder or "")
        if row is not None and row.stopped_at is not None:
            return "exited"
        if row is not None and row.last_seen >= lapsed_at:
            return "present"
        return "died"
