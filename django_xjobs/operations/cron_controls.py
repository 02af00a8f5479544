"""The operator's cron controls: pause and resume one cron, fire one extra occurrence now, and
list every cron with its next fire times (issue 29, SPEC CRONCTL-01..06).

Stored in the scheduler's store (``x_cron_controls`` on PostgreSQL), so a pause outlives
restarts and deploys; only the scheduler's leader reads it, once a round. The admin, the
``xjobs cron`` command and the tests all go through these functions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from .. import log
from ..declarations.cron import CronHandle, registered_crons
from ..drivers import get_driver
from ..drivers.contract import CronState
from ..errors import CronUnknownError, InvariantError
from ..ids import uuid7
from ..text import check_label
from . import audit
from .answers import CronReport

#: how many fire times ``inspect_crons`` lists per cron
NEXT_FIRES = 5


@dataclass(frozen=True)
class CronRun:
    """What ``run_cron_now`` did: ``job_ids`` are the jobs the extra occurrence enqueued;
    ``deduped`` is True when ``key`` was the latest run's key already (a double click), and then
    nothing was enqueued::

        >>> run = run_cron_now("shop.nightly", key="form-1c9e")
        >>> run.deduped, len(run.job_ids)
        (False, 1)
    """

    cron: str
    key: str
    occurrence: datetime | None
    job_ids: tuple[str, ...]
    deduped: bool


def pause_cron(name: str, *, by: str | None = None) -> CronState:
    """Stop the scheduler firing cron ``name`` (SPEC CRONCTL-01/02): stored, so it outlives
    restarts; the leader skips it from its next round. Its watermark stays where it was, so on
    ``resume_cron`` the occurrences it missed follow its ``catch_up`` rule. Pausing a paused
    cron keeps its first ``paused_at`` and ``paused_by``::

        >>> pause_cron("shop.nightly", by="ops:alice").paused
        True
    """
    handle = _declared(name)
    _check_by(by)
    state = get_driver().scheduler().pause_cron(handle.name, by)
    log.event(logging.WARNING, "xjobs.cron.paused", cron=handle.name, by=by)
    audit.record("pause_cron", by=by, target=handle.name)
    return state


def resume_cron(name: str, *, by: str | None = None) -> CronState:
    """Let the scheduler fire cron ``name`` again (SPEC CRONCTL-03); its next round catches up
    what the pause missed by the cron's ``catch_up`` rule. Resuming a running cron changes
    nothing::

        >>> resume_cron("shop.nightly").paused
        False
    """
    handle = _declared(name)
    _check_by(by)
    state = get_driver().scheduler().resume_cron(handle.name)
    log.event(logging.INFO, "xjobs.cron.resumed", cron=handle.name, by=by)
    audit.record("resume_cron", by=by, target=handle.name)
    return state


def run_cron_now(name: str, *, key: str | None = None, by: str | None = None) -> CronRun:
    """Fire one extra occurrence of cron ``name`` now (SPEC CRONCTL-04), paused or not.

    Its jobs carry keys scoped to ``key`` (never to an occurrence time, so it never collides
    with a scheduled occurrence), and the key is recorded with the enqueue in one transaction:
    a second call with the latest key enqueues nothing (``deduped=True``), so a double click on
    a form that carries one key runs once. No ``key``: a fresh one, so every call runs::

        >>> run_cron_now("shop.nightly", key="incident-42").job_ids
        ('0190…',)
    """
    from ..scheduler.role import _occurrence_request

    handle = _declared(name)
    _check_by(by)
    if key is not None and (not isinstance(key, str) or not key or len(key) > 200):
        raise InvariantError(
            f"key={key!r} must be a non-empty string of at most 200 characters",
            hint="any token the same click sends twice, e.g. a form's nonce",
        )
    key = key or f"run-{uuid7()}"
    driver = get_driver()
    store = driver.scheduler()
    occurrence = datetime.now(UTC)
    entries = handle.entries(occurrence)  # SPEC SCHED-07: built from the occurrence
    # due at once on the store's clock, not at this process's idea of now
    requests = [
        replace(
            _occurrence_request(handle, job, inputs, occurrence, scope=f"now-{key}"), run_at=None
        )
        for job, inputs in entries
    ]
    with store.transaction():  # SPEC CRONCTL-04: the key and the jobs commit together
        if store.mark_run(handle.name, key) is None:
            log.event(
                logging.INFO, "xjobs.cron.run_now", cron=handle.name, key=key, by=by, deduped=True
            )
            return CronRun(handle.name, key, None, (), True)
        results = [driver.jobs().enqueue(request) for request in requests]
    for (job, _), request, result in zip(entries, requests, results, strict=True):
        announce = getattr(job, "announce", None)  # a django.tasks task: task_enqueued
        if announce is not None and not result.deduped:
            announce(request, result.id)
    log.event(logging.INFO, "xjobs.cron.run_now", cron=handle.name, key=key, by=by, deduped=False)
    audit.record("run_cron_now", by=by, target=handle.name, counts=(len(results),) * 2 + (0,))
    return CronRun(handle.name, key, occurrence, tuple(str(r.id) for r in results), False)


def inspect_crons(*, now: datetime | None = None) -> list[CronReport]:
    """Every declared cron as plain JSON: schedule, time zone, catch-up rule, whether it is
    paused (by whom, since when), its last firing and its next ``NEXT_FIRES`` fire times (ISO
    8601, UTC), in name order (SPEC CRONCTL-05)::

        >>> [(c["name"], c["paused"], c["next_fires"][0]) for c in inspect_crons()]
        [('shop.nightly', False, '2026-12-02T03:00:00+00:00')]
    """
    from ..scheduler.role import last_fired

    store = get_driver().scheduler()
    controls = {c.cron: c for c in store.cron_controls()}
    now = now or datetime.now(UTC)
    listed = []
    for handle in registered_crons():
        control = controls.get(handle.name) or CronState(handle.name, False)
        fired = last_fired(handle, store.watermark(handle.name))
        listed.append(
            CronReport(
                name=handle.name,
                schedule=handle.schedule,
                seconds=handle.seconds,
                tz=handle.tz,
                catch_up=handle.catch_up,
                max_catch_up=handle.max_catch_up,
                jobs=handle.job_names(),
                paused=control.paused,
                paused_at=_iso(control.paused_at),
                paused_by=control.paused_by,
                last_fired=_iso(fired),
                next_fires=[t.isoformat() for t in next_fires(handle, now)],
            )
        )
    return listed


def next_fires(handle: CronHandle, after: datetime, count: int = NEXT_FIRES) -> list[datetime]:
    """The ``count`` occurrences of ``handle`` after ``after`` (aware UTC datetimes)."""
    fires: list[datetime] = []
    cursor = after
    for _ in range(count):
        cursor = handle.next_occurrence(cursor)
        fires.append(cursor)
    return fires


def cron_state(state: CronState) -> dict[str, Any]:
    """``state`` as plain JSON (the CLI's and the admin's edge)."""
    return {
        "cron": state.cron,
        "paused": state.paused,
        "paused_at": _iso(state.paused_at),
        "paused_by": state.paused_by,
    }


def _declared(name: object) -> CronHandle:
    crons = {c.name: c for c in registered_crons()}
    if not isinstance(name, str) or name not in crons:
        known = ", ".join(sorted(crons)) or "none is declared"
        raise CronUnknownError(
            f"no cron is declared as {name!r}",
            hint=f"the declared crons: {known} (python manage.py xjobs crons)",
        )
    return crons[name]


def _check_by(by: object) -> None:
    if by is not None and not isinstance(by, str):
        raise InvariantError(f"by={by!r} must be a string or None", hint='e.g. "ops:alice"')
    check_label(by, "by")  # as pause_queue's (issue 40)


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()
