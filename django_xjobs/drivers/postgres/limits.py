"""The PostgreSQL driver's limited claim and the limits' stored state (``limits.sql``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from django.db import connections, transaction

from ... import history
from ...limits.claims import ClaimLimits
from ...payload import decode
from ..contract import KeyUse, QueueState
from . import sql

LIMITS = sql.load(Path(__file__).with_name("limits.sql"))


def claim(
    using: str,
    *,
    queues: Sequence[str],
    limit: int,
    visibility_timeout: float,
    worker_id: str,
    lapsed: bool,
    limits: ClaimLimits,
    versions: str,
    cursor: dict[str, str],
    paused: Sequence[str] = (),
) -> list[tuple[Any, ...]]:
    """Rows of ``claim`` within ``limits``: one transaction whose first statements lock what
    the last one counts (limits.sql). A queue whose cap another worker's claim holds is left out
    of this one; so is a key. ``cursor``: per queue, the last key this worker's claim took, the
    next claim's walk through the keys starts after it (updated here)."""
    taken: list[tuple[Any, ...]] = []
    base: dict[str, Any] = {"limit": limit, "worker_id": worker_id, "versions": versions}
    base["paused"] = list(paused)  # the operators' job and key pauses (SPEC PAUSE-04/05)
    base["visibility_timeout"] = visibility_timeout
    if lapsed:
        # The sweep alone, in its own transaction: a lapsed run keeps the slot it held. Only a
        # sweep told of a pause steps over the paused jobs' runs (SPEC PAUSE-09/10).
        taken += sql.fetch(
            using,
            LIMITS["reclaim_lapsed_paused" if paused else "reclaim_lapsed"],
            {
                **base,
                "queues": list(queues),
                "lapsed": history.LAPSED.to_json(),
                "lapsed_present": history.LAPSED_PRESENT.to_json(),
                "exited": history.EXITED.to_json(),
                "keep": history.KEEP,
            },
        )
        if len(taken) >= limit:
            return taken
        base["limit"] = limit - len(taken)
    named = limits.params()
    with transaction.atomic(using=using):
        generic = sql.prepares(connections[using])
        held = sql.fetch(
            using, LIMITS["limit_queues"], {"queues": list(queues), "generic": generic}
        )
        busy = {queue for queue, locked in held if queue is not None and not locked}
        open_queues = [q for q in queues if q not in busy]
        if not open_queues:
            return taken
        keys: list[str] = []
        for queue in open_queues:
            params: dict[str, Any] = {**named, "queue": queue, "limit": base["limit"]}
            params["paused"] = base["paused"]
            params["after"] = cursor.get(queue, "")
            found = [r[0] for r in sql.fetch(using, LIMITS["limit_keys"], params)]
            if found:  # in the walk's order: the next claim starts after the last
                cursor[queue] = found[-1]
            keys += found
        plain = [q for q in limits.plain_queues if q in open_queues]
        stray = [q for q in limits.stray_queues if q in open_queues]
        if not keys and not plain and not stray:
            return taken
        claim: dict[str, Any] = {**base, **named}
        claim.update(queues=open_queues, keys=keys, plain_queues=plain, stray_queues=stray)
        claim["scan"] = limits.scan(base["limit"])
        claim["fair"] = limits.fair
        taken += sql.fetch(using, LIMITS["claim_limited"], claim)
    return taken


def pause_key(using: str, key: str, delay: float) -> None:
    sql.fetch(using, LIMITS["pause_key"], {"key": key, "delay": max(0.0, delay)})


def prune_keys(using: str, windows: Mapping[str, float], idle_for: float, batch: int) -> int:
    """Delete the idle keys' rows (limits.sql's ``prune_limit_keys``), a short transaction per
    batch; how many went."""
    params: dict[str, Any] = {"idle_for": max(0.0, idle_for), "batch": batch}
    params.update(names=list(windows), windows=list(windows.values()))
    pruned, params["after"] = 0, ""
    while True:
        [(deleted, last)] = sql.fetch(using, LIMITS["prune_limit_keys"], params)
        pruned += int(deleted)
        if deleted < batch:
            return pruned
        params["after"] = last


def usage(using: str, limit: int) -> list[KeyUse]:
    """(key, paused_until, running, recorded starts) per key, for ``key_usage``."""
    rows = sql.fetch(using, LIMITS["limit_usage"], {"limit": limit})
    return [(r[0], r[1], r[2], list(r[3])) for r in rows]


def set_queue_limit(using: str, queue: str, concurrency: int | None) -> QueueState:
    with transaction.atomic(using=using):  # the NOTIFY goes out with the commit
        row = sql.fetch(
            using, LIMITS["set_queue_limit"], {"queue": queue, "concurrency": concurrency}
        )[0]
    return QueueState(row[0], row[1] is not None, row[1], row[2], row[3])


def stamp_keys(using: str, ids: Sequence[object]) -> None:
    """Give the runs just inserted straight from the outbox (publish_taken, which copies rows in
    SQL) their limit keys, in the same transaction: a claim never sees one without its key."""
    from ... import conf
    from ...limits.keys import key_of, limited_names

    names, every = limited_names(), conf.get().fair_share is not None
    if not (names or every) or not ids:
        return
    params = {"ids": list(ids), "names": names, "every": every}
    rows = sql.fetch(using, LIMITS["unkeyed"], params)
    found = [(r[0], key_of(r[1], decode(r[2]), r[3])) for r in rows]
    keyed = [(job_id, key) for job_id, key in found if key is not None]
    if keyed:
        params = {"ids": [k[0] for k in keyed], "keys": [k[1] for k in keyed]}
        sql.fetch(using, LIMITS["stamp_keys"], params)
