"""How a run that did not complete ends: a failure under its retry policy (or an outage's
attempt given back), a run stopped or cut short, a crash, a crash loop, and the rows no run can
start (undecodable, expired, a failed dependency, a name unknown here). Each returns the one
``Execution`` that settles it."""

from __future__ import annotations

import logging
import traceback
from dataclasses import replace
from datetime import datetime
from typing import Literal
from uuid import UUID

from .. import conf, crypt, history, log, metrics, redact
from ..declarations import registry
from ..drivers import failures
from ..drivers.contract import (
    ClaimedJob,
    Finish,
    JobDriver,
    RetryAt,
    SuspendUntil,
)
from ..errors import (
    DependencyFailedError,
    EncryptionKeyMissingError,
    JobAbortedError,
    JobCancelledError,
    JobCrashedError,
    JobExpiredError,
    JobInterrupt,
    JobTimeoutError,
    JobUndecodableError,
    JobUnknownError,
    LeaseLostError,
    XJobsError,
    describe_error,
)
from ..retry import DEFAULT_RETRY, Retry, decide
from ..text import storable
from . import outage
from .execution import Execution, Outcome
from .handle import Runnable
from .stop import StopSignal


def stopped_or_failed(
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
    return stopped_or_failed(
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
    return replace(crash_looping(job, policy, counted=1), duration=duration)


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


def crash_looping(job: ClaimedJob, policy: Retry, counted: int = 0) -> Execution:
    """Its runs keep dying (SIGKILL, OOM, exit) or stalling: stop, and say so, rather than
    crash every process that runs it, forever. ``counted``: a crash seen just now, not yet on
    the row."""
    expiries = job.lease_expiries + counted
    if counted:
        what = f"the last {expiries} run(s) of job {job.name!r} died alone in a child process"
    elif not expiries:  # past its budget with no lapse counted: the attempts themselves ran out
        what = (
            f"job {job.name!r} was claimed for attempt {job.attempt} of "
            f"{policy.attempts}: the one before it ended without settling (its worker died "
            "or stalled on its last attempt)"
        )
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


def undecodable(job: ClaimedJob) -> Execution:
    """A row whose stored input this process cannot decode: no attempt of it can run, so it
    goes dead at once with the reason, and no batch-mate shares its fate (issue 24)."""
    if job.undecodable == crypt.KEY_MISSING:
        return key_missing(job)
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


def key_missing(job: ClaimedJob) -> Execution:
    """SPEC CRYPT-05: a row whose input is encrypted with a key this worker lacks is a deploy's
    fault, not the job's: it is parked unrun, its attempt given back, and claimed again after
    ``UNKNOWN_JOB_DELAY`` — by then, or by a worker that holds the key, it runs as written."""
    delay = conf.get().unknown_job_delay
    error = EncryptionKeyMissingError(f"job {job.name!r} {crypt.KEY_MISSING}; not run")
    park = SuspendUntil(job.id, job.lease_token, delay=delay, error=f"{error.code}: {error}")
    metrics.inc("xjobs_decrypt_failures_total", queue=job.queue)
    log.event(
        logging.ERROR,
        "xjobs.job.key_missing",
        job=job.name,
        id=job.id,
        queue=job.queue,
        retry_in=f"{delay:g}s",
    )
    return Execution(Outcome.SUSPENDED, job, 0.0, park, str(error))


def expired(job: ClaimedJob, driver: JobDriver) -> Execution:
    """Claimed for the first time after its ``expires_at``: the handler never runs, and the
    job ends dead with stop reason ``expired``, in the same fenced settle as any run (issue 29).
    A job whose dependency ended otherwise than done was released with its expiry set to then:
    it ends the same way, with stop reason ``dependency_failed`` (issue 32, SPEC DEP-04). Only
    this rare path reads the row again."""
    row = driver.reads().get_job(job.id)
    if row is not None and row.after_failed is not None:
        return _dependency_failed(job, row.after_failed, driver)
    error = JobExpiredError(f"job {job.name!r} was not started before it expired; not run")
    execution = _never_run(job, error, "expired")
    log.event(logging.WARNING, "xjobs.job.expired", job=job.name, id=job.id, queue=job.queue)
    return execution


def _dependency_failed(job: ClaimedJob, failed: UUID, driver: JobDriver) -> Execution:
    dependency = driver.reads().get_job(failed)
    how = "does not exist" if dependency is None else f"ended {dependency.state}"
    error = DependencyFailedError(f"job {job.name!r} waited for job {failed}, which {how}; not run")
    execution = _never_run(job, error, "dependency_failed")
    log.event(
        logging.WARNING,
        "xjobs.job.dependency_failed",
        job=job.name,
        id=job.id,
        queue=job.queue,
        dependency=failed,
    )
    return execution


def _never_run(job: ClaimedJob, error: XJobsError, stop_reason: str) -> Execution:
    """The end of a job whose handler never runs: dead with ``stop_reason`` and ``error``, in
    the same fenced settle as any run."""
    finish = Finish(
        job.id,
        job.lease_token,
        "dead",
        stop_reason=stop_reason,
        error=str(error),
        failure=history.failure(error, "dead"),
    )
    return Execution(Outcome.DEAD_LETTERED, job, 0.0, finish, str(error), stop_reason)


def unknown(job: ClaimedJob, now: datetime) -> Execution:
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
