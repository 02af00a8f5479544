"""``XJOBS["LIMITS"]``: the caps a worker process applies at admission (SPEC LIMIT-01..06),
read and refused here, with the settings, so ``conf`` needs nothing from the worker."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..durations import parse_duration
from ..errors import InvariantError, XJobsError
from ..text import did_you_mean

DEFAULT_MAX_TENANTS = 20_000
_KEYS = ("global", "per_queue", "per_tenant", "rate_per_tenant", "max_tenants")
_EXAMPLE = '{"global": 32, "per_queue": {"emails": 8}, "per_tenant": 4, "rate_per_tenant": {"limit": 100, "window": "1m"}}'


# --- the settings value ---------------------------------------------------------------------


@dataclass(frozen=True)
class RateLimit:
    """At most ``limit`` starts per tenant in any ``window`` seconds."""

    limit: int
    window: float


@dataclass(frozen=True)
class Limits:
    """The validated ``XJOBS["LIMITS"]``; ``None`` means no cap. Build it with ``parse_limits``."""

    global_: int | None = None
    #: One cap for every queue, or caps for the queues named (others are uncapped).
    per_queue: int | Mapping[str, int] | None = None
    per_tenant: int | None = None
    rate_per_tenant: RateLimit | None = None
    max_tenants: int = DEFAULT_MAX_TENANTS

    def queue_cap(self, queue: str) -> int | None:
        if isinstance(self.per_queue, Mapping):
            return self.per_queue.get(queue)
        return self.per_queue


def parse_limits(raw: object) -> Limits:
    """Read ``XJOBS["LIMITS"]`` (``{}`` means no caps), refusing any other shape with
    ``InvariantError`` naming the key. ``conf.py`` turns that into a system-check error.

    >>> parse_limits({"global": 8, "rate_per_tenant": {"limit": 10, "window": "1m"}}).rate_per_tenant
    RateLimit(limit=10, window=60.0)
    """
    if isinstance(raw, Limits):
        return raw
    if not isinstance(raw, Mapping):
        raise InvariantError(
            f"LIMITS={raw!r} is a {type(raw).__name__}, not a dict",
            hint=f"use {{}} for no caps, or e.g. {_EXAMPLE}",
        )
    for key in raw:
        if key not in _KEYS:
            guess = did_you_mean(key, _KEYS)
            raise InvariantError(
                f"unknown key {key!r}",
                hint=f"{guess + ' ' if guess else ''}the keys are {', '.join(_KEYS)}; e.g. {_EXAMPLE}",
            )
    return Limits(
        global_=_optional_count(raw, "global"),
        per_queue=_per_queue(raw["per_queue"]) if "per_queue" in raw else None,
        per_tenant=_optional_count(raw, "per_tenant"),
        rate_per_tenant=_rate(raw["rate_per_tenant"]) if "rate_per_tenant" in raw else None,
        max_tenants=_max_tenants(raw.get("max_tenants", DEFAULT_MAX_TENANTS)),
    )


def _count(value: object, field: str, hint: str) -> int:
    # bool is an int in Python; True as a cap is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvariantError(f"{field}={value!r} must be a positive integer", hint=hint)
    return value


def _optional_count(raw: Mapping[str, object], key: str) -> int | None:
    if key not in raw:
        return None
    return _count(
        raw[key],
        key,
        hint=f'give a whole number of runs above zero, e.g. "{key}": 8, or leave it out for no cap',
    )


def _per_queue(value: object) -> int | Mapping[str, int]:
    hint = 'give one cap for every queue ("per_queue": 8) or caps by queue name ("per_queue": {"emails": 8})'
    if not isinstance(value, Mapping):
        return _count(value, "per_queue", hint=hint)
    caps: dict[str, int] = {}
    for queue, cap in value.items():
        if not isinstance(queue, str) or not queue:
            raise InvariantError(f"per_queue key {queue!r} is not a queue name", hint=hint)
        caps[queue] = _count(cap, f"per_queue[{queue!r}]", hint=hint)
    return MappingProxyType(caps)


def _rate(value: object) -> RateLimit:
    hint = 'use {"limit": <starts>, "window": <duration>}, e.g. {"limit": 100, "window": "1m"} (window in seconds, a string or a timedelta)'
    if not isinstance(value, Mapping):
        raise InvariantError(f"rate_per_tenant={value!r} is not a dict", hint=hint)
    unknown = set(value) - {"limit", "window"}
    if unknown or "limit" not in value or "window" not in value:
        raise InvariantError(
            f"rate_per_tenant={dict(value)!r} needs exactly the keys limit and window",
            hint=hint,
        )
    limit = _count(value["limit"], "rate_per_tenant['limit']", hint=hint)
    try:
        window = parse_duration(value["window"], field="rate_per_tenant['window']")
    except XJobsError as problem:
        # One code for every bad LIMITS shape; the duration's own hint still says the fix.
        raise InvariantError(problem.message, hint=problem.hint) from None
    return RateLimit(limit=limit, window=window)


def _max_tenants(value: object) -> int:
    hint = f"give a whole number of tenants above zero; the default is {DEFAULT_MAX_TENANTS:_}"
    if isinstance(value, float) and not math.isfinite(value):
        # SPEC LIMIT-06: an unbounded map is exactly what the cap exists to prevent.
        raise InvariantError(f"max_tenants={value!r} must be finite", hint=hint)
    return _count(value, "max_tenants", hint=hint)


# --- the limiter ----------------------------------------------------------------------------
