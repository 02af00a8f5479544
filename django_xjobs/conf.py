"""The ``XJOBS`` setting: defaults, validation, and one cached, typed view of it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from .durations import parse_duration
from .errors import ConfigInvalidError, XJobsError

DEFAULTS: dict[str, Any] = {
    # the database alias that holds the x_* tables
    "DATABASE": "default",
    # "postgres" (production) or "memory" (one process, for tests and experiments)
    "DRIVER": "postgres",
    # queue names jobs may be routed to with .using(queue=...) beyond those jobs declare
    "QUEUES": [],
    # a claim holds a job this long unless the worker's heartbeat renews it (SPEC LEASE-01)
    "VISIBILITY_TIMEOUT": 30,
    # how often an idle worker looks for due jobs when no notification woke it
    "POLL_INTERVAL": 1,
    # threads per worker process when --concurrency is not given
    "CONCURRENCY": 5,
    # inputs and results larger than this are refused at enqueue / settle
    "MAX_PAYLOAD_BYTES": 256 * 1024,
    # a row whose job name no process knows is parked this long between looks (SPEC EXEC-10)
    "UNKNOWN_JOB_DELAY": 30,
    # ... and dead-lettered once it has been unknown this long after it was created
    "UNKNOWN_JOB_GRACE": 24 * 3600,
}

QUEUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


@dataclass(frozen=True)
class XJobsSettings:
    database: str
    driver: str
    queues: tuple[str, ...]
    visibility_timeout: float
    poll_interval: float
    concurrency: int
    max_payload_bytes: int
    unknown_job_delay: float
    unknown_job_grace: float


def validate(raw: Any) -> XJobsSettings:
    """Check a raw ``XJOBS`` dict; raise ``ConfigInvalidError`` naming the first bad key."""
    if not isinstance(raw, dict):
        raise ConfigInvalidError(
            f"XJOBS must be a dict, got {type(raw).__name__}",
            hint='e.g. XJOBS = {"DATABASE": "default"}',
        )
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        raise ConfigInvalidError(
            f"XJOBS has unknown key(s) {', '.join(unknown)}",
            hint=f"known keys: {', '.join(sorted(DEFAULTS))}",
        )
    merged = {**DEFAULTS, **raw}

    def duration(key: str) -> float:
        try:
            return parse_duration(merged[key], field=f'XJOBS["{key}"]')
        except XJobsError as error:
            raise ConfigInvalidError(error.message, hint=error.hint) from error

    def positive_int(key: str) -> int:
        value = merged[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigInvalidError(
                f'XJOBS["{key}"]={value!r} must be a positive integer',
                hint=f"the default is {DEFAULTS[key]!r}",
            )
        return value

    if merged["DRIVER"] not in ("postgres", "memory"):
        raise ConfigInvalidError(
            f'XJOBS["DRIVER"]={merged["DRIVER"]!r} is not a driver',
            hint='use "postgres" or "memory"',
        )
    if merged["DATABASE"] not in settings.DATABASES:
        raise ConfigInvalidError(
            f'XJOBS["DATABASE"]={merged["DATABASE"]!r} is not an alias in DATABASES',
            hint=f"aliases: {', '.join(settings.DATABASES)}",
        )
    queues = merged["QUEUES"]
    if isinstance(queues, str) or not all(isinstance(q, str) for q in queues):
        raise ConfigInvalidError('XJOBS["QUEUES"] must be a list of names', hint='e.g. ["emails"]')
    for queue in queues:
        check_queue_name(queue, error=ConfigInvalidError)
    return XJobsSettings(
        database=merged["DATABASE"],
        driver=merged["DRIVER"],
        queues=tuple(queues),
        visibility_timeout=duration("VISIBILITY_TIMEOUT"),
        poll_interval=duration("POLL_INTERVAL"),
        concurrency=positive_int("CONCURRENCY"),
        max_payload_bytes=positive_int("MAX_PAYLOAD_BYTES"),
        unknown_job_delay=duration("UNKNOWN_JOB_DELAY"),
        unknown_job_grace=duration("UNKNOWN_JOB_GRACE"),
    )


def check_queue_name(queue: Any, *, error: type[XJobsError]) -> str:
    if not isinstance(queue, str) or not QUEUE_NAME.match(queue):
        raise error(
            f"queue name {queue!r} is not valid",
            hint="use 1-64 letters, digits, '_', '.', ':' or '-', starting with a letter or digit",
        )
    return queue


@cache
def get() -> XJobsSettings:
    """The validated settings (cached; refreshed when a test overrides ``XJOBS``)."""
    return validate(getattr(settings, "XJOBS", {}))


@receiver(setting_changed)
def _refresh(setting: str, **kwargs: Any) -> None:
    if setting in ("XJOBS", "DATABASES"):
        get.cache_clear()
