"""The PostgreSQL driver's ``standing`` and ``job_states`` (``standing.sql``): an operator's
reads, counted in the database."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from uuid import UUID

from ..contract import Standing, WorkerLoad
from . import sql

STANDING = sql.load(Path(__file__).with_name("standing.sql"))


def standing(using: str, job_id: UUID, *, cap: int, fair: bool) -> Standing | None:
    rows = sql.fetch(using, STANDING["standing"], {"id": job_id, "cap": cap})
    if not rows:
        return None
    queue, tenant, ahead, higher, key, key_ahead, running, holders, starts, paused = rows[0][:10]
    queue_running = rows[0][10]
    other_keys = other_ahead = 0
    if fair:
        params = {"id": job_id, "cap": cap, "turn": key_ahead + 1}
        [(other_keys, other_ahead)] = sql.fetch(using, STANDING["standing_turns"], params)
    loads = sql.fetch(using, STANDING["standing_loads"], {"queue": queue, "tenant": tenant})
    return Standing(
        ahead=ahead,
        higher_priority=higher,
        key=key,
        key_ahead=key_ahead if key is not None else 0,
        other_keys=other_keys,
        other_keys_ahead=other_ahead,
        key_running=running if key is not None else 0,
        key_holders=tuple((UUID(i), w) for i, w in holders or ()),
        key_starts=tuple(starts or ()),
        key_paused_until=paused,
        queue_running=queue_running,
        loads=tuple(WorkerLoad(w, n, q, t) for w, n, q, t in loads),
    )


def job_states(using: str, ids: Sequence[UUID]) -> dict[UUID, str]:
    if not ids:
        return {}
    return dict(sql.fetch(using, STANDING["job_states"], {"ids": list(ids)}))
