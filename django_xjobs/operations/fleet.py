"""The operator's view of the fleet: queue depths, pausing and resuming a queue, and the
workers' presence rows."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from .. import conf, log, metrics
from ..drivers import get_driver
from ..drivers.contract import QueueState
from ..drivers.reading import read_driver
from ..durations import Duration, parse_duration
from ..errors import (
    InvariantError,
)
from ..worker.paused import changed_here
from . import audit
from .answers import QueueDepthRow, QueuesReport, WorkerReport
from .shared import check_by, iso


def inspect_queues() -> QueuesReport:
    """Depth per queue and totals (SPEC INSP-01); a due ``delayed`` job counts as ready (Q-05)::

        >>> inspect_queues()["totals"]
        {'ready': 4, 'delayed': 1, 'running': 2, 'suspended': 0, 'dead': 1}

    ``queues`` holds the same counts per queue, with the age of each queue's oldest ready job,
    ``paused`` (``pause_queue``) and ``limit`` (``set_queue_limit``, None: no cap); a paused or
    capped queue with no jobs is listed too, with zeros.

    Read from ``XJOBS["READ_DATABASE"]`` when one is set; ``read_from`` says where and how old
    the figures are (``lag_seconds``: 0.0 from a primary, SPEC READ-02). A read database that
    does not answer raises ``ReadDatabaseUnavailableError``.
    """
    driver, source = read_driver()  # SPEC READ-01
    queues = [QueueDepthRow(**q) for q in metrics.queue_depths(driver)]
    buckets = ("ready", "delayed", "running", "suspended", "dead")
    return QueuesReport(
        driver=driver.name,
        queues=queues,
        totals={b: sum(q[b] for q in queues) for b in buckets},
        oldest_ready_seconds=max((q.oldest_ready_seconds for q in queues), default=0.0),
        read_from=source.to_json(),
    )


def pause_queue(
    name: str, *, by: str | None = None, until: datetime | Duration | None = None
) -> QueueState:
    """Stop every worker of the fleet claiming from queue ``name`` (SPEC CTRL-01/02).

    Stored in the database, so it outlives restarts and deploys; each worker leaves the queue out
    of its next claim, woken by a notification (at the latest a poll interval later). Runs in
    flight finish; enqueues into the queue still land and wait. Pausing a paused queue keeps its
    first ``paused_at`` and ``paused_by``.

    ``until`` (an aware datetime, or a duration from now: ``"30m"``, a ``timedelta``, seconds)
    ends the pause by itself: from then on the queue reads as running and every worker claims
    from it again within a poll interval, with no one resuming it (SPEC PAUSE-01). Pausing again
    sets the new end (None: until resumed)::

        >>> pause_queue("emails", by="ops:alice", until="30m")
        QueueState(queue='emails', paused=True, ..., paused_until=datetime(...))
    """
    conf.check_queue_name(name, error=InvariantError)
    check_by(by)
    driver = get_driver()
    ends = pause_end(driver.steps().now(), until)
    state = driver.limits().pause_queue(name, by, ends)
    changed_here()  # this process's workers too, a test's tick() included (SPEC PAUSE-11)
    log.event(logging.WARNING, "xjobs.queue.paused", queue=name, by=by, until=ends)
    reason = None if ends is None else f"until {ends.isoformat()}"
    audit.record("pause_queue", by=by, target=name, reason=reason)  # SPEC AUDIT-01
    return state


def resume_queue(name: str, *, by: str | None = None) -> QueueState:
    """Let the fleet claim from queue ``name`` again (SPEC CTRL-03); its waiting jobs run in
    their usual order. Resuming a queue that is not paused changes nothing::

        >>> resume_queue("emails").paused
        False
    """
    conf.check_queue_name(name, error=InvariantError)
    check_by(by)
    state = get_driver().limits().resume_queue(name)
    changed_here()
    log.event(logging.INFO, "xjobs.queue.resumed", queue=name, by=by)
    audit.record("resume_queue", by=by, target=name)
    return state


def pause_end(now: datetime, until: datetime | Duration | None) -> datetime | None:
    """When a pause ends (``pause_queue``, ``pause_jobs``): an aware time after ``now`` (the store's clock), or a duration from
    it; anything else is ``X_INVARIANT``."""
    if until is None:
        return None
    if isinstance(until, datetime):
        if until.tzinfo is None:
            raise InvariantError(
                f"until={until!r} has no timezone",
                hint="give an aware datetime (timezone.now() + ...), or a duration such as '30m'",
            )
        ends = until
    else:
        ends = now + timedelta(seconds=parse_duration(until, field="until"))
    if ends <= now:
        raise InvariantError(
            f"until={until!r} has passed: a pause must end after now ({now.isoformat()})",
            hint="give a later time, or a duration such as '30m'",
        )
    return ends


def inspect_workers() -> list[WorkerReport]:
    """Every worker's presence row, oldest start first; ``alive`` is False once it went a
    visibility timeout without a heartbeat (killed, stopped or cut off), and ``state`` says
    which: ``alive``, ``lapsed``, or ``exited`` (``stopped_at`` set: it exited past its
    ``--shutdown-timeout`` with runs in flight, which return by their leases)::

        >>> [(w["id"], w["in_flight"], w["alive"]) for w in inspect_workers()]
        [('worker-0190…', 3, True)]
    """
    return [
        WorkerReport(
            id=w.id,
            host=w.host,
            pid=w.pid,
            queues=list(w.queues),
            started_at=iso(w.started_at),
            last_seen=iso(w.last_seen),
            expires_at=iso(w.expires_at),
            in_flight=w.in_flight,
            alive=w.alive,
            stopped_at=iso(w.stopped_at),
            state=worker_state(w.alive, w.stopped_at),
        )
        for w in read_driver()[0].reads().workers()
    ]


def worker_state(alive: bool, stopped_at: datetime | None) -> str:
    """``alive``; ``exited`` when the process left past its shutdown timeout with runs in
    flight (they return by their leases); else ``lapsed``: no beat for a visibility timeout."""
    if stopped_at is not None:
        return "exited"
    return "alive" if alive else "lapsed"
