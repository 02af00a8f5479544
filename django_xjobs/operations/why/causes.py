"""Every cause ``why_job`` can name, one per gate that can hold a job back (issue 42).

A gate added to the library adds its cause here in the same change (STYLE: "every gate explains
itself"); ``tests/operations/test_why.py`` builds each cause's gate and reads the answer back,
and fails for a cause it cannot build and for a gate it finds in the code with no cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import InvariantError


@dataclass(frozen=True)
class Cause:
    """A ``Reason.code``, the gate it names, and the ``detail`` fields its JSON always carries."""

    code: str
    gate: str
    fields: tuple[str, ...]


CAUSES: tuple[Cause, ...] = (
    # the job's own row
    Cause("running", "it runs now", ("worker", "attempt", "since", "lapsed")),
    Cause("finished", "it has ended", ("state", "stop_reason")),
    Cause("scheduled", "enqueued for later (delay, run_at)", ("until", "in_seconds")),
    Cause(
        "backing_off", "a failed attempt's retry delay", ("attempt", "error", "until", "in_seconds")
    ),
    Cause("snoozed", "its handler snoozed (ctx.snooze)", ("snoozes", "until", "in_seconds")),
    Cause("sleeping", "a step sleeps (ctx.step.sleep)", ("step", "until", "in_seconds")),
    Cause(
        "waiting_for_event",
        "a step waits for an event (ctx.step.wait_for_event)",
        ("step", "event", "match", "correlation_key", "until", "in_seconds", "required"),
    ),
    Cause(
        "waiting_for_children",
        "a step waits for its child jobs (ctx.step.call, call_many)",
        ("step", "job", "children", "pending", "states", "ids"),
    ),
    Cause(
        "waiting_for_jobs",
        "its dependencies (using(after=...))",
        ("waiting_on", "after", "run_anyway"),
    ),
    Cause("dependency_failed", "a dependency ended otherwise", ("after_failed", "state")),
    Cause("unknown_job", "no worker registers its name (parked)", ("name", "until")),
    Cause("key_missing", "its input is encrypted with a key the worker lacks (parked)", ("until",)),
    Cause("expiry", "not started by its expiry, it never runs", ("expires_at", "expired")),
    Cause(
        "version_parked",
        "a worker of a newer version parked it (job(old_runs='park'))",
        ("version", "declared"),
    ),
    # the fleet and the limits
    Cause("queue_paused", "an operator paused its queue", ("queue", "paused_at", "by", "until")),
    Cause("queue_at_cap", "its queue's cap (set_queue_limit)", ("queue", "limit", "running")),
    Cause(
        "job_paused",
        "an operator paused its job or its key (pause_jobs)",
        ("job", "key", "paused_at", "by", "until"),
    ),
    Cause(
        "job_at_limit",
        "its job's concurrency, per name (job(concurrency=))",
        ("limit", "held", "holders"),
    ),
    Cause(
        "key_at_limit",
        "its key's concurrency (job(concurrency=, limit_key=))",
        ("key", "limit", "running", "holders"),
    ),
    Cause(
        "rate_limited",
        "its key's rate budget (job(rate_limit=))",
        ("key", "rate", "starts_in_window", "next_slot_at", "in_seconds"),
    ),
    Cause("key_paused", "its key paused by RateLimited(retry_after=)", ("key", "until")),
    Cause(
        "fair_share",
        "fair-share turns (XJOBS['FAIR_SHARE'])",
        ("group", "turn", "groups_waiting", "ahead"),
    ),
    Cause("behind", "due jobs a claim takes first", ("ahead", "higher_priority", "at_least")),
    Cause(
        "worker_limits",
        "every worker's per-process caps (XJOBS['LIMITS'])",
        ("queue", "tenant_id", "workers"),
    ),
    Cause(
        "suspect",
        "a suspect (its last run died with its worker, or alone) runs in a child process; it "
        "holds nothing back",
        ("died_with", "crashes", "max_crashes", "isolated"),
    ),
    Cause("no_worker", "no live worker watches its queue", ("queue", "live_workers")),
    Cause(
        "newer_version",
        "it started under a newer version than this process declares (job(version=))",
        ("version", "declared"),
    ),
    Cause(
        "not_registered_here",
        "this process does not register its name",
        ("name",),
    ),
)

BY_CODE = {cause.code: cause for cause in CAUSES}


@dataclass(frozen=True)
class Reason:
    """One cause that holds now: ``code`` is one of ``CAUSES`` (stable), ``text`` says it for
    an operator, ``detail`` carries its figures (its cause's ``fields``, always all of them)."""

    code: str
    text: str
    detail: Mapping[str, Any] = field(default_factory=dict)


def because(code: str, text: str, **detail: object) -> Reason:
    """A reason of cause ``code``; its detail must be the cause's fields, no more, no fewer."""
    cause = BY_CODE[code]
    if set(detail) != set(cause.fields):
        raise InvariantError(
            f"why: cause {code!r} carries {sorted(detail)}, not its fields {sorted(cause.fields)}"
        )
    return Reason(code, text, {name: detail[name] for name in cause.fields})
