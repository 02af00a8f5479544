"""Run one claimed job and decide how it settles: a small pipeline ending in one value."""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import traceback
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from . import conf, log, registry
from .context import JobContext, Signal
from .drivers.base import Ack, ClaimedJob, Nack
from .errors import JobInterrupt, JobUnknownError, ResultInvalidError, XJobsError
from .payload import NotJSON, check_json, encode
from .retry import DEFAULT_RETRY, Retry, decide


class Outcome(enum.StrEnum):
    """Every way a run ends (STYLE: one closed set)."""

    COMPLETED = "completed"
    RETRIED = "retried"
    DEAD_LETTERED = "dead_lettered"
    FAILED = "failed"
    SUSPENDED = "suspended"
    LEASE_LOST = "lease_lost"


@dataclass(frozen=True)
class Execution:
    """What one run did and the single driver call that settles it."""

    outcome: Outcome
    job: ClaimedJob
    duration: float
    settle: Ack | Nack
    error: str | None = None
    stop_reason: str | None = None
    retry_in: float | None = None


def execute(job: ClaimedJob, signal: Signal, now: datetime) -> Execution:
    """Run ``job``'s handler and return its outcome; writes nothing itself."""
    started = time.monotonic()
    handle = registry.get_job(job.name)
    if handle is None:
        return _unknown(job, now)
    ctx = JobContext(
        job_id=job.id,
        run_id=job.run_id,
        name=job.name,
        queue=job.queue,
        attempt=job.attempt,
        max_attempts=job.max_attempts,
        inputs=job.input,
        tenant_id=job.tenant_id,
        enqueued_by=job.enqueued_by,
        signal=signal,
        logger=logging.LoggerAdapter(
            logging.getLogger(f"django_xjobs.jobs.{job.name}"),
            {"job_id": str(job.id), "attempt": job.attempt},
        ),
    )
    try:
        if handle.is_async:  # each run gets its own loop: the worker's threads have none
            value = asyncio.run(handle.fn(ctx, **job.input))
        else:
            value = handle.fn(ctx, **job.input)
        result_json = _result_json(value, job.name)
    except BaseException as error:  # a handler's sys.exit() fails its attempt, not the worker
        return _failed(job, handle.retry, error, time.monotonic() - started)
    return Execution(
        Outcome.COMPLETED,
        job,
        time.monotonic() - started,
        Ack(job.id, job.lease_token, result_json),
    )


def _result_json(value: Any, name: str) -> str | None:
    if value is None:
        return None
    try:
        check_json(value, "result")
    except NotJSON as error:
        raise ResultInvalidError(f"job {name!r} returned {error.path} {error.reason}") from None
    return encode(value, limit=conf.get().max_payload_bytes, what=f"the result of job {name!r}")


def failure(job: ClaimedJob, error: BaseException, duration: float = 0.0) -> Execution:
    """The outcome of ``error`` ending ``job``'s attempt, under its registered retry policy."""
    handle = registry.get_job(job.name)
    return _failed(job, handle.retry if handle else DEFAULT_RETRY, error, duration)


def _failed(job: ClaimedJob, policy: Retry, error: BaseException, duration: float) -> Execution:
    decision = decide(policy, job.attempt, error)
    message = describe_error(error)
    if decision.stop_reason == "terminal":
        message += " — not retried: the error is terminal"  # SPEC CLASS-09, SE-19
    nack = Nack(
        job.id,
        job.lease_token,
        delay=decision.delay,
        error=message,
        final_state=decision.final_state,
        stop_reason=decision.stop_reason,
    )
    if decision.retry:
        outcome = Outcome.RETRIED
    else:
        outcome = Outcome.DEAD_LETTERED if decision.final_state == "dead" else Outcome.FAILED
    level = logging.WARNING if decision.retry else logging.ERROR
    log.event(
        level,
        "xjobs.attempt.failed",
        job=job.name,
        id=job.id,
        attempt=f"{job.attempt}/{job.max_attempts}",
        retry_in=f"{decision.delay:.3f}s" if decision.retry else None,
        stop=decision.stop_reason,
        error=message,
    )
    if not isinstance(error, XJobsError | JobInterrupt):
        log.logger.debug("traceback of %s %s:\n%s", job.name, job.id, _traceback(error))
    return Execution(
        outcome,
        job,
        duration,
        nack,
        error=message,
        stop_reason=decision.stop_reason,
        retry_in=decision.delay if decision.retry else None,
    )


def _unknown(job: ClaimedJob, now: datetime) -> Execution:
    """A row whose name this process does not know: park it, and give up after a grace."""
    settings = conf.get()
    age = (now - job.created_at).total_seconds()
    error = JobUnknownError(
        f"no job registered as {job.name!r} in this process",
        hint="deploy the code that declares it, or delete the row",
    )
    if age >= settings.unknown_job_grace:
        message = f"{error} — not retried: still unknown {age:.0f}s after it was created"
        nack = Nack(
            job.id, job.lease_token, error=message, final_state="dead", stop_reason="terminal"
        )
        log.event(logging.ERROR, "xjobs.job.unknown", job=job.name, id=job.id, dead=True)
        return Execution(Outcome.DEAD_LETTERED, job, 0.0, nack, str(error), "terminal")
    nack = Nack(
        job.id,
        job.lease_token,
        delay=settings.unknown_job_delay,
        error=str(error),
        counts_as_attempt=False,
        park=True,
    )
    log.event(
        logging.WARNING,
        "xjobs.job.unknown",
        job=job.name,
        id=job.id,
        retry_in=f"{settings.unknown_job_delay:g}s",
    )
    return Execution(Outcome.SUSPENDED, job, 0.0, nack, str(error))


def describe_error(error: BaseException) -> str:
    """``last_error`` text: the code first for our errors, else the exception type."""
    if isinstance(error, XJobsError | JobInterrupt):
        return str(error)
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _traceback(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))
