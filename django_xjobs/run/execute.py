"""Run one claimed job and decide how it settles: a small pipeline ending in one value."""

from __future__ import annotations

import contextvars
import enum
import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from django.db import connections

from .. import conf, history, log, redact
from ..clock import Clock
from ..declarations import registry
from ..drivers import failures
from ..drivers.connections import borrowed, open_transactions
from ..drivers.contract import (
    ClaimedJob,
    Complete,
    Finish,
    JobDriver,
    RetryAt,
    Settle,
    SuspendUntil,
)
from ..drivers.values import quick_init
from ..durations import format_seconds
from ..errors import (
    DependencyFailedError,
    JobAbortedError,
    JobCancelledError,
    JobCrashedError,
    JobExpiredError,
    JobInterrupt,
    JobSnooze,
    JobTimeoutError,
    JobUndecodableError,
    JobUnknownError,
    LeaseLostError,
    RateLimited,
    ResultInvalidError,
    StepSuspension,
    XJobsError,
    describe_error,
)
from ..limits.rate_limited import handed_back
from ..payload import NotJSON, check_json, encode
from ..retry import DEFAULT_RETRY, Retry, decide
from ..steps import Steps
from ..steps.asynchronous import AsyncSteps
from ..text import storable
from ..tracing import job_span
from . import outage, signals
from .context import JobContext, JobLogger, _current
from .controls import RunControls
from .handle import Runnable
from .stop import StopSignal


class Outcome(enum.StrEnum):
    """Every way a run ends (STYLE: one closed set)."""

    COMPLETED = "completed"
    RETRIED = "retried"
    DEAD_LETTERED = "dead_lettered"
    FAILED = "failed"
    SUSPENDED = "suspended"
    CANCELLED = "cancelled"
    LEASE_LOST = "lease_lost"


@quick_init
@dataclass(frozen=True)
class Execution:
    """What one run did and the single settle value that ends it."""

    outcome: Outcome
    job: ClaimedJob
    duration: float
    settle: Settle
    error: str | None = None
    stop_reason: str | None = None
    retry_in: float | None = None
    resume_at: datetime | None = None
    replayed: tuple[str, ...] = ()
    #: a body that passed its timeout and still runs in its thread (SPEC EXEC-05): whoever
    #: runs it keeps its capacity until ``body.when_ended`` fires
    abandoned: Body | None = None


class Body:
    """A body running in its own thread, so a timeout can stop waiting for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ended = False
        self._callbacks: list[Callable[[], None]] = []

    @property
    def ended(self) -> bool:
        return self._ended

    def when_ended(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the thread has returned: now if it has, else on that thread."""
        with self._lock:
            if not self._ended:
                self._callbacks.append(callback)
                return
        callback()

    def end(self) -> None:
        with self._lock:
            self._ended = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()


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
        return _undecodable(job)
    if job.expired:  # the claim saw its expiry pass before it ever started (issue 29)
        return _expired(job, driver)
    if handle is None:
        return _unknown(job, clock.now())
    # SPEC RETRY-05: the handle's policy and the claimed attempt, never the row's max_attempts
    over_budget = job.attempt > handle.retry.attempts and not handle.reruns_lapsed
    if job.lease_expiries >= conf.get().max_lease_expiries or over_budget:
        return _crash_looping(job, handle.retry)
    steps: Steps | None = None
    controls = RunControls(
        job_id=job.id,
        lease_token=job.lease_token,
        snoozes=job.snoozes,
        write=driver.progress,
        secrets=redact.current(),  # execute() scoped them
    )
    # only a body with a timeout runs on a thread of its own, to be waited on (or given up on)
    body = Body() if handle.timeout is not None else None
    try:
        steps = Steps(
            job=job,
            records=lambda: driver.steps.list(job.run_id),
            store=driver.steps,
            events=driver.events,
            signal=signal,
            step_timeout=handle.step_timeout,
            event_poll=handle.event_poll,
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
        result_json = _result_json(value, job.name)
    except JobSnooze as snooze:
        return _snoozed(job, snooze, time.monotonic() - started)
    except StepSuspension as suspension:
        return _suspended(job, suspension, clock, time.monotonic() - started)
    except RateLimited as limited:  # the partner's word: no attempt spent (limits/rate_limited.py)
        settle = handed_back(job, limited, driver)
        duration = time.monotonic() - started
        return Execution(Outcome.SUSPENDED, job, duration, settle, error=str(limited))
    except BaseException as error:  # a handler's sys.exit() fails its attempt, not the worker
        ended = _stopped_or_failed(job, handle.retry, error, signal, time.monotonic() - started)
        if isinstance(error, JobTimeoutError) and body is not None and not body.ended:
            return replace(ended, abandoned=body)
        return ended
    finally:
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
) -> Any:
    def call() -> Any:
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


