"""Operators' side of fleet-wide limits: a queue's runtime cap (``set_queue_limit``) and what
each limit key uses now (``inspect_limits``), for the CLI and the admin's queues page.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from .. import conf, log, redact
from ..declarations import registry
from ..drivers import get_driver
from ..drivers.contract import QueueState
from ..drivers.reading import read_driver, reading_primary
from ..durations import Duration
from ..errors import InvariantError
from ..operations import audit
from ..operations.answers import KeyUseReport
from ..operations.fleet import pause_end
from ..text import check_label
from .claims import in_window
from .keys import SEPARATOR


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
    until: datetime | Duration,
    by: str | None = None,
) -> KeyUseReport:
    """Start no run of job ``name`` — of its one limit key ``limit_key``, as its template
    renders it — until ``until`` (an aware time, or a duration from now), fleet-wide; the pause
    ends by itself then (SPEC PAUSE-03). The same pause a run's ``RateLimited`` takes, in the
    key's row: a later pause wins over an earlier one, so the answer's ``paused_until`` may be
    later than asked. Runs in flight finish; ``why`` names the pause (``key_paused``).

    The job must declare a key (``limit_key=`` or ``rate_limit=``): a job that declares none has
    no key to pause (pause its queue instead), and ``limit_key`` is given exactly when its
    declaration has a template::

        >>> pause_jobs(name="billing.jobs.sync", limit_key="acme", until="2h")["paused_until"]
        '2026-12-07T05:00:00+00:00'
    """
    check_label(by, "by")
    handle = registry.jobs.get(name) if isinstance(name, str) else None
    limits = None if handle is None else handle.limits
    if limits is None:
        raise InvariantError(
            f"job {name!r} declares no limit key, so no key of it can be paused",
            hint="pause_jobs pauses a job declared with limit_key= or rate_limit=; pause its "
            "queue instead: pause_queue(queue, until=...)",
        )
    if (limits.key is None) != (limit_key is None) or (
        limit_key is not None and not isinstance(limit_key, str)
    ):
        wanted = f"its limit_key={limits.key!r} rendered" if limits.key else "no limit_key"
        raise InvariantError(
            f"job {name!r} is paused by {wanted}, not limit_key={limit_key!r}",
            hint="give limit_key exactly when the job's declaration has a template, as "
            "xjobs queues lists its keys",
        )
    key = name + SEPARATOR + (limit_key or "")  # keys.render's form
    driver = get_driver()
    now = driver.steps().now()
    ends = pause_end(now, until)
    if ends is None:
        raise InvariantError("pause_jobs needs until=", hint='a time, or a duration: "2h"')
    driver.limits().pause_key(key, (ends - now).total_seconds())
    shown = limit_key or ""
    audit.record("pause_jobs", by=by, target=f"{name}[{shown}]", reason=f"until {ends.isoformat()}")
    with reading_primary():  # the answer to a write reads where it was written (SPEC READ-01)
        used = inspect_limits()
    found = [
        k
        for k in used
        if k.job == name and k.key == redact.key_shown(shown, limits.key, values=True)
    ]
    return (
        found[0]
        if found
        else KeyUseReport(
            job=name,
            key=shown,
            running=0,
            concurrency=limits.concurrency,
            rate_limit=None if limits.rate is None else str(limits.rate),
            starts_in_window=0,
            paused_until=ends.isoformat(),
        )
    )


def queue_limits() -> dict[str, int]:
    """The caps operators set, by queue."""
    return get_driver().limits().queue_limits()


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
