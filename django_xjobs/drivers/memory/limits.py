"""The memory driver's limited claim: limits.sql's answers, row by row under the driver's lock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from ...limits.claims import KEY_SHOWN_FOR, ClaimLimits, in_window, room
from ...limits.keys import SEPARATOR
from ..contract import NO_VERSIONS, DeclaredVersions, JobSnapshot, KeyUse
from .state import KeyState

if TYPE_CHECKING:
    from .state import MemoryState

_WAITING = ("ready", "delayed", "suspended")


def _order(row: JobSnapshot) -> tuple[int, datetime, UUID]:
    return (-row.priority, row.run_at, row.id)


def pick(
    driver: MemoryState,
    queues: Sequence[str],
    limit: int,
    lapsed: bool,
    limits: ClaimLimits,
    now: datetime,
    visibility_timeout: float,
    versions: DeclaredVersions = NO_VERSIONS,
    paused: frozenset[str] = frozenset(),
) -> list[JobSnapshot]:
    """The rows a limited claim takes, in the order the PostgreSQL driver returns them: the
    sweep's lapsed rows first, then the rows within their limits (limits.sql), none of a job
    or a key in ``paused`` (SPEC PAUSE-04/05/10)."""
    rows, keys = driver._rows, driver._limit_keys
    taken: list[JobSnapshot] = []
    if lapsed:
        stale = [
            r
            for r in rows.values()
            if r.queue in queues
            and r.state == "running"
            and r.visible_at is not None
            and r.visible_at <= now
            and driver._presence.decided(r.claimed_by, r.visible_at, now, visibility_timeout)
            and versions.honours(r.name, r.version, r.parked)
            # a paused job's or key's run waits, lapsed, until resumed (SPEC PAUSE-10)
            and r.name not in paused
            and keys.get(r.id) not in paused
        ]
        stale.sort(key=lambda r: (r.visible_at, r.id))
        taken = sorted(stale[:limit], key=_order)
        if len(taken) >= limit:
            return taken
        limit -= len(taken)
    running = [r for r in rows.values() if r.state == "running"]
    budget: dict[str, int] = {}
    for queue in queues:
        for key in walk(driver, queue, limit, limits, running, now, paused):
            state = driver._key_state.setdefault(key, KeyState(now))
            job = limits.of(key)
            held = sum(1 for r in running if keys.get(r.id) == key)
            left = room(job, held, state.starts, now)
            budget[key] = limit if left is None else max(0, min(limit, left))
    due = sorted(
        (
            r
            for r in rows.values()
            if r.queue in queues
            and r.state in _WAITING
            and r.run_at <= now
            and versions.honours(r.name, r.version, r.parked)
            and r.name not in paused
        ),
        key=_order,
    )
    keyed: list[JobSnapshot] = []
    spent: dict[str, int] = {}
    plain: dict[str, int] = {}
    read: dict[str, int] = {}  # waiting rows a stray search read, per queue
    turn: dict[UUID, int] = {}  # a run's place within its key (or its queue's keyless runs)
    scan = limits.scan(limit)
    for row in due:
        read[row.queue] = read.get(row.queue, 0) + 1
        if (
            row.queue in limits.stray_queues
            and keys.get(row.id) is None
            and read[row.queue] <= scan
            and plain.get(row.queue, 0) < limit
        ):
            plain[row.queue] = plain.get(row.queue, 0) + 1
            turn[row.id] = plain[row.queue]
            keyed.append(row)
            continue
        held_key = keys.get(row.id)
        if held_key is None:
            if row.queue in limits.plain_queues and plain.get(row.queue, 0) < limit:
                plain[row.queue] = plain.get(row.queue, 0) + 1
                turn[row.id] = plain[row.queue]
                keyed.append(row)
        elif held_key in budget and spent.get(held_key, 0) < budget[held_key]:
            spent[held_key] = spent.get(held_key, 0) + 1
            turn[row.id] = spent[held_key]
            keyed.append(row)
    if limits.fair:  # each key's first run, then each key's second...
        keyed.sort(key=lambda r: (turn[r.id], *_order(r)))
    caps = {q: s.limit for q, s in driver._controls.items() if s.limit is not None}
    placed: dict[str, int] = {}
    picked = []
    for row in keyed:  # in the order the claim takes them
        cap = caps.get(row.queue)
        quota = limit if cap is None else cap - sum(1 for r in running if r.queue == row.queue)
        if placed.get(row.queue, 0) < quota:
            placed[row.queue] = placed.get(row.queue, 0) + 1
            picked.append(row)
    return taken + sorted(picked[:limit], key=_order)  # returned as the statement sorts


def walk(
    driver: MemoryState,
    queue: str,
    limit: int,
    limits: ClaimLimits,
    running: Sequence[JobSnapshot],
    now: datetime,
    paused: frozenset[str] = frozenset(),
) -> list[str]:
    """limits.sql's ``limit_keys``: the keys with work waiting in ``queue``, from the one after
    the last this driver's claim took round to it, stepping over a paused key, a spent rate or
    a full concurrency; the first ``limit`` of them, in the walk's order."""
    keys = driver._limit_keys
    waiting = sorted(
        {
            keys[r.id]
            for r in driver._rows.values()
            if r.state in _WAITING and r.queue == queue and r.id in keys
        }
    )
    after = driver._limit_cursor.get(queue, "")
    order = [k for k in waiting if k > after] + [k for k in waiting if k <= after]
    found: list[str] = []
    for key in order:
        if len(found) >= limit:
            break
        if key in paused or key.partition(SEPARATOR)[0] in paused:
            continue  # an operator's pause of the key or its job: stepped over
        state = driver._key_state.get(key)
        job = limits.of(key)
        if state is not None:
            if state.paused_until is not None and state.paused_until > now:
                continue
            if (
                job is not None
                and job.rate is not None
                and in_window(state.starts, job.window or 0.0, now) >= job.rate
            ):
                continue  # spent: stepped over, as limit_keys steps over it
        if (
            job is not None
            and job.concurrency is not None
            and sum(1 for r in running if keys.get(r.id) == key) >= job.concurrency
        ):
            continue  # full: stepped over, its runs would wait for a slot
        found.append(key)
    if found:
        driver._limit_cursor[queue] = found[-1]
    return found