def _result_json(value: Any, name: str) -> str | None:
    if value is None:
        return None
    try:
        check_json(value, "result")
    except NotJSON as error:
        raise ResultInvalidError(f"job {name!r} returned {error.path}: {error.reason}") from None
    return encode(value, limit=conf.get().max_payload_bytes, what=f"the result of job {name!r}")


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


def _stopped_or_failed(
    job: ClaimedJob, policy: Retry, error: BaseException, signal: StopSignal, duration: float
) -> Execution:
    reason = signal.reason
    if isinstance(reason, JobCancelledError | LeaseLostError):
        # The row is no longer this run's: the retry is a formality the fence will refuse.
        outcome = Outcome.CANCELLED if isinstance(reason, JobCancelledError) else Outcome.LEASE_LOST
        secrets = redact.secrets_of(job.input)
        retry = RetryAt(
            job.id, job.lease_token, error=redact.redact(describe_error(error), secrets)
        )
        return Execution(
            outcome, job, duration, retry, error=redact.redact(describe_error(reason), secrets)
        )
    return _failed(job, policy, error, duration)


def cut_short(execution: Execution) -> Execution:
    """SPEC LEASE-20: a run its worker gave up at its local deadline because the database did
    not answer its renewals was cut short by the outage, not by the job: it is handed back ready
    at once in its old place in the queue (ahead of a backlog enqueued after it), its attempt
    counted as a lapse's is and recorded as cut short. Its settle is fenced on its token, so it
    lands only while no other worker took the job."""
    value = execution.settle
    if execution.outcome is not Outcome.LEASE_LOST or not isinstance(value, RetryAt):
        return execution
    back = RetryAt(
        value.job_id,
        value.lease_token,
        error=value.error,
        failure=history.CUT_SHORT,
        keep_place=True,
    )
    return replace(execution, settle=back)


def stopped(
    job: ClaimedJob, reason: BaseException | None, duration: float, *, handle: Runnable | None
) -> Execution:
    """The outcome of a run its worker stopped (a lost lease, a cancel) whose body never said
    how it ended: a child process ended by its worker (worker/isolation.py)."""
    signal = StopSignal()
    cause = reason or JobAbortedError("the run was stopped")
    signal.abort(cause)
    return _stopped_or_failed(
        job, handle.retry if handle else DEFAULT_RETRY, cause, signal, duration
    )


def crashed_alone(
    job: ClaimedJob, handle: Runnable | None, how: str, duration: float = 0.0
) -> Execution:
    """SPEC LEASE-17: the run died alone, in the child process its worker isolated it in
    (``how``: "was killed by SIGKILL"), so the death is its own and its worker saw it. The crash
    is counted (``RetryAt.crashed``); at ``MAX_LEASE_EXPIRIES`` crashes the job is dead-lettered
    with ``X_JOB_CRASHED`` at once, whoever could have witnessed it."""
    count, bound = job.lease_expiries + 1, conf.get().max_lease_expiries
    error = JobCrashedError(
        f"run {job.attempt} of job {job.name!r} {how} while it ran alone in a child process: "
        f"crash {count} of {bound}",
        hint="look for what kills the process (memory, os._exit, a segfault), then retry_job() it",
    )
    message = redact.redact(str(error), redact.secrets_of(job.input))
    entry = history.failure(error, "crashed")
    log.event(
        logging.ERROR,
        "xjobs.job.crashed",
        job=job.name,
        id=job.id,
        attempt=f"{job.attempt}/{job.max_attempts}",
        how=how,
        crashes=f"{count}/{bound}",
    )
    if count < bound:
        retry = RetryAt(job.id, job.lease_token, error=message, failure=entry, crashed=True)
        return Execution(Outcome.RETRIED, job, duration, retry, error=message, retry_in=0.0)
    policy = handle.retry if handle is not None else DEFAULT_RETRY
    return replace(_crash_looping(job, policy, counted=1), duration=duration)


def failure(
    job: ClaimedJob, error: BaseException, duration: float = 0.0, *, handle: Runnable | None
) -> Execution:
    """The outcome of ``error`` ending ``job``'s attempt, under ``handle``'s retry policy (the
    default one for a job unknown here)."""
    return _failed(job, handle.retry if handle else DEFAULT_RETRY, error, duration)


