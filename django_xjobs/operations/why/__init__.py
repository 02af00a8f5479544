""" "Why isn't this job running?": every gate that holds a waiting job back, each checked against
the store rather than guessed from the row alone (issues 30, 42). The job page, ``xjobs why ID``
and the tests read ``why_job``; it returns a frozen ``JobWhy`` whose ``reasons`` are every cause
that holds now, most decisive first (an empty tuple: it is due and nothing is in the way). The
causes are listed in ``causes.CAUSES``: the job's row (row.py), the fleet and the limits
(fleet.py), its place in its queue (place.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from ... import conf
from ...drivers import get_driver
from ...drivers.contract import JobDriver, JobSnapshot, Standing
from ...drivers.reading import read_driver
from ...durations import format_time
from ...errors import JobNotFoundError
from ...states import FINISHED_STATES, WAITING_STATES, shown_state
from .causes import BY_CODE, CAUSES, Cause, Reason, because
from .fleet import fleet_reasons, pause_reasons
from .place import AHEAD_CAP, place_reasons
from .row import row_reasons

__all__ = ["BY_CODE", "CAUSES", "Cause", "JobWhy", "Reason", "why_job"]


@dataclass(frozen=True)
class JobWhy:
    """What ``why_job`` found: the job, the state every screen shows for it (``ready`` or
    ``delayed`` by its due time, as the badge says), when it was checked (the database's
    clock), and the reasons, each a ``code``, a ``text`` and its ``detail``::

        >>> found = why_job(job_id)
        >>> found.state, [r.code for r in found.reasons]
        ('ready', ['queue_paused', 'behind'])
        >>> found.to_json()["reasons"][0]["detail"]["by"]
        'cli:alice'
    """

    id: UUID
    name: str
    queue: str
    state: str
    checked_at: datetime
    reasons: tuple[Reason, ...]

    def to_json(self) -> dict[str, Any]:
        """What ``xjobs why --json`` prints: times as ISO 8601, ids as strings."""
        return {
            "id": str(self.id),
            "name": self.name,
            "queue": self.queue,
            "state": self.state,
            "checked_at": self.checked_at.isoformat(),
            "reasons": [
                {"code": r.code, "text": r.text, "detail": _plain(dict(r.detail))}
                for r in self.reasons
            ],
        }

    def lines(self) -> list[str]:
        """The text ``xjobs why`` prints."""
        head = f"{self.name}  {self.id}  {self.state}  (queue {self.queue})"
        if self.reasons:
            return [head, *(f"  - {r.text}" for r in self.reasons)]
        return [head, "  nothing holds it: it is due and a worker watches its queue"]


def why_job(job_id: UUID | str) -> JobWhy:
    """What keeps job ``job_id`` from running now: one ``Reason`` per gate that holds it (its
    ``code``, a sentence, and the figures in ``detail``), checked against the database. Raises
    ``JobNotFoundError`` for an id that names no job::

        >>> found = why_job(result.id)
        >>> [(r.code, r.detail["key"]) for r in found.reasons]
        [('key_at_limit', 'billing.jobs.sync[acme]')]
        >>> found.reasons[0].text
        'its limit key billing.jobs.sync[acme] is at its concurrency limit (1 of 1 runs at once): held by 0197... on web-1:4242'
    """
    from ..shared import job_id_of

    driver, wanted = read_driver()[0], job_id_of(job_id)  # SPEC READ-01
    row = driver.reads().get_job(wanted)
    if row is None and driver is not get_driver():  # not replayed yet: where it was written
        driver = get_driver()
        row = driver.reads().get_job(wanted)
    if row is None:
        raise JobNotFoundError(
            f"no job {job_id} exists",
            hint="python manage.py xjobs ls lists recent jobs",
        )
    now = driver.steps().now()
    state = shown_state(row.state, row.run_at, now)
    return JobWhy(row.id, row.name, row.queue, state, now, tuple(_reasons(driver, row, now)))


def _reasons(driver: JobDriver, row: JobSnapshot, now: datetime) -> list[Reason]:
    fair = conf.get().fair_share is not None
    if row.state == "running":
        if row.visible_at is None or row.visible_at > now:
            return [_running(row, now)]
        # a lapsed run of a paused queue or job is left by the sweep until the pause is lifted
        # (SPEC PAUSE-10): the pause says why
        standing = driver.reads().standing(row.id, cap=AHEAD_CAP, fair=fair) or Standing()
        held = pause_reasons(driver, row, standing)
        return [_running(row, now, held=bool(held)), *held]
    if row.state in FINISHED_STATES:
        stop = f" ({row.stop_reason})" if row.stop_reason else ""
        return [
            because(
                "finished",
                f"it has ended: {row.state}{stop}",
                state=row.state,
                stop_reason=row.stop_reason,
            )
        ]
    standing = driver.reads().standing(row.id, cap=AHEAD_CAP, fair=fair) or Standing()
    reasons = row_reasons(driver, row, now)
    reasons += fleet_reasons(driver, row, now, standing)
    if row.state in WAITING_STATES and row.run_at <= now:
        reasons += place_reasons(row, standing)
    return _said_once(reasons)


def _running(row: JobSnapshot, now: datetime, *, held: bool = False) -> Reason:
    since = row.last_attempted_at
    lapsed = row.visible_at is not None and row.visible_at <= now
    text = f"it is running: attempt {row.attempt} of {row.max_attempts} on {row.claimed_by}"
    if since is not None:
        text += f" since {format_time(since)}"
    if lapsed and row.visible_at is not None:
        text += (
            f"; its lease lapsed at {format_time(row.visible_at)}: the next claim's sweep takes "
            + ("it back once the pause is lifted" if held else "it back")
        )
    return because(
        "running",
        text,
        worker=row.claimed_by,
        attempt=row.attempt,
        since=since,
        lapsed=lapsed,
    )


def _said_once(reasons: list[Reason]) -> list[Reason]:
    """A ``RateLimited`` hands its run back until its key's pause ends: the pause says why it
    is not due, so the bare schedule is not said beside it."""
    paused = next((r for r in reasons if r.code == "key_paused"), None)
    if paused is None:
        return reasons
    # the pause is stamped a moment before the hand-back that sets the run's time
    ends = paused.detail["until"] + timedelta(seconds=1)
    return [r for r in reasons if not (r.code == "scheduled" and r.detail["until"] <= ends)]


def _plain(value: object) -> object:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    return value
