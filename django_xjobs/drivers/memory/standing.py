"""The memory driver's ``standing``: standing.sql's counts, row by row under the driver's lock."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from ..contract import JobSnapshot, Standing, WorkerLoad

if TYPE_CHECKING:
    from .state import MemoryState

#: the states a claim takes a due row from (the claim index's)
_CLAIMABLE = ("ready", "delayed", "suspended")
#: the key's runs named, at most
HOLDERS = 10


def _order(row: JobSnapshot) -> tuple[int, datetime, UUID]:
    return (-row.priority, row.run_at, row.id)


def standing(driver: MemoryState, job_id: UUID, *, cap: int, fair: bool) -> Standing | None:
    me = driver._rows.get(job_id)
    if me is None:
        return None
    now = driver._now()
    keys = driver._limit_keys
    key = keys.get(me.id)
    mine = _order(me)
    due = [
        r
        for r in driver._rows.values()
        if r.queue == me.queue and r.state in _CLAIMABLE and r.run_at <= now and r.id != me.id
    ]
    ahead = [r for r in due if _order(r) < mine]
    key_ahead = 0 if key is None else sum(1 for r in ahead if keys.get(r.id) == key)
    other_keys, other_ahead = 0, 0
    if fair:
        turn = min(key_ahead, cap) + 1
        by_key: dict[str | None, list[JobSnapshot]] = {}
        for row in due:
            if keys.get(row.id) != key:
                by_key.setdefault(keys.get(row.id), []).append(row)
        other_keys = len(by_key)
        for rows in by_key.values():
            rows.sort(key=_order)
            for rank, row in enumerate(rows, 1):
                other_ahead += rank < turn or (rank == turn and _order(row) < mine)
    running = sorted((r for r in driver._rows.values() if r.state == "running"), key=lambda r: r.id)
    holders = [r for r in running if key is not None and keys.get(r.id) == key]
    state = driver._key_state.get(key) if key is not None else None
    paused = state.paused_until if state is not None else None
    return Standing(
        ahead=min(len(ahead), cap),
        higher_priority=min(sum(r.priority > me.priority for r in due), cap),
        key=key,
        key_ahead=min(key_ahead, cap),
        other_keys=min(other_keys, cap),
        other_keys_ahead=min(other_ahead, cap),
        key_running=len(holders),
        key_holders=tuple((r.id, r.claimed_by) for r in holders[:HOLDERS]),
        key_starts=tuple(state.starts) if state is not None else (),
        key_paused_until=paused if paused is not None and paused > now else None,
        queue_running=sum(1 for r in running if r.queue == me.queue),
        loads=_loads(me, running),
    )


def _loads(me: JobSnapshot, running: Sequence[JobSnapshot]) -> tuple[WorkerLoad, ...]:
    tenant = me.tenant_id or ""
    loads = []
    for worker in sorted({r.claimed_by for r in running if r.claimed_by is not None}):
        held = [r for r in running if r.claimed_by == worker]
        loads.append(
            WorkerLoad(
                worker=worker,
                running=len(held),
                queue_running=sum(1 for r in held if r.queue == me.queue),
                tenant_running=sum(1 for r in held if (r.tenant_id or "") == tenant),
            )
        )
    return tuple(loads)


def job_states(driver: MemoryState, ids: Sequence[UUID]) -> dict[UUID, str]:
    return {i: driver._rows[i].state for i in ids if i in driver._rows}
