"""Apply settle values through a driver: one call each, every ``Complete`` in one statement.

The worker and ``testing.run_until_idle`` both settle here, so a run ends the same way in a
test as in production (STYLE: one settle).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar
from uuid import UUID

from ..drivers.contract import Complete, Finish, JobDriver, RetryAt, Settle, Shed, SuspendUntil

T = TypeVar("T")

#: Wraps each driver call: ``guard(call, values, failed)`` returns ``call()`` or ``failed``
#: (the worker's retries on transient errors and its logging live in one).
Guard = Callable[[Callable[[], T], Sequence[Settle], T], T]


def settle(
    driver: JobDriver, values: Sequence[Settle], guard: Guard[Any] | None = None
) -> set[UUID]:
    """Settle every value; the lease tokens of the runs whose row was still held by its token.

    Tokens, not job ids: one worker may hold two runs of the same job, one that lost its lease
    and the one that claimed the job after it, and only one of them can land."""
    held: set[UUID] = set()
    for completes in _one_run_per_job([v for v in values if isinstance(v, Complete)]):
        nothing: set[UUID] = set()
        landed = _guarded(guard, partial(driver.runs().complete, completes), completes, nothing)
        held |= {c.lease_token for c in completes if c.job_id in landed}
    for value in values:
        if isinstance(value, Complete):
            continue
        if _guarded(guard, partial(apply, driver, value), [value], False):
            held.add(value.lease_token)
    return held


def _one_run_per_job(completes: list[Complete]) -> list[list[Complete]]:
    """``completes`` in calls to ``complete`` that name each job once (it answers by job id);
    almost always a single call."""
    calls: list[tuple[set[UUID], list[Complete]]] = []
    for value in completes:
        for named, call in calls:
            if value.job_id not in named:
                named.add(value.job_id)
                call.append(value)
                break
        else:
            calls.append(({value.job_id}, [value]))
    return [call for _, call in calls]


def apply(driver: JobDriver, value: Settle) -> bool:
    """The one driver call that settles ``value``: True when the row was still held."""
    if isinstance(value, Complete):
        return value.job_id in driver.runs().complete([value])
    if isinstance(value, RetryAt):
        return driver.runs().retry(value)
    if isinstance(value, SuspendUntil):
        return driver.runs().suspend(value)
    if isinstance(value, Shed):
        return driver.runs().shed(value)
    if isinstance(value, Finish):
        return driver.runs().finish(value)
    raise TypeError(f"not a settle value: {value!r}")  # pragma: no cover - the union is closed


def _guarded(
    guard: Guard[T] | None, call: Callable[[], T], values: Sequence[Settle], failed: T
) -> T:
    return call() if guard is None else guard(call, values, failed)
