"""What the job's own row and its run's steps hold it by: a due time, a backoff, a snooze, a sleep,
an event, child jobs, dependencies, an unknown name, an expiry."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from ... import redact
from ...declarations import registry
from ...drivers.contract import JobDriver, JobSnapshot, StepRecord
from ...drivers.rules import FAR_FUTURE
from ...durations import format_span, format_time
from ...states import FINISHED_STATES, WAITING_STATES
from .causes import Reason, because
from .versions import parked_reason

#: jobs a reason names by id, at most (the JSON carries every state's count)
NAMED = 5


def row_reasons(driver: JobDriver, row: JobSnapshot, now: datetime) -> list[Reason]:
    """The causes the row says, most decisive first."""
    if row.state == "suspended":
        reasons = _parked(driver, row, now)
    elif row.state in WAITING_STATES and row.after_failed is not None:
        reasons = [_dependency_failed(driver, row)]
    elif row.state in WAITING_STATES and row.run_at > now:
        reasons = [_not_due(row, now)]
    else:
        reasons = []
    return reasons + _expiry(row, now)


def due(row: JobSnapshot, now: datetime) -> dict[str, Any]:
    return {"until": row.run_at, "in_seconds": round((row.run_at - now).total_seconds(), 1)}


def _not_due(row: JobSnapshot, now: datetime) -> Reason:
    """A waiting row whose time has not come: a snooze, a retry's backoff, or its schedule."""
    wait = (row.run_at - now).total_seconds()
    latest = row.errors[-1] if row.errors else None
    if latest is not None and latest.outcome == "snoozed" and row.snoozes:
        return because(
            "snoozed",
            f"its handler snoozed it (snooze {row.snoozes}): it runs again at "
            f"{format_time(row.run_at)} (in {format_span(wait)}), no attempt spent",
            snoozes=row.snoozes,
            **due(row, now),
        )
    if row.attempt >= 1 and (row.errors or row.last_error):
        return because(
            "backing_off",
            f"backing off after attempt {row.attempt} of {row.max_attempts} failed: the next "
            f"attempt is at {format_time(row.run_at)} (in {format_span(wait)})",
            attempt=row.attempt,
            error=row.last_error,
            **due(row, now),
        )
    return because(
        "scheduled",
        f"scheduled for {format_time(row.run_at)} (in {format_span(wait)})",
        **due(row, now),
    )


def _parked(driver: JobDriver, row: JobSnapshot, now: datetime) -> list[Reason]:
    if row.parked:  # by a worker of a newer version (issue 44), whatever step it was at
        return [parked_reason(row, registry.get_job(row.name))]
    if row.waiting_on and row.after is not None:
        return [_waiting_for_jobs(driver, row)]
    if (row.last_error or "").startswith("X_JOB_UNKNOWN"):
        # a worker claimed it and found no job of this name (SPEC EXEC-10)
        return [
            because(
                "unknown_job",
                f"no worker process registers {row.name!r}: parked until "
                f"{format_time(row.run_at)}, then dead-lettered once XJOBS['UNKNOWN_JOB_GRACE'] "
                "runs out",
                name=row.name,
                until=row.run_at,
            )
        ]
    if (row.last_error or "").startswith("X_ENCRYPTION_KEY_MISSING"):
        # SPEC CRYPT-05: a worker without the key gave it back unrun
        return [
            because(
                "key_missing",
                "its input is encrypted with a key the worker that claimed it lacks: parked "
                f"until {format_time(row.run_at)}, its attempt given back; add the key to "
                "XJOBS['ENCRYPTION_KEYS']",
                until=row.run_at,
            )
        ]
    waiting = [s for s in driver.steps().list(row.run_id) if s.status in ("waiting", "sleeping")]
    for step in waiting[-1:]:
        output = step.output if isinstance(step.output, dict) else {}
        if step.status == "waiting" and "children" in output:
            return [_waiting_for_children(driver, step, output)]
        if step.status == "waiting":
            return [_waiting_for_event(step, output, row, now)]
        return [
            because(
                "sleeping",
                f"step {step.name!r} sleeps until {format_time(row.run_at)} "
                f"(in {format_span((row.run_at - now).total_seconds())})",
                step=step.name,
                **due(row, now),
            )
        ]
    return [
        because(
            "sleeping",
            f"parked until {format_time(row.run_at)}",
            step=None,
            **due(row, now),
        )
    ]