def _failed(job: ClaimedJob, policy: Retry, error: BaseException, duration: float) -> Execution:
    outage_retry = outage.retry_in(job.id, error)
    if outage_retry is not None:
        return _outage(job, error, duration, *outage_retry)
    decision = decide(policy, job.attempt, error)
    stop_reason = decision.stop_reason
    if stop_reason == "attempts-exhausted" and isinstance(error, JobTimeoutError):
        stop_reason = "timeout"
    # collected here, not taken from the run's scope: a failure can be settled outside the run
    secrets = redact.secrets_of(job.input)
    # stored and logged: the run's secrets out first, then NUL, surrogates and size
    message = storable(redact.redact(describe_error(error), secrets))
    if stop_reason == "terminal":
        message += " — not retried: the error is terminal"  # SPEC CLASS-09, SE-19
    ending: history.Ending = "retried" if decision.retry else decision.final_state or "failed"
    if isinstance(error, JobTimeoutError):
        ending = "timeout"
    failed = history.failure(error, ending, secrets)
    settle: RetryAt | Finish
    if decision.final_state is None:
        settle = RetryAt(
            job.id,
            job.lease_token,
            delay=decision.delay,
            error=message,
            stop_reason=stop_reason,
            failure=failed,
        )
    else:
        settle = Finish(job.id, job.lease_token, decision.final_state, stop_reason, message, failed)
    if decision.retry:
        outcome = Outcome.RETRIED
    else:
        outcome = Outcome.DEAD_LETTERED if decision.final_state == "dead" else Outcome.FAILED
    log.event(
        logging.WARNING if decision.retry else logging.ERROR,
        "xjobs.attempt.failed",
        job=job.name,
        id=job.id,
        attempt=f"{job.attempt}/{job.max_attempts}",
        retry_in=f"{decision.delay:.3f}s" if decision.retry else None,
        stop=stop_reason,
        error=message,
    )
    if not isinstance(error, XJobsError | JobInterrupt) and log.logger.isEnabledFor(logging.DEBUG):
        trace = redact.redact(_traceback(error), secrets)
        log.logger.debug("traceback of %s %s:\n%s", job.name, job.id, trace)
    return Execution(
        outcome,
        job,
        duration,
        settle,
        error=message,
        stop_reason=stop_reason,
        retry_in=decision.delay if decision.retry else None,
    )


def _outage(
    job: ClaimedJob, error: BaseException, duration: float, delay: float, left: int
) -> Execution:
    """The database connection failed, not the job: ready again after ``delay`` with the
    attempt given back, so an outage does not dead-letter healthy jobs (XJOBS OUTAGE_RETRIES)."""
    message = redact.redact(describe_error(error), redact.secrets_of(job.input))
    retry = RetryAt(job.id, job.lease_token, delay=delay, error=message, counts_as_attempt=False)
    log.throttled(
        logging.WARNING,
        "xjobs.attempt.outage",
        kind=failures.sqlstate(error) or type(error).__name__,
        job=job.name,
        id=job.id,
        attempt=f"{job.attempt}/{job.max_attempts}",
        retry_in=f"{delay:g}s",
        outage_retries_left=left,
        error=message,
    )
    return Execution(Outcome.RETRIED, job, duration, retry, error=message, retry_in=delay)


def _crash_looping(job: ClaimedJob, policy: Retry, counted: int = 0) -> Execution:
    """Its runs keep dying (SIGKILL, OOM, exit) or stalling: stop, and say so, rather than
    crash every process that runs it, forever. ``counted``: a crash seen just now, not yet on
    the row."""
    expiries = job.lease_expiries + counted
    if counted:
        what = f"the last {expiries} run(s) of job {job.name!r} died alone in a child process"
    else:
        what = (
            f"the last {expiries} run(s) of job {job.name!r} ended with their worker dying or "
            "stalling (the lease expired each time)"
        )
    error = JobCrashedError(
        f"{what}; not run again",
        hint="look for what kills the process (memory, os._exit, a segfault), then retry_job() it",
    )
    exhausted = job.attempt > policy.attempts and expiries < conf.get().max_lease_expiries
    stop_reason = "attempts-exhausted" if exhausted else "terminal"
    message = redact.redact(f"{error} — not retried")
    final: Literal["dead", "failed"] = "dead" if policy.dead_letter else "failed"
    finish = Finish(
        job.id,
        job.lease_token,
        final,
        stop_reason=stop_reason,
        error=message,
        failure=history.failure(error, "crashed"),
    )
    log.event(
        logging.ERROR,
        "xjobs.job.crash_loop",
        job=job.name,
        id=job.id,
        attempt=f"{job.attempt}/{job.max_attempts}",
        lease_expiries=expiries,
    )
    outcome = Outcome.DEAD_LETTERED if final == "dead" else Outcome.FAILED
    return Execution(outcome, job, 0.0, finish, error=message, stop_reason=stop_reason)


