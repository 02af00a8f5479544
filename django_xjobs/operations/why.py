""" "Why isn't this job running?": what holds a waiting job back, each cause checked against the
store rather than guessed from the row alone (issue 30). The job page, ``xjobs why ID`` and the
tests read ``why_job``; it returns a frozen ``JobWhy`` whose ``reasons`` are every cause that
holds now, most decisive first (an empty tuple: it is due and nothing in the way).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from .. import conf
from ..declarations import registry
from ..drivers import get_driver
from ..drivers.contract import JobDriver, JobSnapshot
from ..errors import JobNotFoundError
from ..states import FINISHED_STATES, WAITING_STATES

#: reasons are capped at this many jobs ahead counted: an operator call, never a full scan
_AHEAD_CAP = 10_000


@dataclass(frozen=True)
class Reason:
    """One cause: ``code`` is stable (scheduled, backing_off, sleeping, waiting_for_event,
    unknown_job, not_registered_here, queue_paused, job_at_limit, no_worker, behind, running,
    finished, waiting_for_jobs, suspect), ``text`` says it for an operator, ``detail`` carries its
    figures."""

    code: str
    text: str
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobWhy:
    id: UUID
    name: str
    queue: str
    state: str
    checked_at: datetime
    reasons: tuple[Reason, ...]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["id"] = str(self.id)
        data["checked_at"] = self.checked_at.isoformat()
        data["reasons"] = [
            {"code": r.code, "text": r.text, "detail": _plain(dict(r.detail))} for r in self.reasons
        ]
        return data


def why_job(job_id: UUID | str) -> JobWhy:
    """What keeps job ``job_id`` from running now. Raises ``JobNotFoundError`` for no job."""
    from . import _job_id

    driver = get_driver()
    wanted = _job_id(job_id)
    row = driver.get_job(wanted)
    if row is None:
        raise JobNotFoundError(
            f"no job {job_id} exists",
            hint="python manage.py xjobs ls lists recent jobs",
        )
    now = driver.steps.now()
    return JobWhy(row.id, row.name, row.queue, row.state, now, tuple(_reasons(driver, row, now)))


def _reasons(driver: JobDriver, row: JobSnapshot, now: datetime) -> list[Reason]:
    if row.state == "running":
        return [
            Reason(
                "running",
                f"it is running: attempt {row.attempt}, held by {row.claimed_by}",
                {"worker": row.claimed_by, "attempt": row.attempt},
            )
        ]
    if row.state in FINISHED_STATES:
        return [Reason("finished", f"it has ended: {row.state}", {"state": row.state})]
    reasons = [*_held_by_its_row(driver, row, now)]
    reasons += _held_by_the_fleet(driver, row)
    reasons += _suspect(row)
    if row.state in WAITING_STATES and row.run_at <= now:
        reasons += _behind(driver, row)
    return reasons


def _held_by_its_row(driver: JobDriver, row: JobSnapshot, now: datetime) -> list[Reason]:
    """What the row itself says: its due time, a backoff, a sleep, an event wait."""
    wait = round((row.run_at - now).total_seconds(), 1)
    due: dict[str, Any] = {"until": row.run_at, "in_seconds": wait}
    if row.state == "suspended" and row.waiting_on and row.after is not None:
        return [_waiting_for_jobs(driver, row)]
    if row.state == "suspended":
        if (row.last_error or "").startswith("X_JOB_UNKNOWN"):
            # a worker claimed it and found no job of this name (SPEC EXEC-10)
            return [
                Reason(
                    "unknown_job",
                    f"no worker process registers {row.name!r}: parked until {row.run_at:%H:%M:%S}",
                    {"name": row.name, **due},
                )
            ]
        waiting = [s for s in driver.steps.list(row.run_id) if s.status in ("waiting", "sleeping")]
        for step in waiting[-1:]:
            if step.status == "waiting":
                return [
                    Reason(
                        "waiting_for_event",
                        f"step {step.name!r} waits for event {step.event!r}"
                        + (f" matching {step.correlation_key!r}" if step.correlation_key else "")
                        + f", until {row.run_at:%H:%M:%S} at the latest",
                        {
                            "step": step.name,
                            "event": step.event,
                            "match": step.correlation_key,
                            **due,
                        },
                    )
                ]
            return [
                Reason(
                    "sleeping",
                    f"step {step.name!r} sleeps until {row.run_at:%H:%M:%S}",
                    {"step": step.name, **due},
                )
            ]
        return [Reason("sleeping", f"suspended until {row.run_at:%H:%M:%S}", due)]
    if row.run_at <= now:
        return []
    if row.attempt >= 1 and (row.errors or row.last_error):
        return [
            Reason(
                "backing_off",
                f"backing off after attempt {row.attempt} failed: next attempt at "
                f"{row.run_at:%H:%M:%S} (in {_span(wait)})",
                {"attempt": row.attempt, "error": row.last_error, **due},
            )
        ]
    return [
        Reason(
            "scheduled",
            f"scheduled for {row.run_at:%Y-%m-%d %H:%M:%S} (in {_span(wait)})",
            due,
        )
    ]


def _waiting_for_jobs(driver: JobDriver, row: JobSnapshot) -> Reason:
    """A dependant (``using(after=...)``, issue 32): the jobs it still waits for, by state. It
    is released by the settle of the last one, never by a timer."""
    states = {}
    for job_id in row.after or ():
        dependency = driver.get_job(job_id)
        states[str(job_id)] = None if dependency is None else dependency.state
    pending = [job_id for job_id, state in states.items() if state != "done"]
    total = len(states)
    return Reason(
        "waiting_for_jobs",
        f"waiting for {row.waiting_on} of {total} job{'s' if total != 1 else ''} it runs after: "
        + ", ".join(f"{job_id} ({states[job_id]})" for job_id in pending[:5])
        + (f" and {len(pending) - 5} more" if len(pending) > 5 else ""),
        {"waiting_on": row.waiting_on, "after": states, "run_anyway": row.run_anyway},
    )


def _held_by_the_fleet(driver: JobDriver, row: JobSnapshot) -> list[Reason]:
    """What the fleet says: a paused queue, a full concurrency cap, no worker on the queue, a
    name this process does not know either."""
    reasons: list[Reason] = []
    controls = {c.queue: c for c in driver.queue_controls()}
    control = controls.get(row.queue)
    if control is not None and control.paused:
        by = f" by {control.paused_by}" if control.paused_by else ""
        reasons.append(
            Reason(
                "queue_paused",
                f"queue {row.queue!r} is paused{by} since {control.paused_at:%Y-%m-%d %H:%M:%S}",
                {"queue": row.queue, "paused_at": control.paused_at, "by": control.paused_by},
            )
        )
    handle = registry.get_job(row.name)
    leases = driver.leases
    if handle is not None and handle.concurrency and leases is not None:
        held = leases.held(f"job:{row.name}")  # SPEC SLOT-02: the fleet-wide key
        if held >= handle.concurrency:
            running = driver.list_jobs(name=row.name, state="running", limit=handle.concurrency)
            holders = [{"id": str(r.id), "worker": r.claimed_by} for r in running]
            who = ", ".join(f"{str(r.id)[:8]} on {r.claimed_by}" for r in running) or "lapsing runs"
            reasons.append(
                Reason(
                    "job_at_limit",
                    f"{row.name} is at its concurrency limit ({held}/{handle.concurrency}): "
                    f"held by {who}",
                    {"limit": handle.concurrency, "held": held, "holders": holders},
                )
            )
    alive = [w for w in driver.workers() if w.alive]
    watching = [w.id for w in alive if row.queue in w.queues]
    if not watching:
        reasons.append(
            Reason(
                "no_worker",
                f"no live worker watches queue {row.queue!r}"
                + (
                    f" ({len(alive)} live on other queues)" if alive else " (no live worker at all)"
                ),
                {"queue": row.queue, "live_workers": len(alive)},
            )
        )
    if handle is None and row.state != "suspended":
        reasons.append(
            Reason(
                "not_registered_here",
                f"this process registers no job named {row.name!r}; a worker that does not "
                "either will park it as unknown",
                {"name": row.name},
            )
        )
    return reasons


def _suspect(row: JobSnapshot) -> list[Reason]:
    """SPEC LEASE-19: its last run died with its worker, or died alone, so its next run is
    isolated in a child process; that holds nothing back, but it is why it runs apart."""
    if row.lapsed_holder is None and not row.lease_expiries:
        return []
    bound = conf.get().max_lease_expiries
    if row.lapsed_holder is not None:
        cause = f"its last run died with worker {row.lapsed_holder} (not counted as its crash)"
    else:
        cause = f"{row.lease_expiries} of its runs in a row died alone ({bound} dead-letter it)"
    return [
        Reason(
            "suspect",
            f"{cause}: the worker that claims it runs it alone in a child process, beside its "
            "other runs",
            {
                "died_with": row.lapsed_holder,
                "crashes": row.lease_expiries,
                "max_crashes": bound,
                "isolated": True,
            },
        )
    ]


def _behind(driver: JobDriver, row: JobSnapshot) -> list[Reason]:
    """The due jobs of its queue a claim takes first (priority, then due time, then id)."""
    waiting = driver.list_jobs(queue=row.queue, state="ready", limit=_AHEAD_CAP)
    mine = (-row.priority, row.run_at, row.id)
    ahead = [r for r in waiting if (-r.priority, r.run_at, r.id) < mine]
    if not ahead:
        return []
    higher = sum(r.priority > row.priority for r in ahead)
    more = "at least " if len(waiting) >= _AHEAD_CAP else ""
    return [
        Reason(
            "behind",
            f"behind {more}{len(ahead)} due jobs of queue {row.queue!r} "
            f"({higher} of higher priority, {len(ahead) - higher} older)",
            {"ahead": len(ahead), "higher_priority": higher},
        )
    ]


def _span(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} m"
    return f"{seconds / 3600:.1f} h"


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    return value
