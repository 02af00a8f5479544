"""What a worker does with a run started under another version of its job's code (issue 44):
replay it by name, start it again without its steps, or park it for a worker of its version, as
the job's ``old_runs`` says; a run of a newer version goes back unrun (its claim never takes
one: SPEC VER-05). Decided before the body starts, from the claimed row's version."""

from __future__ import annotations

import logging

from .. import history, log, metrics, redact
from ..drivers.contract import ClaimedJob, JobDriver, Shed, SuspendUntil
from ..errors import JobVersionError, LeaseLostError
from .execution import Execution, Outcome
from .handle import Runnable
from .stop import StopSignal
from .verdicts import stopped_or_failed

#: how long a run of a newer version waits before any worker looks again (a worker of this
#: version never claims it: only a claim told another version's declarations could)
NEWER_BACK_IN = 60.0


def old_run(
    job: ClaimedJob, handle: Runnable, driver: JobDriver, signal: StopSignal
) -> Execution | None:
    """How the run ends before its body starts, or None: the body runs (its version, or an
    older one replayed, or one started again here)."""
    if job.version == handle.version:
        return None
    if job.version > handle.version:
        return _newer(job, handle)
    metrics.inc("xjobs_jobs_old_runs_total", queue=job.queue, policy=handle.old_runs)
    if handle.old_runs == "park":
        return _park(job, handle)
    if handle.old_runs == "restart":
        return _restart(job, handle, driver, signal)
    return None  # replay: its steps are found by name, as ever (SPEC VER-06)


def _newer(job: ClaimedJob, handle: Runnable) -> Execution:
    back = Shed(
        job.id,
        job.lease_token,
        delay=NEWER_BACK_IN,
        reason=f"a newer version ({job.version}) than this worker's ({handle.version})",
    )
    return Execution(Outcome.SUSPENDED, job, 0.0, back, error=back.reason)


def _park(job: ClaimedJob, handle: Runnable) -> Execution:
    """SPEC VER-08: suspended unrun, due at once for a worker of its version; this worker's
    claims pass it by from now on (the row is marked parked)."""
    error = JobVersionError(
        f"run of {job.name!r} started under version {job.version}; this worker runs version "
        f"{handle.version}, which parks older runs (old_runs='park')",
        hint=f"run a worker of version {job.version}, or start it again under this code: "
        f"python manage.py xjobs retry {job.id} --restart",
    )
    entry = history.failure(error, "parked")
    park = SuspendUntil(
        job.id,
        job.lease_token,
        error=redact.redact(str(error)),
        failure=history.Failure(entry.code, entry.message, entry.exception, "", "parked"),
        parked=True,
    )
    log.event(
        logging.WARNING,
        "xjobs.job.version_parked",
        job=job.name,
        id=job.id,
        version=job.version,
        declared=handle.version,
    )
    return Execution(Outcome.SUSPENDED, job, 0.0, park, error=str(error))


def _restart(
    job: ClaimedJob, handle: Runnable, driver: JobDriver, signal: StopSignal
) -> Execution | None:
    """SPEC VER-07: the run's steps go, it takes this version, and the body starts from the top
    in this same attempt; the restart is in its history."""
    entry = history.Failure(
        code=JobVersionError.code,
        message=f"started again under version {handle.version}: it began under version "
        f"{job.version}, whose stored steps were discarded (old_runs='restart')",
        exception=f"{JobVersionError.__module__}.{JobVersionError.__qualname__}",
        traceback="",
        outcome="restarted",
    )
    if driver.runs().restart(job.id, job.lease_token, handle.version, entry):
        log.event(
            logging.WARNING,
            "xjobs.job.version_restarted",
            job=job.name,
            id=job.id,
            version=job.version,
            declared=handle.version,
        )
        return None
    lost = LeaseLostError(
        f"job {job.id} is no longer held by this run",
        hint="its lease lapsed or it was cancelled; another run owns it now",
    )
    signal.abort(lost)
    return stopped_or_failed(job, handle.retry, lost, signal, 0.0)
