"""Operators' side of fleet-wide limits: a queue's runtime cap (``set_queue_limit``) and what
each limit key uses now (``inspect_limits``), for the CLI and the admin's queues page.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from .. import conf, log, redact
from ..declarations import registry
from ..drivers import get_driver
from ..drivers.contract import JobPause, QueueState
from ..drivers.reading import read_driver, reading_primary
from ..durations import Duration
from ..errors import InvariantError
from ..operations import audit
from ..operations.answers import Answer, KeyUseReport
from ..operations.fleet import pause_end
from ..text import check_label
from ..worker.paused import changed_here
from .claims import in_window
from .keys import SEPARATOR, JobLimits


@dataclass(frozen=True, eq=False)
class JobPauseReport(Answer):
    """An operator's pause of a job, or of one of its limit keys (``pause_jobs``,
    ``resume_jobs``, ``inspect_job_pauses``): the job, the key as its template renders it (None:
    the whole job), whether it is paused, since when and by whom, and when it ends by itself
    (ISO times; ``paused_until`` None while paused: until ``resume_jobs``). ``lifted``: a
    ``resume_jobs`` that found a pause in force."""

    job: str
    key: str | None
    paused: bool
    paused_at: str | None = None
    paused_by: str | None = None
    paused_until: str | None = None
    lifted: bool = False


def set_queue_limit(name: str, concurrency: int | None, *, by: str | None = None) -> QueueState:
    """At most ``concurrency`` runs of queue ``name`` at once across the whole fleet, from the
    next claim of each worker (woken by a notification); None removes the cap. Stored beside the
    queue's pause, so it outlives restarts and deploys. Each worker's ``--concurrency`` stays its
    own ceiling; runs in flight when a cap is lowered finish::

        >>> set_queue_limit("emails", 5).limit
        5
    """
    conf.check_queue_name(name, error=InvariantError)
    check_label(by, "by")
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise InvariantError(
            f"a queue limit of {concurrency!r} is not a positive whole number",
            hint="give the most runs at once, e.g. 5; pause_queue() stops a queue, None lifts "
            "the cap",
        )
    state = get_driver().limits().set_queue_limit(name, concurrency)
    log.event(logging.WARNING, "xjobs.queue.limited", queue=name, limit=concurrency, by=by)
    audit.record("set_queue_limit", by=by, target=name, reason=f"limit {concurrency}")
    return state


def pause_jobs(
    *,
    name: str,
    limit_key: str | None = None,
    until: datetime | Duration | None = None,
    by: str | None = None,
) -> JobPauseReport:
    """Start no run of job ``name`` — or of its one limit key ``limit_key``, as its template
    renders it — fleet-wide, until ``until`` (an aware time, or a duration from now), when the
    pause ends by itself, or, with no ``until``, until ``resume_jobs`` (SPEC PAUSE-03..05). Runs
    in flight finish; enqueues still land and wait; ``why`` names the pause.

    Without ``limit_key`` the whole job is paused, whatever it declares: each worker reads the
    pauses once a poll (woken by a notification) and its claims step over the job's runs.
    Pausing a paused job keeps its first pause and takes the new end. ``limit_key`` is given
    only for a job whose declaration has a key template (``limit_key=``); a key's pause with an
    end is the pause a run's ``RateLimited`` takes, in the key's row (a later one wins), and one
    with none holds the key until resumed::

        >>> pause_jobs(name="billing.jobs.sync", limit_key="acme", until="2h")["paused_until"]
        '2026-12-07T05:00:00+00:00'
        >>> pause_jobs(name="shop.jobs.send_receipt", by="ops:alice")["paused_until"] is None
        True
    """
    check_label(by, "by")
    limits = _paused_job(name, limit_key)
    driver = get_driver()
    ends = pause_end(driver.steps().now(), until)
    shown = name if limit_key is None else f"{name}[{limit_key}]"
    reason = "until resumed" if ends is None else f"until {ends.isoformat()}"
    if limit_key is None or ends is None:
        pause = driver.limits().pause_job(name, limit_key, by, ends)
        changed_here()  # this process's workers too, a test's tick() included (SPEC PAUSE-11)
        log.event(logging.WARNING, "xjobs.job.paused", job=shown, by=by, until=ends)
        audit.record("pause_jobs", by=by, target=f"{name}[{limit_key or ''}]", reason=reason)
        return _report(pause)
    key = name + SEPARATOR + limit_key  # keys.render's form
    now = driver.steps().now()
    driver.limits().pause_key(key, (ends - now).total_seconds())
    log.event(logging.WARNING, "xjobs.job.paused", job=shown, by=by, until=ends)
    audit.record("pause_jobs", by=by, target=f"{name}[{limit_key}]", reason=reason)
    with reading_primary():  # the answer to a write reads where it was written (SPEC READ-01)
        used = inspect_limits()
    rendered = redact.key_shown(limit_key, None if limits is None else limits.key, values=True)
    found = [k.paused_until for k in used if k.job == name and k.key == rendered]
    return JobPauseReport(
        job=name,
        key=limit_key,
        paused=True,
        paused_by=by,
        paused_until=found[0] if found and found[0] else ends.isoformat(),
    )


def resume_jobs(
    *, name: str, limit_key: str | None = None, by: str | None = None
) -> JobPauseReport:
    """Lift an operator's pause of job ``name`` (or of its limit key ``limit_key``: a key's
    pause with an end too, its ``RateLimited`` one included): its waiting runs start again in
    their usual order, every worker told at once (SPEC PAUSE-06). Resuming what is not paused
    changes nothing (``lifted`` False)::

        >>> resume_jobs(name="shop.jobs.send_receipt", by="ops:alice")["lifted"]
        True
    """
    check_label(by, "by")
    _paused_job(name, limit_key)
    lifted = get_driver().limits().resume_job(name, limit_key)
    changed_here()
    shown = name if limit_key is None else f"{name}[{limit_key}]"
    log.event(logging.INFO, "xjobs.job.resumed", job=shown, by=by, lifted=lifted)
    audit.record("resume_jobs", by=by, target=f"{name}[{limit_key or ''}]")
    return JobPauseReport(job=name, key=limit_key, paused=False, lifted=lifted)


def inspect_job_pauses() -> list[JobPauseReport]:
    """The operators' pauses of jobs and keys in force, by job; one past its end is over, and
    a key's pause with an end is listed by ``inspect_limits`` (SPEC PAUSE-06). Each is what
    ``pause_jobs`` answered::

        >>> [(p["job"], p["key"], p["paused_until"]) for p in inspect_job_pauses()]
        [('shop.jobs.send_receipt', None, None)]
    """
    return [_report(p) for p in read_driver()[0].limits().job_pauses()]


def _report(pause: JobPause) -> JobPauseReport:
    ends = pause.paused_until
    return JobPauseReport(
        job=pause.name,
        key=pause.key,
        paused=True,
        paused_at=pause.paused_at.isoformat(),
        paused_by=pause.paused_by,
        paused_until=None if ends is None else ends.isoformat(),
    )


def _paused_job(name: str, limit_key: str | None) -> JobLimits | None:
    """The declared limits of job ``name``, checked for a pause of it or of its key
    ``limit_key``: the job must be one this code declares, and a key is given only for a job
    whose declaration has a key template; else ``X_INVARIANT``."""
    handle = registry.get_job(name) if isinstance(name, str) else None
    if handle is None:
        raise InvariantError(
            f"no job named {name!r} is declared, so there is nothing of it to pause",
            hint="give a declared job's dotted name, as xjobs ls shows it; pause a queue with "
            "pause_queue(queue, until=...)",
        )
    declared = registry.jobs.get(name)
    limits = None if declared is None else declared.limits
    if limit_key is not None and (
        not isinstance(limit_key, str) or limits is None or limits.key is None
    ):
        wanted = (
            "declares no limit key"
            if limits is None
            else f"has no key template (limit_key={limits.key!r})"
        )
        raise InvariantError(
            f"job {name!r} {wanted}, so limit_key={limit_key!r} names nothing to pause",
            hint="leave limit_key out to pause the whole job; give it only for a job declared "
            "with a limit_key template, as xjobs queues lists its keys",
        )
    return limits


def queue_limits() -> dict[str, int]:
    """The caps operators set, by queue."""
    return {c.queue: c.limit for c in get_driver().limits().queue_controls() if c.limit is not None}


def inspect_limits(limit: int = 500) -> list[KeyUseReport]:
    """Each limit key used within a day: its job and rendered key, what its job declares, its
    runs now, its starts inside its rate window, and a pause (``RateLimited``) not yet over::

        >>> [(k["job"], k["key"], k["running"], k["concurrency"]) for k in inspect_limits()]
        [('billing.jobs.sync', 'acme', 1, 1)]
    """
    now = datetime.now(UTC)
    rows = []
    for key, paused_until, running, starts in read_driver()[0].limits().key_usage(limit):
        name, _, rendered = key.partition(SEPARATOR)
        handle = registry.jobs.get(name)
        limits = None if handle is None else handle.limits
        rate = None if limits is None else limits.rate
        paused = paused_until if paused_until is not None and paused_until > now else None
        rows.append(
            KeyUseReport(
                job=name,
                # made from the inputs: a template reading a secret input masks it (issue 40)
                key=redact.key_shown(rendered, None if limits is None else limits.key, values=True),
                running=running,
                concurrency=None if limits is None else limits.concurrency,
                rate_limit=None if rate is None else str(rate),
                starts_in_window=0 if rate is None else in_window(starts, rate.window, now),
                paused_until=None if paused is None else paused.isoformat(),
            )
        )
    return rows


def parse_cap(text: str) -> int | None:
    """``xjobs limit QUEUE N``'s N: a positive whole number, or ``off``."""
    if text.strip().lower() in ("off", "none", "-"):
        return None
    try:
        return int(text)
    except ValueError:
        raise InvariantError(
            f"a queue limit of {text!r} is not a whole number",
            hint='give the most runs at once, e.g. "xjobs limit emails 5", or "off" to lift it',
        ) from None


def limit_lines(keys: Sequence[KeyUseReport]) -> list[str]:
    """The limit keys below ``xjobs queues``' table, when any was used within a day."""
    if not keys:
        return []
    lines = [
        "",
        f"{'limit key':<48} {'running':>8} {'cap':>5} {'starts':>7} {'rate':>10}  paused until",
    ]
    for k in keys:
        name = f"{k.job}[{k.key}]" if k.key else k.job
        lines.append(
            f"{name:<48} {k.running:>8} {k.concurrency or '-':>5} "
            f"{k.starts_in_window:>7} {k.rate_limit or '-':>10}  {k.paused_until or '-'}"
        )
    return lines
