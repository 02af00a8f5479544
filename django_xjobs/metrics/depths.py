"""Each queue's depth as the metrics and ``inspect_queues`` read it: counts by state, the age of
its oldest ready job, its pause and its operator's cap."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..drivers.contract import JobDriver


def queue_depths(driver: JobDriver) -> list[dict[str, Any]]:
    """One row per queue, in name order: its counts by state, the age of its oldest ready job
    and whether it is paused; a paused queue with no jobs is listed too, with zeros. Read from
    the driver, with the fleet-wide cap ``set_queue_limit`` set (``inspect_queues`` answers the
    same rows to the admin and the CLI)."""
    # a pause past its end reads as none (SPEC PAUSE-01); one with an end says when
    controls = driver.limits().queue_controls()
    ends = {c.queue: c.paused_until for c in controls if c.paused}
    paused = frozenset(ends)
    # set_queue_limit: shown beside the pause, with the running
    caps = {c.queue: c.limit for c in controls if c.limit is not None}
    queues: list[dict[str, Any]] = [
        {
            "queue": s.queue,
            "ready": s.ready,
            "delayed": s.delayed,
            "running": s.running,
            "suspended": s.suspended,
            "dead": s.dead,
            "oldest_ready_seconds": float(s.oldest_ready_seconds),
            "paused": s.queue in paused,
            "limit": caps.get(s.queue),
            "paused_until": _iso(ends.get(s.queue)),
        }
        for s in driver.reads().stats()
    ]
    listed = {q["queue"] for q in queues}
    for name in sorted((paused | caps.keys()) - listed):
        empty = dict.fromkeys(("ready", "delayed", "running", "suspended", "dead"), 0)
        queues.append(
            {
                "queue": name,
                **empty,
                "oldest_ready_seconds": 0.0,
                "paused": name in paused,
                "limit": caps.get(name),
                "paused_until": _iso(ends.get(name)),
            }
        )
    queues.sort(key=lambda q: q["queue"])
    return queues


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