def _undecodable(job: ClaimedJob) -> Execution:
    """A row whose stored input this process cannot decode: no attempt of it can run, so it
    goes dead at once with the reason, and no batch-mate shares its fate (issue 24)."""
    error = JobUndecodableError(f"job {job.name!r} {job.undecodable}; not run")
    message = redact.redact(str(error))  # XJOBS["REDACT"] sees every stored text (issue 26)
    finish = Finish(
        job.id,
        job.lease_token,
        "dead",
        stop_reason="terminal",
        error=message,
        failure=history.failure(error, "dead"),
    )
    log.event(
        logging.ERROR, "xjobs.job.undecodable", job=job.name, id=job.id, reason=job.undecodable
    )
    return Execution(Outcome.DEAD_LETTERED, job, 0.0, finish, message, "terminal")


def _expired(job: ClaimedJob, driver: JobDriver) -> Execution:
    """Claimed for the first time after its ``expires_at``: the handler never runs, and the
    job ends dead with stop reason ``expired``, in the same fenced settle as any run (issue 29).
    A job whose dependency ended otherwise than done was released with its expiry set to then:
    it ends the same way, with stop reason ``dependency_failed`` (issue 32, SPEC DEP-04). Only
    this rare path reads the row again."""
    row = driver.get_job(job.id)
    if row is not None and row.after_failed is not None:
        return _dependency_failed(job, row.after_failed, driver)
    error = JobExpiredError(f"job {job.name!r} was not started before it expired; not run")
    finish = Finish(
        job.id,
        job.lease_token,
        "dead",
        stop_reason="expired",
        error=str(error),
        failure=history.failure(error, "dead"),
    )
    log.event(logging.WARNING, "xjobs.job.expired", job=job.name, id=job.id, queue=job.queue)
    return Execution(Outcome.DEAD_LETTERED, job, 0.0, finish, str(error), "expired")


def _dependency_failed(job: ClaimedJob, failed: UUID, driver: JobDriver) -> Execution:
    dependency = driver.get_job(failed)
    how = "does not exist" if dependency is None else f"ended {dependency.state}"
    error = DependencyFailedError(f"job {job.name!r} waited for job {failed}, which {how}; not run")
    finish = Finish(
        job.id,
        job.lease_token,
        "dead",
        stop_reason="dependency_failed",
        error=str(error),
        failure=history.failure(error, "dead"),
    )
    log.event(
        logging.WARNING,
        "xjobs.job.dependency_failed",
        job=job.name,
        id=job.id,
        queue=job.queue,
        dependency=failed,
    )
    return Execution(Outcome.DEAD_LETTERED, job, 0.0, finish, str(error), "dependency_failed")


def _unknown(job: ClaimedJob, now: datetime) -> Execution:
    """A row whose name this process does not know: park it, and give up after a grace."""
    settings = conf.get()
    age = (now - job.created_at).total_seconds()
    error = JobUnknownError(
        f"no job registered as {job.name!r} in this process",
        hint=f"{registry.DISCOVERY_HINT}; deploy the code that declares it, or delete the row",
    )
    if age >= settings.unknown_job_grace:
        message = redact.redact(
            f"{error} — not retried: still unknown {age:.0f}s after it was created"
        )
        finish = Finish(
            job.id,
            job.lease_token,
            "dead",
            stop_reason="terminal",
            error=message,
            failure=history.failure(error, "dead"),
        )
        log.event(logging.ERROR, "xjobs.job.unknown", job=job.name, id=job.id, dead=True)
        return Execution(Outcome.DEAD_LETTERED, job, 0.0, finish, str(error), "terminal")
    park = SuspendUntil(
        job.id, job.lease_token, delay=settings.unknown_job_delay, error=redact.redact(str(error))
    )
    log.event(
        logging.WARNING,
        "xjobs.job.unknown",
        job=job.name,
        id=job.id,
        retry_in=f"{settings.unknown_job_delay:g}s",
    )
    return Execution(Outcome.SUSPENDED, job, 0.0, park, str(error))


def _traceback(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))
