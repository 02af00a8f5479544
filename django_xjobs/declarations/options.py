"""What ``@job`` and ``JobHandle.using`` check of their per-call options: a priority in range,
``after`` as job ids, a delay as seconds, and ``after`` beside the options it contradicts."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Protocol
from uuid import UUID

from ..durations import Duration, parse_duration
from ..errors import InvariantError
from ..run.enqueue import EnqueueOptions


class _Declared(Protocol):
    name: str
    debounce: float | None


def check_priority(priority: object) -> None:
    if isinstance(priority, bool) or not isinstance(priority, int) or not -1000 <= priority <= 1000:
        raise InvariantError(
            f"priority={priority!r} must be an integer from -1000 to 1000",
            hint="higher runs first; the default is 0",
        )


def after_ids(after: Iterable[object] | None) -> tuple[UUID, ...] | None:
    """``using(after=...)`` as job ids: each a UUID, its text, or an enqueue's result."""
    if after is None:
        return None
    if isinstance(after, str | bytes | UUID) or not isinstance(after, Iterable):
        raise InvariantError(
            f"after={after!r} must be a list of job ids", hint="after=[result.id, ...]"
        )
    ids = []
    for given in after:
        value = getattr(given, "id", given)
        try:
            ids.append(value if isinstance(value, UUID) else UUID(str(value)))
        except ValueError:
            raise InvariantError(
                f"after: {given!r} is not a job id", hint="pass the ids enqueue returned"
            ) from None
    return tuple(ids) or None  # an empty list waits for nothing


def check_after_options(handle: _Declared, options: EnqueueOptions) -> None:
    """A dependant falls due when its last dependency is done: a run time of its own, or a
    waiting holder replaced by a later enqueue, would contradict that (issue 32)."""
    if options.after is None:
        return
    if options.run_at is not None or options.delay is not None:
        raise InvariantError(
            "after cannot be given with run_at or delay",
            hint="a job with dependencies runs when the last of them is done",
        )
    if options.on_conflict == "replace" or (
        options.on_conflict is None and handle.debounce is not None
    ):
        raise InvariantError(
            f"job {handle.name!r}: after cannot be given with on_conflict='replace' or debounce",
            hint="a live job of the same key is returned as it is",
        )


def delay_seconds(delay: Duration | None) -> float | None:
    if delay is None:
        return None
    if isinstance(delay, bool):
        raise InvariantError(f"delay={delay!r} is a bool, not a duration")
    if delay == 0 or delay == timedelta(0):
        return 0.0
    return parse_duration(delay, field="delay")
