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
from ..errors import InvariantError
from ..operations import audit
from ..operations.answers import KeyUseReport
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
    for key, paused_until, running, starts in get_driver().limits().key_usage(limit):
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
