"""``raise RateLimited(retry_after=...)``: the partner's word pauses the run's limit key, and
the run goes back unspent (issue 31).

The pause is stored on the key (``x_limit_keys.paused_until``), which every limited claim
reads: no run of the key is claimed before it runs out, on any worker. The run itself is handed
back as a shed is (ready after the delay, its attempt given back, SPEC WORK-08), so neither
this attempt nor the wait counts against ``Retry(attempts=...)``.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from .. import log
from ..drivers.contract import ClaimedJob, JobDriver, Shed
from ..durations import parse_duration
from ..errors import RateLimited, XJobsError
from .keys import key_of, shown

#: when the partner names no time: the least wait that is not a busy loop
DEFAULT_SECONDS = 1.0
#: the longest a partner's word holds a key: a date a year out is a mistake, not a plan
MAX_SECONDS = 86400.0


def seconds(value: Any) -> float:
    """``retry_after`` in seconds: a number, a duration, or a ``Retry-After`` header's value
    (delta-seconds or an HTTP date); what cannot be read waits the default."""
    if value is None:
        return DEFAULT_SECONDS
    if isinstance(value, str) and value.strip().isdigit():  # Retry-After: delta-seconds
        return min(MAX_SECONDS, float(value))
    if isinstance(value, str):
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            return min(MAX_SECONDS, max(0.0, (when - datetime.now(UTC)).total_seconds()))
    try:
        return min(MAX_SECONDS, parse_duration(value, field="retry_after"))
    except XJobsError:
        return DEFAULT_SECONDS


def handed_back(job: ClaimedJob, error: RateLimited, driver: JobDriver) -> Shed:
    """Pause the job's key for the stated time and hand the run back for then."""
    delay = seconds(error.retry_after)
    key = key_of(job.name, job.input, fair=False)  # a declared limit's key, not a tenant's turn
    if key is not None:
        try:
            driver.limits().pause_key(key, delay)
        except Exception as problem:  # the run still goes back for then; its key runs on
            log.event(logging.WARNING, "xjobs.limit.pause_failed", id=job.id, error=problem)
    log.event(
        logging.INFO,
        "xjobs.limit.rate_limited",
        job=job.name,
        id=job.id,
        key=shown(key) if key is not None else None,
        retry_in=f"{delay:g}s",
    )
    return Shed(job.id, job.lease_token, delay=delay, reason=f"rate limited for {delay:g}s")
