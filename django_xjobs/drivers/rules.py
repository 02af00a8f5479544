"""The rules both drivers apply alike, in one place each imports, so they refuse the same
input with the same error (SPEC DRV-04 g/k): the operator actions' refusals and the lease checks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from uuid import UUID

from ..durations import MAX_SECONDS, MAX_TEXT
from ..errors import (
    DependencyCycleError,
    DependencyUnknownError,
    InputInvalidError,
    InvariantError,
    JobDuplicateError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
    JobNotWaitingError,
    JobRowStatusUnknownError,
    XJobsError,
)
from ..states import JOB_STATES, LIVE_STATES
from .contract.records import STEP_STATUSES
from .contract.requests import EnqueueRequest

CANCELLED = "cancelled"
#: a waiting dependant's run_at until its release: no claim looks that far (jobs.sql's
#: enqueue_after writes the same instant)
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)


def known_state(job_id: UUID, state: str) -> str:
    """``state`` if a job row may hold it, else ``X_JOB_ROW_STATUS_UNKNOWN`` naming the row: an
    unknown state is never cast to a known one (SPEC DB-05, SE-60)."""
    if state not in JOB_STATES:
        raise JobRowStatusUnknownError(
            f"x_jobs row {job_id} has state {state!r}, not one of {', '.join(JOB_STATES)}"
        )
    return state


def known_status(run_id: UUID, name: str, status: str) -> str:
    """``status`` if a step row may hold it, else ``X_JOB_ROW_STATUS_UNKNOWN``: a completed step
    read as anything else would run again (SPEC DB-05, SE-60)."""
    if status not in STEP_STATUSES:
        raise JobRowStatusUnknownError(
            f"x_job_steps row (run {run_id}, step {name!r}) has status {status!r}, not one of "
            f"{', '.join(STEP_STATUSES)}"
        )
    return status


def not_found(job_id: UUID) -> JobNotFoundError:
    return JobNotFoundError(
        f"no job {job_id} exists", hint="check the id; python manage.py xjobs ls lists the jobs"
    )


def cancel_refusal(job_id: UUID, state: str) -> XJobsError | None:
    """Why a job in ``state`` cannot be cancelled, or None (DESIGN Q-09: done/dead/failed)."""
    if state in LIVE_STATES or state == CANCELLED:
        return None
    if state == "done":
        hint = "it already completed; there is nothing left to cancel"
    else:
        hint = f"it already stopped; retry it with retry_job({str(job_id)!r}) or leave it"
    return JobNotCancellableError(f"job {job_id} is {state!r} and cannot be cancelled", hint=hint)


def requeue_refusal(
    job_id: UUID, state: str, force: bool, restart: bool = False, parked: bool = False
) -> XJobsError | None:
    """Why a job in ``state`` cannot be requeued, or None (DESIGN Q-03: dead, failed, and
    cancelled only with force; with ``restart``, a run a worker of a newer version parked too,
    SPEC VER-09)."""
    if state in ("dead", "failed") or (state == CANCELLED and force):
        return None
    if restart and parked and state == "suspended":
        return None
    if state == CANCELLED:
        hint = "it was cancelled on purpose; pass force=True (--force) to run it again"
    elif state == "done":
        hint = "it completed; enqueue it again instead"
    else:
        hint = f"it has not finished; wait for it, or cancel_job({str(job_id)!r}) it first"
    return JobNotRetryableError(f"job {job_id} is {state!r} and cannot be retried", hint=hint)


def run_now_refusal(job_id: UUID, state: str) -> XJobsError | None:
    """Why a job in ``state`` cannot be made due now, or None (issue 42: a waiting one can)."""
    if state in ("ready", "delayed"):
        return None
    if state == "running":
        hint = "it is running already"
    elif state == "suspended":
        hint = "it is parked on a step (a sleep, an event, child jobs) or its dependencies: "
        hint += "xjobs why says which, and that wakes it, not a run now"
    else:
        hint = f"it has ended; run it again with retry_job({str(job_id)!r})"
    return JobNotWaitingError(f"job {job_id} is {state!r}: only a waiting job runs now", hint=hint)


def requeue_states(force: bool) -> list[str]:
    return ["dead", "failed", CANCELLED] if force else ["dead", "failed"]


def unknown_step(job_id: UUID, step: str, names: list[str]) -> InvariantError:
    return InvariantError(
        f"job {job_id} has no step {step!r} in its run; nothing was changed",
        hint=f"its steps, oldest first: {', '.join(map(repr, names)) or '(none)'}",
    )


def live_duplicate(job_id: UUID, live_id: UUID | None) -> JobDuplicateError:
    return JobDuplicateError(
        f"job {job_id} cannot be retried: live job {live_id} holds its idempotency key",
        hint="let that job finish or cancel it, then retry this one",
    )


# --- fleet slot leases (SPEC SLOT-*)


def check_ttl(ttl: float) -> float:
    """Both drivers refuse the same TTLs: a slot must outlive the moment it is granted."""
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl):
        raise InvariantError(f"lease ttl={ttl!r} must be a finite number of seconds")
    if ttl <= 0:
        raise InvariantError(
            f"lease ttl={ttl!r} must be positive", hint="pass the visibility timeout"
        )
    return float(ttl)


def check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvariantError(f"lease limit={limit!r} must be an integer")
    return limit


def check_after(job_id: UUID, after: tuple[UUID, ...] | list[UUID]) -> tuple[UUID, ...]:
    """``after`` without repeats, in order; a job that names itself is refused (issue 32). A
    longer cycle cannot be built: a job's id exists only once it is enqueued, with its
    dependencies already fixed, so it can name only jobs enqueued before it (SPEC DEP-05)."""
    if job_id in after:
        raise DependencyCycleError(f"job {job_id} was given itself to wait for")
    return tuple(dict.fromkeys(after))


#: jobs that may wait for one job: each is named in its ``dependants`` array, read and rewritten
#: by every settle of it; an enqueue naming a live job that this many already wait for is refused
MAX_DEPENDANTS = 10_000


def too_many_dependants(name: str, job_id: UUID) -> InputInvalidError:
    return InputInvalidError(
        f"job {name!r} was to wait for job {job_id}, which {MAX_DEPENDANTS:,} jobs already wait "
        "for",
        hint="make the dependants wait for a Batch's callback, or chain them",
        field="after",
        limit=MAX_DEPENDANTS,
    )


def unknown_dependency(name: str, job_id: UUID) -> DependencyUnknownError:
    return DependencyUnknownError(
        f"job {name!r} was to wait for job {job_id}, which does not exist"
    )


def check_claim_args(queues: Sequence[str], limit: int, visibility_timeout: float) -> None:
    """Both drivers refuse the same claims (closes the SPEC DRV-05 empty-queue-list gap)."""
    if isinstance(queues, str) or not queues:
        raise InvariantError(
            f"claim needs a non-empty list of queue names, got {queues!r}", hint='e.g. ["default"]'
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvariantError(f"claim limit={limit!r} must be a positive integer")
    if not 0 < visibility_timeout <= MAX_SECONDS:
        raise InvariantError(
            f"visibility_timeout={visibility_timeout!r} must be positive and at most "
            f"{MAX_SECONDS:.0f}s ({MAX_TEXT})",
            hint="a lease is renewed every third of it; minutes are usual",
        )


def row_by_row(requests: Iterable[EnqueueRequest]) -> bool:
    """Whether any of ``requests`` must be decided on its own (a ``replace`` reads the live
    holder first; an ``after`` names its dependencies): such a batch is enqueued one by one."""
    return any(r.replace or r.after is not None for r in requests)


def refuse_row_by_row(requests: Sequence[EnqueueRequest]) -> None:
    """``enqueue_chunks`` takes plain requests only (``row_by_row``)."""
    if row_by_row(requests):
        raise InvariantError(
            f"job {requests[0].name!r}: enqueue_chunks takes plain requests",
            hint="enqueue a replace or an after one by one (enqueue_many)",
        )


def event_matches(payload: object, match: Mapping[str, object] | None) -> bool:
    """Whether an event's data has every field of a waiter's ``match`` equal (the test jsonb
    ``@>`` makes on scalar fields): both drivers' test of an encrypted event's data, opened in
    the process because the database cannot look inside it (SPEC CRYPT-09)."""
    if not match:
        return True
    if not isinstance(payload, dict):
        return False
    return all(k in payload and _same_scalar(payload[k], v) for k, v in match.items())


def _same_scalar(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)