def record(
    driver: MemoryState, claimed: Sequence[UUID], limits: ClaimLimits, now: datetime
) -> None:
    """Each rate-limited key's starts, its window trimmed (limits.sql's ``spent``)."""
    counts: dict[str, int] = {}
    for job_id in claimed:
        key = driver._limit_keys.get(job_id)
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    for key, n in counts.items():
        job = limits.of(key)
        state = driver._key_state.get(key)
        if job is None or job.rate is None or state is None:
            continue
        window = job.window or 0.0
        state.starts = [at for at in state.starts if (now - at).total_seconds() < window]
        state.starts += [now] * n
        state.updated_at = now


def pause(driver: MemoryState, key: str, delay: float, now: datetime) -> None:
    state = driver._key_state.get(key)
    if state is None:
        state = driver._key_state[key] = KeyState(now)
    until = now + timedelta(seconds=max(0.0, delay))
    if state.paused_until is None or until > state.paused_until:
        state.paused_until = until
    state.updated_at = now


def lift(driver: MemoryState, key: str, now: datetime) -> bool:
    """``resume_jobs`` of a key: its pause with an end lifted (controls.sql's ``resume_job``);
    whether one was in force."""
    state = driver._key_state.get(key)
    if state is None or state.paused_until is None or state.paused_until <= now:
        return False
    state.paused_until, state.updated_at = None, now
    return True


def prune(driver: MemoryState, windows: Mapping[str, float], idle_for: float, now: datetime) -> int:
    """limits.sql's ``prune_limit_keys``: the idle keys' state goes; how many keys."""
    busy = {
        key
        for job_id, key in driver._limit_keys.items()
        if (r := driver._rows.get(job_id)) is not None and r.state in (*_WAITING, "running")
    }
    gone = []
    for key, state in driver._key_state.items():
        window = windows.get(key.partition(SEPARATOR)[0])
        if (
            key in busy
            or (now - state.updated_at).total_seconds() < max(0.0, idle_for)
            or (state.paused_until is not None and state.paused_until > now)
            or (window is not None and in_window(state.starts, window, now))
        ):
            continue
        gone.append(key)
    for key in gone:
        del driver._key_state[key]
    return len(gone)


def usage(driver: MemoryState, limit: int, now: datetime) -> list[KeyUse]:
    rows: list[KeyUse] = []
    for key in sorted(driver._key_state):
        state = driver._key_state[key]
        if (now - state.updated_at).total_seconds() >= KEY_SHOWN_FOR:
            continue
        if len(rows) >= limit:
            break
        running = sum(
            1
            for job_id, k in driver._limit_keys.items()
            if k == key and (r := driver._rows.get(job_id)) is not None and r.state == "running"
        )
        rows.append((key, state.paused_until, running, list(state.starts)))
    return rows


def shift(driver: MemoryState, delta: timedelta) -> None:
    """``MemoryDriver.shift`` for the keys' times: the same as waiting ``delta``."""
    for state in driver._key_state.values():
        state.starts = [at - delta for at in state.starts]
        if state.paused_until is not None:
            state.paused_until -= delta
        state.updated_at -= delta
