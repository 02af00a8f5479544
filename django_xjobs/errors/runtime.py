"""What goes wrong while jobs are stored, claimed and run: the store, a run's result and
deadline, the outcomes a handler raises on purpose (``TerminalError``, ``RetryAfterError``,
``RateLimited``), crashes, rows no run can start, batches and dependencies."""

from __future__ import annotations

from typing import Any

from .base import XJobsError


class DriverUnavailableError(XJobsError):
    """The job store cannot be reached or is not set up."""

    code = "X_DRIVER_UNAVAILABLE"
    retry = "retryable"


class ReadDatabaseUnavailableError(DriverUnavailableError):
    """``XJOBS["READ_DATABASE"]`` did not answer: a read surface that must not quietly read the
    primary instead says so (the admin reads the primary and says it on the page)."""

    code = "X_READ_DATABASE_UNAVAILABLE"


class AliasUnavailableError(DriverUnavailableError):
    """One of the databases jobs are routed to (``XJOBS["QUEUE_DATABASES"]``, ``ROUTER``) did
    not answer a read that asks every one: its jobs are not there to count, so the answer is
    refused rather than shown without them (SPEC SHARD-07)."""

    code = "X_ALIAS_UNAVAILABLE"


class RouteUnknownError(XJobsError):
    """``XJOBS["ROUTER"]`` answered an alias that is not one of the jobs' databases: nothing
    was enqueued (SPEC SHARD-02)."""

    code = "X_ROUTE_UNKNOWN"


class RouteSpansError(XJobsError):
    """A batch, or a job and the jobs it waits for (``using(after=...)``), would live in two
    databases: each job and all it lives by live in one, so nothing was enqueued
    (SPEC SHARD-04)."""

    code = "X_ROUTE_SPANS"
    default_hint = (
        "route the batch's members and callbacks (or the job and its dependencies) to one "
        'database: the same queue, or XJOBS["QUEUE_DATABASES"] naming them alike'
    )


class ValueRefusedError(XJobsError):
    """The database refused a value a statement carried (SQLSTATE class 22 or 54): too large for
    an index, out of range, not storable. Sending it again fails again; the message names the
    largest values sent and their sizes."""

    code = "X_VALUE_REFUSED"


class JobUnknownError(XJobsError):
    """A claimed row names a job that is not registered in this process."""

    code = "X_JOB_UNKNOWN"


class ResultInvalidError(XJobsError):
    """A job returned a value that cannot be stored as JSON."""

    code = "X_RESULT_INVALID"
    retry = "terminal"
    default_hint = "return JSON data (dict, list, str, int, float, bool, None) or nothing"


class JobTimeoutError(XJobsError):
    """A run or a step passed its deadline."""

    code = "X_JOB_TIMEOUT"
    retry = "retryable"


class OutboxNoTxError(XJobsError):
    """An enqueue needed a transaction and none was open."""

    code = "X_OUTBOX_NO_TX"


class TerminalError(XJobsError):
    """The job cannot succeed; do not retry it.

    Raise it from a handler to dead-letter the job on this attempt, keeping the attempts left::

        if response.status_code == 401:
            raise TerminalError("the API key was revoked")
    """

    code = "X_TERMINAL"
    retry = "terminal"


class RetryAfterError(XJobsError):
    """Try again later: retry after ``retry_after`` seconds (still counts as an attempt).

    Raise it with the delay a rate-limited API gave you::

        raise RetryAfterError("rate limited", retry_after=float(response.headers["Retry-After"]))
    """

    code = "X_RETRY_AFTER"
    retry = "retry-after"

    def __init__(
        self, message: str | None = None, *, retry_after: Any = None, **kwargs: Any
    ) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class RateLimited(XJobsError):
    """The partner said "not now": pause this run's limit key and run it again later, without
    spending an attempt (issue 31). ``retry_after`` is seconds, a duration (``"30s"``), or a
    ``Retry-After`` header's value (seconds or an HTTP date)::

        if response.status_code == 429:
            raise RateLimited(retry_after=response.headers.get("Retry-After", "30s"))

    Every run of the same key (``@job(limit_key=...)``; without one, of the job) waits until
    then; other keys and other jobs keep running.
    """

    code = "X_RATE_LIMITED"

    def __init__(
        self, message: str | None = None, *, retry_after: Any = None, **kwargs: Any
    ) -> None:
        super().__init__(message or "rate limited by the partner", **kwargs)
        self.retry_after = retry_after


