"""What every operator call shares: a job id given whole or as a unique prefix, and times
answered as ISO text."""

from __future__ import annotations

from datetime import datetime
from string import hexdigits
from uuid import UUID

from ..drivers import get_driver
from ..errors import (
    InvariantError,
    JobIdAmbiguousError,
    JobNotFoundError,
)
from ..text import check_label

#: the shortest id prefix looked up: fewer hex digits are likelier a typo than an id
MIN_PREFIX = 4
HEX_DIGITS = hexdigits.lower()
#: the jobs an ambiguous prefix's message lists
PREFIX_CANDIDATES = 5


def job_id_of(value: UUID | str) -> UUID:
    """A job id, or the one job id a prefix of it names (``0197a3c2-5b1e``, as ``xjobs ls``
    prints them); an ambiguous prefix is refused with the ids it could mean."""
    if isinstance(value, UUID):
        return value
    text = str(value).strip()
    try:
        return UUID(text)
    except ValueError:
        pass
    digits = text.replace("-", "").lower()
    if len(digits) < MIN_PREFIX or len(digits) >= 32 or set(digits) - set(HEX_DIGITS):
        raise JobNotFoundError(
            f"no job {value!r} exists",
            hint="that is not a job id; a job id is a UUID such as "
            "0197a3c2-5b1e-7c4d-9f00-1a2b3c4d5e6f, or at least its first "
            f"{MIN_PREFIX} hex digits",
        )
    low, high = UUID(digits.ljust(32, "0")), UUID(digits.ljust(32, "f"))
    found = get_driver().reads().job_ids_between(low, high, limit=PREFIX_CANDIDATES + 1)
    if not found:
        raise JobNotFoundError(
            f"no job id starts with {text!r}",
            hint="python manage.py xjobs ls lists recent jobs with their ids",
        )
    if len(found) > 1:
        listed = ", ".join(str(i) for i in found[:PREFIX_CANDIDATES])
        more = ", ..." if len(found) > PREFIX_CANDIDATES else ""
        raise JobIdAmbiguousError(
            f"{text!r} starts more than one job id: {listed}{more}",
            hint="give more of the id, or all of it",
        )
    return found[0]


def check_by(by: object) -> None:
    """``by=`` of an operator call: None, or a name ``text.check_label`` keeps (no NUL, lone
    surrogate, control character or escape; at most 200 characters), else ``X_INVARIANT``."""
    if by is not None and not isinstance(by, str):
        raise InvariantError(f"by={by!r} must be a string or None", hint='e.g. "ops:alice"')
    check_label(by, "by")


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
