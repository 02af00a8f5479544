"""A ``django-health-check`` check for a web process: can it hand work to a live fleet?

Install the extra (``pip install "./django-xjobs[health]"``) and list the check on the view::

    from health_check.views import HealthCheckView

    path("health/", HealthCheckView.as_view(checks=[
        "health_check.checks.Database",
        ("django_xjobs.health_check.Queues", {"queues": ("default", "emails")}),
    ])),

It fails (``ServiceUnavailable``) when the jobs database does not answer, or when a queue it
watches has no live worker registered for it (a worker's presence row, renewed each heartbeat);
with ``max_oldest_ready`` it warns (``ServiceWarning``) when a queue's oldest ready job waits
longer than that many seconds. It reads only. A paused queue is no failure: its workers are
still there, waiting for the resume (SPEC HEALTH-05).
"""

from __future__ import annotations

import dataclasses

from django.db import connections
from health_check.base import HealthCheck
from health_check.exceptions import (
    ServiceUnavailable,
    ServiceWarning,
)

from . import conf, operations
from .declarations import registry
from .drivers.reading import reading_primary


@dataclasses.dataclass
class Queues(HealthCheck):
    """``queues``: those to watch (default: every queue a registered job declares plus
    ``XJOBS["QUEUES"]``); ``max_oldest_ready``: seconds a ready job may wait before it warns."""

    queues: tuple[str, ...] | None = None
    max_oldest_ready: float | None = None

    def run(self) -> None:
        try:
            watched = sorted(self.queues or registry.known_queues(conf.get().queues))
            try:  # the jobs database's health, not a replica's (SPEC READ-01)
                with reading_primary():
                    depth = {q["queue"]: q for q in operations.inspect_queues()["queues"]}
                    workers = [w for w in operations.inspect_workers() if w["alive"]]
            except Exception as error:  # the message names no host or credential
                raise ServiceUnavailable(
                    f"the jobs database does not answer ({type(error).__name__})"
                ) from None
            served = {q for w in workers for q in w["queues"]}
            unserved = [q for q in watched if q not in served]
            if unserved:
                raise ServiceUnavailable(f"no live worker serves queue(s) {', '.join(unserved)}")
            if self.max_oldest_ready is not None:
                late = [
                    f"{q} ({depth[q]['oldest_ready_seconds']:.0f}s)"
                    for q in watched
                    if q in depth and depth[q]["oldest_ready_seconds"] > self.max_oldest_ready
                ]
                if late:
                    raise ServiceWarning(f"ready jobs wait too long in {', '.join(late)}")
        finally:
            # sync checks run on the view's executor threads: hand their connections back
            # (never one inside a transaction: a caller's own, as in a test)
            for connection in connections.all(initialized_only=True):
                if not connection.in_atomic_block:
                    connection.close()