class ErrorRetryInvalidError(XJobsError):
    """A retry classification could not be registered."""

    code = "X_ERROR_RETRY_INVALID"


class ConcurrencyUnenforceableError(XJobsError):
    """A job declares fleet concurrency but the driver has no lease store to enforce it."""

    code = "X_JOB_CONCURRENCY_UNENFORCEABLE"


class JobCrashedError(XJobsError):
    """The job's runs keep dying with their worker (lease expiries); it is not run again."""

    code = "X_JOB_CRASHED"
    retry = "terminal"


class JobUndecodableError(XJobsError):
    """A claimed row's stored input cannot be decoded; the job is dead-lettered unrun."""

    code = "X_JOB_UNDECODABLE"
    retry = "terminal"
    default_hint = (
        "the row was written by another version or by hand; fix its input in SQL and retry_job() "
        "it, or delete it"
    )


class JobVersionError(XJobsError):
    """A run started under an older version of its job, which declares ``old_runs="park"``:
    it is suspended, unrun, until a worker of its version or an operator takes it."""

    code = "X_JOB_VERSION"
    default_hint = (
        "run a worker that still declares the run's version, or start it again under this code "
        "with: manage.py xjobs retry <id> --restart"
    )


class JobExpiredError(XJobsError):
    """A job was not started before its ``expires_at`` (``expires_in``), so it never ran."""

    code = "X_JOB_EXPIRED"
    retry = "terminal"
    default_hint = (
        "nothing to do if the work was only worth doing in time; else raise expires_in=, or "
        "add workers so jobs start sooner, and retry_job() it"
    )


class SnoozeLimitError(XJobsError):
    """A job snoozed (``ctx.snooze``) more times than ``XJOBS["MAX_SNOOZES"]`` allows."""

    code = "X_JOB_SNOOZE_LIMIT"
    retry = "terminal"
    default_hint = (
        "a job that keeps snoozing waits on something that is not coming: catch it and fail, "
        'wait with ctx.step.wait_for_event, or raise XJOBS["MAX_SNOOZES"]'
    )


class JobRowStatusUnknownError(XJobsError):
    """A row read from the job store holds a state or step status this code does not know.

    Never cast to a known one: a completed step read as not completed would run again (SE-60).
    """

    code = "X_JOB_ROW_STATUS_UNKNOWN"
    default_hint = (
        "a newer or older release wrote it, or the row was edited by hand: deploy the release "
        "that knows it, or fix the row"
    )


class BatchClosedError(XJobsError):
    """A member was added to a batch that is closed (or was never opened): nothing was added."""

    code = "X_BATCH_CLOSED"
    default_hint = "add every member before the batch closes (the end of its with block)"


class BatchNotFoundError(XJobsError):
    """No batch has this id."""

    code = "X_BATCH_NOT_FOUND"


class DependencyUnknownError(XJobsError):
    """A job given in ``using(after=[...])`` does not exist: nothing was enqueued."""

    code = "X_DEPENDENCY_UNKNOWN"
    default_hint = (
        "pass ids that enqueue returned; a finished job that was pruned can no longer be waited for"
    )


class DependencyFailedError(XJobsError):
    """A job it waited for (``using(after=...)``) ended dead, failed or cancelled, so it never
    ran (stop reason ``dependency_failed``)."""

    code = "X_DEPENDENCY_FAILED"
    retry = "terminal"
    default_hint = (
        "see why its dependency ended; retry_job runs this one anyway, or enqueue it with "
        "run_anyway=True to run whatever its dependencies end as"
    )


class DependencyCycleError(XJobsError):
    """A job was given itself in ``using(after=[...])``: it would wait for ever."""

    code = "X_DEPENDENCY_CYCLE"
    default_hint = "a job waits for jobs enqueued before it; drop its own id from after"


class EncryptionKeyMissingError(XJobsError):
    """A stored payload is encrypted with a key none of ``XJOBS["ENCRYPTION_KEYS"]`` holds."""

    code = "X_ENCRYPTION_KEY_MISSING"
    # a missing key is a deploy's fault, not the job's: the run is parked unrun, its attempt
    # given back, until a worker that holds the key claims it
    retry = "retryable"
    default_hint = (
        'add the key the row was written with to XJOBS["ENCRYPTION_KEYS"] (any place but the '
        "first decrypts); once every row is re-encrypted (xjobs rotate-keys) the old key can go"
    )