def _waiting_for_event(
    step: StepRecord, output: Mapping[str, object], row: JobSnapshot, now: datetime
) -> Reason:
    """The event, its match and correlation key, and the wait's real deadline: the row's run_at
    is only the next look (``event_poll``)."""
    # a match may name a secret field (an api token): masked as every payload is
    match = redact.mask(output.get("match"))
    until = _moment(output.get("until"))
    required = bool(output.get("required", False))
    text = f"step {step.name!r} waits for event {step.event!r}"
    if match:
        text += " matching " + ", ".join(f"{k}={v!r}" for k, v in match.items())
    if step.correlation_key:
        text += f" with correlation key {step.correlation_key!r}"
    if until is not None:
        left = format_span((until - now).total_seconds())
        then = "fails the run (required)" if required else "returns None"
        text += f"; it times out at {format_time(until)} (in {left}) and then {then}"
    else:  # a wait recorded before the deadline was kept: only the next look is known
        text += f"; it looks again at {format_time(row.run_at)}"
    return because(
        "waiting_for_event",
        text,
        step=step.name,
        event=step.event,
        match=match,
        correlation_key=step.correlation_key,
        until=until,
        in_seconds=None if until is None else round((until - now).total_seconds(), 1),
        required=required,
    )


def _waiting_for_children(driver: JobDriver, step: StepRecord, output: dict[str, Any]) -> Reason:
    """A parent parked on ``ctx.step.call``/``call_many``: its children, by state. The settle of
    the last one makes it due (SPEC CHILD-07)."""
    ids = [UUID(str(i)) for i in output.get("children", [])]
    states = driver.reads().job_states(ids)
    counts: dict[str, int] = {}
    for child in ids:
        state = states.get(child, "missing")
        counts[state] = counts.get(state, 0) + 1
    pending = [i for i in ids if states.get(i) not in FINISHED_STATES]
    each = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    named = ", ".join(f"{i} ({states.get(i, 'missing')})" for i in pending[:NAMED])
    more = f" and {len(pending) - NAMED} more" if len(pending) > NAMED else ""
    return because(
        "waiting_for_children",
        f"step {step.name!r} waits for {len(pending)} of its {len(ids)} child job"
        f"{'s' if len(ids) != 1 else ''} of {output.get('job')!r} ({each}): {named}{more}; "
        "the last one to end wakes it",
        step=step.name,
        job=output.get("job"),
        children=len(ids),
        pending=len(pending),
        states=counts,
        ids=[str(i) for i in pending],
    )


def _waiting_for_jobs(driver: JobDriver, row: JobSnapshot) -> Reason:
    """A dependant (``using(after=...)``, issue 32): the jobs it still waits for, by state. It
    is released by the settle of the last one, never by a timer."""
    after = list(row.after or ())
    states = driver.reads().job_states(after)
    shown = {str(i): states.get(i) for i in after}
    pending = [i for i in after if states.get(i) != "done"]
    total = len(after)
    return because(
        "waiting_for_jobs",
        f"it runs after its dependencies: waiting for {row.waiting_on} of {total} "
        f"job{'s' if total != 1 else ''}: "
        + ", ".join(f"{i} ({states.get(i)})" for i in pending[:NAMED])
        + (f" and {len(pending) - NAMED} more" if len(pending) > NAMED else ""),
        waiting_on=row.waiting_on,
        after=shown,
        run_anyway=row.run_anyway,
    )


def _dependency_failed(driver: JobDriver, row: JobSnapshot) -> Reason:
    failed = row.after_failed
    state = driver.reads().job_states([failed]).get(failed) if failed is not None else None
    return because(
        "dependency_failed",
        f"job {failed} it runs after ended {state or 'unknown'}: the next claim ends this one "
        "(stop reason dependency_failed) without running it",
        after_failed=None if failed is None else str(failed),
        state=state,
    )


def _expiry(row: JobSnapshot, now: datetime) -> list[Reason]:
    """Not started by its ``expires_at``, a job never runs (issue 29); a run that started once is
    past it. A failed dependency's end rides on it too, said by its own cause."""
    if row.expires_at is None or row.started_at is not None or row.after_failed is not None:
        return []
    if row.state not in (*WAITING_STATES, "suspended") or row.expires_at >= FAR_FUTURE:
        return []
    if row.expires_at <= now:
        text = (
            f"it expired at {format_time(row.expires_at)} without starting: the next claim "
            "ends it (stop reason expired) and never runs it"
        )
    else:
        text = (
            f"if it has not started by {format_time(row.expires_at)} (in "
            f"{format_span((row.expires_at - now).total_seconds())}) it never runs "
            "(stop reason expired)"
        )
    return [because("expiry", text, expires_at=row.expires_at, expired=row.expires_at <= now)]


def _moment(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
