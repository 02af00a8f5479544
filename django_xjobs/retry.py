"""Retry policy and the retry decision: backoff arithmetic, attempts, and the error's verdict."""

from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass, field
from typing import Literal

from .classify import classify
from .durations import Duration, parse_duration
from .errors import InvariantError, XJobsError

Backoff = Literal["exponential", "linear", "fixed"]
StopReason = Literal["terminal", "attempts-exhausted", "cancelled", "timeout"]


@dataclass(frozen=True)
class Retry:
    """How a failed attempt is retried (SPEC JOB-07, RETRY-01).

    ``attempts`` counts the first run, so ``attempts=1`` means never retry. Durations are a
    ``timedelta``, seconds, or a string (``"1s"``, ``"10m"``)::

        @job(idempotency_key="sync:{account_id}", retry=Retry(attempts=5, delay="2s", max_delay="5m"))
        def sync(ctx, account_id): ...
    """

    attempts: int = 3
    backoff: Backoff = "exponential"
    delay: Duration = 1
    max_delay: Duration = 3600
    jitter: bool = True  # SPEC SE-52: on unless turned off
    dead_letter: bool = True
    delay_seconds: float = field(init=False, repr=False, compare=False)
    max_delay_seconds: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (
            isinstance(self.attempts, bool)
            or not isinstance(self.attempts, int)
            or self.attempts < 1
        ):
            raise InvariantError(
                f"Retry(attempts={self.attempts!r}) must be an integer of at least 1",
                hint="attempts counts the first run: attempts=1 means no retry",
            )
        if self.backoff not in ("exponential", "linear", "fixed"):
            raise InvariantError(
                f"Retry(backoff={self.backoff!r}) is not a backoff",
                hint='use "exponential", "linear" or "fixed"',
            )
        object.__setattr__(self, "delay_seconds", parse_duration(self.delay, field="Retry.delay"))
        object.__setattr__(
            self, "max_delay_seconds", parse_duration(self.max_delay, field="Retry.max_delay")
        )


DEFAULT_RETRY = Retry()


def backoff_delay(policy: Retry, attempt: int, rand: float | None = None) -> float:
    """Seconds to wait after failed ``attempt`` (1-based), capped, with equal jitter.

    Equal jitter keeps at least half the delay: ``c/2 + c/2 * r`` (SPEC RETRY-02).
    """
    base, k = policy.delay_seconds, max(1, attempt)
    if policy.backoff == "fixed":
        raw = base
    elif policy.backoff == "linear":
        raw = base * k
    else:
        raw = base * 2.0 ** min(k - 1, 1023)  # past 2**1023 a float overflows; the cap applies
    capped = min(raw, policy.max_delay_seconds)
    if not policy.jitter:
        return capped
    r = random.random() if rand is None else rand
    return capped / 2 + capped / 2 * r


def retry_schedule(policy: Retry) -> list[float]:
    """The delays (seconds, no jitter) after attempts 1..attempts-1 (SPEC RETRY-03)::

        >>> retry_schedule(Retry(attempts=5, delay="2s"))
        [2.0, 4.0, 8.0, 16.0]

    ``inspect_job`` shows the same schedule beside a job's attempts.
    """
    plain = Retry(
        attempts=policy.attempts,
        backoff=policy.backoff,
        delay=policy.delay_seconds,
        max_delay=policy.max_delay_seconds,
        jitter=False,
    )
    return [backoff_delay(plain, attempt) for attempt in range(1, policy.attempts)]


@dataclass(frozen=True)
class RetryDecision:
    """What happens after a failed attempt: retry after ``delay``, or stop in ``final_state``."""

    retry: bool
    delay: float
    final_state: Literal["dead", "failed"] | None
    stop_reason: StopReason | None


def decide(
    policy: Retry, attempt: int, error: BaseException, rand: float | None = None
) -> RetryDecision:
    """The decision for ``error`` raised on ``attempt`` (1-based; SPEC RETRY-04, CLASS-04..07).

    The error's classification (``classify``) decides first, the attempt count second:

    - terminal: stop now, on any attempt, in ``dead`` (or ``failed`` without a dead letter);
    - retry-after: while attempts remain, wait the seconds the error states
      (``error.retry_after``), capped at ``max_delay``; a missing, non-numeric, negative,
      infinite or NaN value falls back to the backoff (CLASS-06). It still counts as an
      attempt (CLASS-08): the executor's RetryAt says so;
    - retryable, unclassified, a plain exception: exactly the backoff (CLASS-07).

    Whatever the classification short of terminal, the attempt ceiling wins (CLASS-05).
    """
    final: Literal["dead", "failed"] = "dead" if policy.dead_letter else "failed"
    kind = classify(error)
    if kind == "terminal":
        return RetryDecision(False, 0.0, final, "terminal")
    if attempt >= policy.attempts:
        return RetryDecision(False, 0.0, final, "attempts-exhausted")
    if kind == "retry-after":
        seconds = stated_retry_after(error)
        if seconds is not None:
            return RetryDecision(True, min(seconds, policy.max_delay_seconds), None, None)
    return RetryDecision(True, backoff_delay(policy, attempt, rand), None, None)


def stated_retry_after(error: BaseException) -> float | None:
    """The delay ``error`` asks for, in seconds, if it is a finite number >= 0 (SPEC CLASS-06).

    Read from ``error.retry_after`` (``RetryAfterError``, an app's ``@retry_class`` error),
    else from an ``XJobsError``'s meta (``XJobsError(..., code=..., retry_after=30)``).
    """
    value = getattr(error, "retry_after", None)
    if value is None and isinstance(error, XJobsError):
        value = error.meta.get("retry_after")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value < 0:
        return None
    try:
        seconds = float(value)
    except OverflowError:  # an int past the float range is finite: the cap applies
        return sys.float_info.max
    return seconds if math.isfinite(seconds) else None
