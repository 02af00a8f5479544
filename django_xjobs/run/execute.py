"""Run one claimed job and decide how it settles: a small pipeline ending in one value (the
values in ``run/execution.py``, how a failed or stopped run ends in ``run/verdicts.py``)."""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from dataclasses import replace
from functools import partial
from typing import Any

from django.db import connections

from .. import conf, crypt, history, log, redact
from ..clock import Clock
from ..drivers.connections import borrowed, open_transactions
from ..drivers.contract import (
    ClaimedJob,
    Complete,
    JobDriver,
    SuspendUntil,
)
from ..durations import format_seconds
from ..errors import (
    JobAbortedError,
    JobCancelledError,
    JobInterrupt,
    JobSnooze,
    JobTimeoutError,
    RateLimited,
    ResultInvalidError,
    StepSuspension,
    describe_error,
)
from ..limits.rate_limited import handed_back
from ..metrics import events as event_metrics
from ..payload import NotJSON, check_json, encode
from ..steps import Steps
from ..steps.asynchronous import AsyncSteps
from . import outage, signals, verdicts, versions
from .context import JobContext, JobLogger, _current
from .controls import RunControls
from .execution import Body, Execution, Outcome
from .handle import Runnable
from .stop import StopSignal
from .tracing import job_span


def execute(
    job: ClaimedJob,
    signal: StopSignal,
    *,
    driver: JobDriver,
    clock: Clock,
    handle: Runnable | None,
) -> Execution:
    """Run ``job``'s handler and return its outcome; only step records are written here.
    ``handle`` is what the job's name resolved to when it was admitted (None: unknown here)."""
    # the run's secrets, collected once: every log line, step error and span it produces is
    # scrubbed of them before it leaves the process (redact.py)
    secrets = redact.secrets_of(job.input)
    if not secrets:  # most runs: nothing to scope, and no context switch on the hot path
        return _execute(job, signal, driver=driver, clock=clock, handle=handle)
    with redact.scope(secrets):
        return _execute(job, signal, driver=driver, clock=clock, handle=handle)


def _execute(
    job: ClaimedJob, signal: StopSignal, *, driver: JobDriver, clock: Clock, handle: Runnable | None
) -> Execution:
    started = time.monotonic()
    if job.undecodable is not None:
        return verdicts.undecodable(job)
    if job.expired:  # the claim saw its expiry pass before it ever started (issue 29)
        return verdicts.expired(job, driver)
    if handle is None:
        return verdicts.unknown(job, clock.now())
    # SPEC RETRY-05: the handle's policy and the claimed attempt, never the row's max_attempts
    over_budget = job.attempt > handle.retry.attempts and not handle.reruns_lapsed
    if job.lease_expiries >= conf.get().max_lease_expiries or over_budget:
        return verdicts.crash_looping(job, handle.retry)
    if job.version != handle.version:  # another version of its code (issue 44)
        ended = versions.old_run(job, handle, driver, signal)
        if ended is not None:
            return ended
    steps: Steps | None = None
    controls = RunControls(
        job_id=job.id,
        lease_token=job.lease_token,
        snoozes=job.snoozes,
        write=driver.runs().progress,
        secrets=redact.current(),  # execute() scoped them
    )
    # only a body with a timeout runs on a thread of its own, to be waited on (or given up on)
    body = Body() if handle.timeout is not None else None
    try:
        steps = Steps(
            job=job,
            records=lambda: driver.steps().list(job.run_id),
            store=driver.steps(),
            events=driver.events(),
            signal=signal,
            step_timeout=handle.step_timeout,
            event_poll=handle.event_poll,
            received=partial(event_metrics.received, job.queue),  # SPEC EVT-16
        )
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
            logger=JobLogger(job.name, job.id, job.attempt),
            step=AsyncSteps(steps) if handle.is_async else steps,
            _controls=controls,
        )
        signals.started(handle, job, ctx)
        ambient = _current.set(ctx)  # SPEC EXEC-09: the same object the handler gets
        try:
            with job_span(job):
                value = _run_body(handle, ctx, job, signal, body)
        finally:
            _current.reset(ambient)  # never into the next run on this thread
            # the throttled last value, written while the run still holds its lease
            controls.flush()
        result_json = _result_json(value, job.name, sealed=handle.encrypt)
    except JobSnooze as snooze:
        return _snoozed(job, snooze, time.monotonic() - started)
    except StepSuspension as suspension:
        return _suspended(job, suspension, clock, time.monotonic() - started)
    except RateLimited as limited:  # the partner's word: no attempt spent (limits/rate_limited.py)
        settle = handed_back(job, limited, driver)
        duration = time.monotonic() - started
        return Execution(Outcome.SUSPENDED, job, duration, settle, error=str(limited))
    except BaseException as error:  # a handler's sys.exit() fails its attempt, not the worker
        ended = verdicts.stopped_or_failed(
            job, handle.retry, error, signal, time.monotonic() - started
        )
        if isinstance(error, JobTimeoutError) and body is not None and not body.ended:
            return replace(ended, abandoned=body)
        return ended
    finally:
        if steps is not None:  # a step asked from here on is outside a running job
            steps.ended = True
        # SPEC EXEC-06, SE-21: whatever the body left running writes nothing from here on
        signal.abort(JobAbortedError("the attempt has ended"))
    replayed = tuple(steps.replayed_names) if steps else ()
    complete = Complete(job.id, job.lease_token, result_json)
    if isinstance(signal.reason, JobCancelledError):
        return Execution(Outcome.CANCELLED, job, time.monotonic() - started, complete)
    duration = time.monotonic() - started
    outage.forget(job.id)
    return Execution(Outcome.COMPLETED, job, duration, complete, replayed=replayed)


