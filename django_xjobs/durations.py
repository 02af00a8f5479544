"""Durations: a ``timedelta``, a number of seconds, or a string such as ``"2h30m"`` -> seconds.

One parser for every duration (DESIGN §7). In Python and settings a number is seconds and a
string needs a unit; on the command line, where every value is text, a bare number is seconds.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta

from django.utils import timezone

from .errors import DurationInvalidError, InvariantError

_UNITS = {
    "ms": 0.001,
    "s": 1,
    "sec": 1,
    "m": 60,
    "min": 60,
    "h": 3600,
    "hr": 3600,
    "d": 86400,
    "w": 604800,
}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|sec|min|hr|s|m|h|d|w)")
_DECIMAL = re.compile(r"[+-]?\d+(?:\.\d+)?")
_ISO = re.compile(
    r"P(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?"
)

Duration = timedelta | int | float | str

#: the longest duration anything takes (a delay, a timeout, a ttl, a retention): far past any
#: real use, and well inside PostgreSQL's timestamps, so ``now() + it`` never overflows
MAX_SECONDS = 100 * 365.25 * 86400
MAX_TEXT = "100 years"


def parse_duration(value: Duration, *, field: str = "duration") -> float:
    """Return ``value`` in seconds, refusing anything that is not a positive, finite duration.

    ``field`` names the argument in the error so the message points at the declaration.
    """
    if isinstance(value, bool):
        raise DurationInvalidError(f"{field}={value!r} is a bool, not a duration")
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_text(value, field)
    else:
        raise DurationInvalidError(f"{field}={value!r} is a {type(value).__name__}, not a duration")
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvariantError(
            f"{field}={value!r} must be a positive, finite duration",
            hint='give a duration above zero, such as "30s" or timedelta(minutes=5)',
        )
    if seconds > MAX_SECONDS:
        raise DurationInvalidError(
            f"{field}={value!r} is longer than {MAX_TEXT}, the longest duration accepted",
            hint=f"give at most {MAX_TEXT}; for later than that, nothing should wait in a queue",
            too_long=True,
        )
    return seconds


def parse_command_line(raw: str | None, *, flag: str) -> float | None:
    """A duration option's text in seconds, a bare number being seconds (``--older-than 30``);
    ``None`` when the option was not given::

        parse_command_line("30", flag="--older-than")  # 30.0
        parse_command_line("2h", flag="--older-than")  # 7200.0
    """
    if raw is None:
        return None
    number = _number(raw)
    try:
        return parse_duration(raw if number is None else number, field=flag)
    except (DurationInvalidError, InvariantError) as error:
        # the same rule, told in the shell's words: no timedelta, no quotes
        wrong = "must be above zero" if isinstance(error, InvariantError) else "is not a duration"
        if error.meta.get("too_long"):
            wrong = f"is longer than {MAX_TEXT}"
        raise type(error)(
            f"{flag} {raw} {wrong}",
            hint='give seconds (30) or a duration with a unit ("500ms", "5m", "2h30m", "3d")',
        ) from None


def parse_optional(value: Duration | None, *, field: str) -> float | None:
    """``parse_duration`` that lets ``None`` (meaning "not set") through."""
    return None if value is None else parse_duration(value, field=field)


def _parse_text(text: str, field: str) -> float:
    compact = text.strip().replace(" ", "")
    if compact.upper().startswith("P"):
        match = _ISO.fullmatch(compact.upper())
        if match and compact.upper() not in ("P", "PT") and not compact.upper().endswith("T"):
            factors = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
            return sum(float(v) * factors[k] for k, v in match.groupdict().items() if v)
    else:
        parts = _PART.findall(compact.lower())
        if parts and "".join(n + u for n, u in parts) == compact.lower():
            return sum(float(number) * _UNITS[unit] for number, unit in parts)
    if _number(text) is not None:
        raise DurationInvalidError(
            f"{field}={text!r} has no unit",
            hint=f'write "{text.strip()}s" for seconds, or pass the number {text.strip()} (not a string)',
        )
    raise DurationInvalidError(f"{field}={text!r} is not a duration")


def _number(text: str) -> float | None:
    """A plain decimal such as ``30``, ``-5`` or ``0.5``; None for anything else."""
    return float(text) if _DECIMAL.fullmatch(text.strip()) else None


def format_seconds(seconds: float) -> str:
    """A short human form (``"1.5s"``, ``"2m"``, ``"3h"``) for logs and tables."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def format_span(seconds: float) -> str:
    """A duration as an operator reads it: ``0.4s``, ``42s``, ``3m 12s``, ``2h 5m``, ``3d 4h``."""
    if seconds < 10:
        return f"{max(seconds, 0.0):.1f}s"
    whole = int(seconds)
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if whole >= size:
            return f"{whole // size}{unit} {whole % size // sub_size}{sub}"
    if whole >= 60:
        return f"{whole // 60}m {whole % 60}s"
    return f"{whole}s"


def format_time(when: datetime) -> str:
    """A moment as every screen prints it (issue 42): to the second, in Django's current time
    zone, named: ``2026-12-06 14:03:22 UTC``."""
    local = timezone.localtime(when) if timezone.is_aware(when) else when
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname() or ''}".rstrip()