def _run_body(
    handle: Runnable, ctx: JobContext, job: ClaimedJob, signal: StopSignal, body: Body | None
) -> object:
    def call() -> object:
        return handle.invoke(ctx, job.input)

    timeout = handle.timeout
    if timeout is None or body is None:
        return call()
    box: dict[str, Any] = {}
    finished = threading.Event()
    lent = open_transactions()  # a test's transaction: the body works in it, as on this thread

    def target() -> None:
        try:
            with borrowed(lent):
                box["value"] = call()
        except BaseException as error:
            box["error"] = error
        finally:
            connections.close_all()  # this thread's own connections only, not those lent
            finished.set()
            if box.get("late"):
                _abandoned(job, timeout, box.get("error"))
            body.end()

    # the body's own thread runs in a copy of this context: it sees the ambient job too
    context = contextvars.copy_context()
    threading.Thread(
        target=context.run, args=(target,), name=f"xjobs-body-{job.id}", daemon=True
    ).start()
    if not finished.wait(timeout):
        box["late"] = True
        error = JobTimeoutError(
            f"job {job.name!r} passed its timeout of {format_seconds(timeout)}",
            hint="the body was told to stop (ctx.signal); make it faster or raise timeout=",
        )
        signal.abort(error)  # SPEC EXEC-04, SE-20: abort the signal first, then fail
        raise error
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _abandoned(job: ClaimedJob, timeout: float, error: BaseException | None) -> None:
    """SPEC EXEC-05: say so when a timed-out body finally ends, unless it obeyed its signal."""
    if isinstance(error, JobInterrupt):
        return
    log.event(
        logging.WARNING,
        "xjobs.timeout.abandoned",
        job=job.name,
        id=job.id,
        timeout=format_seconds(timeout),
        ended="rejected" if error else "resolved",
        error=describe_error(error) if error else None,
    )


def _result_json(value: object, name: str, *, sealed: bool) -> str | None:
    if value is None:
        return None
    try:
        check_json(value, "result")
    except NotJSON as error:
        raise ResultInvalidError(f"job {name!r} returned {error.path}: {error.reason}") from None
    settings = conf.get()
    text = encode(value, limit=settings.max_payload_bytes, what=f"the result of job {name!r}")
    return text if settings.encryption is None or not sealed else crypt.seal(text)  # CRYPT-02


def _suspended(
    job: ClaimedJob, suspension: StepSuspension, clock: Clock, duration: float
) -> Execution:
    """SPEC STEP-10: park the run until the step's wake time; no attempt burned, no error."""
    delay = suspension.resume_in  # on the step store's clock, not this process's
    suspend = SuspendUntil(job.id, job.lease_token, delay=delay, children=suspension.children)
    log.event(
        logging.INFO,
        "xjobs.job.suspended",
        job=job.name,
        id=job.id,
        step=suspension.step,
        reason=suspension.reason,
        resume_in=format_seconds(delay) if delay else "0s",
    )
    return Execution(Outcome.SUSPENDED, job, duration, suspend, resume_at=suspension.resume_at)


def _snoozed(job: ClaimedJob, snooze: JobSnooze, duration: float) -> Execution:
    """``ctx.snooze``: back in the queue after its delay, the attempt given back, the snooze
    counted and recorded in the history; not a failure (issue 29)."""
    delay = snooze.seconds
    entry = history.Failure(
        code=None,
        message=f"snoozed for {format_seconds(delay)}",
        exception="",
        traceback="",
        outcome="snoozed",
    )
    value = SuspendUntil(job.id, job.lease_token, delay=delay, snoozed=True, failure=entry)
    log.event(
        logging.INFO,
        "xjobs.job.snoozed",
        job=job.name,
        id=job.id,
        attempt=job.attempt,
        snoozes=job.snoozes + 1,
        resume_in=format_seconds(delay),
    )
    return Execution(Outcome.SUSPENDED, job, duration, value)
