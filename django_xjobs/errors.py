"""Every error the library raises: one root, one class per code, a message and a hint.

``str(error)`` starts with the code, so a stored ``last_error`` can be searched by it.
"""

from __future__ import annotations

import copy
import threading
from typing import Any, ClassVar, Literal, Self

RetryKind = Literal["terminal", "retryable", "retry-after"]


class _Coded(BaseException):
    """The shared shape of every error: ``code``, ``message``, ``hint`` and free ``meta``."""

    code: ClassVar[str] = "X_INVARIANT"
    default_hint: ClassVar[str] = ""
    #: A declared classification (SPEC CLASS-03): ``None`` means the backoff path decides.
    retry: ClassVar[RetryKind | None] = None

    def __init__(
        self,
        message: str | None = None,
        *,
        hint: str | None = None,
        code: str | None = None,
        **meta: Any,
    ) -> None:
        # ``code=`` is an app's own code on its own error (``XJobsError(..., code="APP_DECLINED")``,
        # classified by register_error_retry); this package raises each of its codes with the
        # class that owns it (tests/project/test_boundaries.py holds it to that).
        if code is not None:
            self.code = code  # type: ignore[misc]
        self.message = message or (type(self).__doc__ or self.code).strip().splitlines()[0]
        self.hint = self.default_hint if hint is None else hint
        self.meta = meta
        super().__init__(str(self))

    def prefixed(self, prefix: str) -> Self:
        """A copy of this error whose message starts with ``prefix``: the same class, code,
        hint and meta (``inputs[3]: ...`` names the input of a batch that broke a rule)."""
        copied = copy.copy(self)
        copied.message = f"{prefix}{self.message}"
        copied.args = (str(copied),)
        return copied

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        return f"{text} — {self.hint}" if self.hint else text


class XJobsError(_Coded, Exception):
    """A django_xjobs operation failed.

    Every error an operation raises is one: ``code`` names the rule (``X_INPUT_INVALID``),
    ``message`` says what happened, ``hint`` says the fix, and ``str(error)`` starts with the
    code. Catch it by class, or by code::

        try:
            send_receipt.enqueue(order_id=order.pk)
        except XJobsError as error:
            if error.code != "X_PAYLOAD_TOO_LARGE":
                raise
    """


class JobInterrupt(_Coded):
    """A run was told to stop.

    Not an ``Exception``: a handler's ``except Exception`` must not swallow a cancellation or a
    lost lease, or the run would go on writing after it stopped owning the job.
    """


# --- declaration and input ------------------------------------------------------------------


class InvariantError(XJobsError):
    """An argument broke a rule of the API."""

    code = "X_INVARIANT"


class DurationInvalidError(XJobsError):
    """A duration could not be read."""

    code = "X_DURATION_INVALID"
    default_hint = 'use a timedelta, a number of seconds, or a string such as "500ms", "30s", "5m", "2h30m", "3d"'


class JobDefinitionError(XJobsError):
    """A job, cron or backfill declaration is invalid; raised when the module defining it is
    imported.

    It is never raised as itself: each rule raises its own subclass, with its own ``code``
    (``CronInvalidError``, ``IdempotencyRequiredError``, ...). A rule that has a class of its
    own outside declarations is raised as a class that is both, from ``JobDefinitionError.of``:
    a bad duration in ``@job(timeout=...)`` is a ``DurationInvalidDefinitionError``, which
    ``except JobDefinitionError`` and ``except DurationInvalidError`` both catch.
    """

    _of: ClassVar[dict[type[XJobsError], type[JobDefinitionError]]] = {}
    _of_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def of(cls, rule: type[XJobsError]) -> type[JobDefinitionError]:
        """The declaration error for ``rule``: a subclass of both this class and ``rule``,
        carrying ``rule``'s code, named ``<Rule>DefinitionError`` (``InvariantError`` gives
        ``InvariantDefinitionError``). The same class on every call; for the rules of this
        module it is an attribute of it, so an instance pickles by reference."""
        if issubclass(rule, JobDefinitionError):
            return rule
        with cls._of_lock:
            made = cls._of.get(rule)
            if made is None:
                name = rule.__name__.removesuffix("Error") + "DefinitionError"
                doc = f"A declaration broke the rule of ``{rule.__name__}`` (``{rule.code}``)."
                body = {"code": rule.code, "__doc__": doc, "__module__": __name__}
                made = cls._of[rule] = type(name, (JobDefinitionError, rule), body)
            return made


class CronInvalidError(JobDefinitionError):
    """A cron's schedule cannot be read or never fires, or ``@cron`` was put where it cannot
    work."""

    code = "X_CRON_INVALID"


class IdempotencyRequiredError(JobDefinitionError):
    """A job was declared without an ``idempotency_key``."""

    code = "X_IDEMPOTENCY_REQUIRED"


class InputInvalidError(XJobsError):
    """Job inputs do not fit the handler's signature or are not JSON."""

    code = "X_INPUT_INVALID"


class PayloadTooLargeError(XJobsError):
    """A payload is larger than the configured cap."""

    code = "X_PAYLOAD_TOO_LARGE"
    default_hint = 'store large data elsewhere and pass its id, or raise XJOBS["MAX_PAYLOAD_BYTES"]'


class QueueUnknownError(XJobsError):
    """A queue name is not declared by any job nor listed in XJOBS["QUEUES"]."""

    code = "X_QUEUE_UNKNOWN"


class ConfigInvalidError(XJobsError):
    """The XJOBS setting is invalid."""

    code = "X_CONFIG_INVALID"


class JobDuplicateError(XJobsError):
    """A live job already holds this idempotency key."""

    code = "X_JOB_DUPLICATE"


# --- runtime --------------------------------------------------------------------------------


class DriverUnavailableError(XJobsError):
    """The job store cannot be reached or is not set up."""

    code = "X_DRIVER_UNAVAILABLE"
    retry = "retryable"


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


# --- backfills (SPEC §16) ----------------------------------------------------------------------


class BackfillPendingError(XJobsError):
    """A declared backfill has no completed pass in this environment."""

    code = "X_BACKFILL_PENDING"


class BackfillAppliedError(XJobsError):
    """The backfill already completed in this environment; only ``force`` runs it again."""

    code = "X_BACKFILL_APPLIED"
    retry = "terminal"


class BackfillEnvironmentError(XJobsError):
    """The backfill's ``environments`` exclude the current one."""

    code = "X_BACKFILL_ENVIRONMENT"
    retry = "terminal"


class BackfillMigrationPendingError(XJobsError):
    """The migration the backfill ``requires`` is not applied."""

    code = "X_BACKFILL_MIGRATION_PENDING"


class BackfillRunningError(XJobsError):
    """A pass of the backfill is already live."""

    code = "X_BACKFILL_RUNNING"


class BackfillStalledError(XJobsError):
    """The pass ran out of rows while the queryset still matches some: the handler did not fix
    the rows it was given."""

    code = "X_BACKFILL_STALLED"
    retry = "terminal"


class BackfillUnknownError(XJobsError):
    """No backfill is declared under that name."""

    code = "X_BACKFILL_UNKNOWN"


class CronUnknownError(XJobsError):
    """No cron is declared under that name."""

    code = "X_CRON_UNKNOWN"


class JobTenantRequiredError(XJobsError):
    """A tenant-scoped job was declared or enqueued without a way to get its tenant."""

    code = "X_JOB_TENANT_REQUIRED"


class StepDuplicateError(XJobsError):
    """A step name was used twice in one attempt."""

    code = "X_STEP_DUPLICATE"
    retry = "terminal"  # SPEC CLASS-02: the same code would fail the same way again
    default_hint = "give each step its own name; a loop can add its index: f'fetch:{page}'"


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


class StepLimitError(XJobsError):
    """A run started more steps than ``XJOBS["MAX_STEPS_PER_RUN"]`` allows."""

    code = "X_STEP_LIMIT"
    retry = "terminal"
    default_hint = (
        'split the work into child jobs (ctx.step.call_many), or raise XJOBS["MAX_STEPS_PER_RUN"]'
    )


class StepOutputInvalidError(XJobsError):
    """A step returned a value that cannot be stored as JSON."""

    code = "X_STEP_OUTPUT_INVALID"
    default_hint = "return JSON data from the step (dict, list, str, number, bool, None)"


class StepAtomicAliasError(XJobsError):
    """An atomic step's block wrote to a database other than the jobs database."""

    code = "X_STEP_ATOMIC_ALIAS"
    retry = "terminal"  # the same block would write there again
    default_hint = (
        "only writes on the jobs database (XJOBS['DATABASE']) commit with the step; "
        "move the other write to a step.run step of its own"
    )


class StepAtomicNestedError(XJobsError):
    """An atomic step was opened inside a transaction already open on the jobs database."""

    code = "X_STEP_ATOMIC_NESTED"
    retry = "terminal"  # the same code opens the same transaction again
    default_hint = (
        "the step must own its transaction to commit it with its record: open "
        "ctx.step.atomic(...) outside transaction.atomic() and outside another atomic step"
    )


class ManifestInvalidError(XJobsError):
    """The manifest file is missing, unreadable, or not an xjobs manifest."""

    code = "X_MANIFEST_INVALID"


class ManifestDriftError(XJobsError):
    """The declared jobs, crons or backfills no longer match the committed manifest."""

    code = "X_MANIFEST_DRIFT"


class JobRowStatusUnknownError(XJobsError):
    """A row read from the job store holds a state or step status this code does not know.

    Never cast to a known one: a completed step read as not completed would run again (SE-60).
    """

    code = "X_JOB_ROW_STATUS_UNKNOWN"
    default_hint = (
        "a newer or older release wrote it, or the row was edited by hand: deploy the release "
        "that knows it, or fix the row"
    )


class JobNotFoundError(XJobsError):
    """No job has this id."""

    code = "X_JOB_NOT_FOUND"


class JobIdAmbiguousError(JobNotFoundError):
    """An id prefix that more than one job's id starts with: the message lists them."""

    code = "X_JOB_ID_AMBIGUOUS"


class JobNotCancellableError(XJobsError):
    """The job has already finished and cannot be cancelled."""

    code = "X_JOB_NOT_CANCELLABLE"


class JobNotRetryableError(XJobsError):
    """The job is in a state that a retry would disturb."""

    code = "X_JOB_NOT_RETRYABLE"


class JobNotWaitingError(XJobsError):
    """The job is not waiting for its time: only a ready or delayed job can be run now."""

    code = "X_JOB_NOT_WAITING"


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


class StepReplayMismatchError(XJobsError):
    """A replayed ``ctx.step.call``/``call_many`` is not the call its step recorded: another
    job, the other kind of call, or another number of inputs. The record is what ran (its
    children exist), so the step refuses rather than resume with children it no longer asks
    for."""

    code = "X_STEP_REPLAY_MISMATCH"
    retry = "terminal"  # every replay reads the same record
    default_hint = (
        "a deploy changed this step while runs were parked in it: keep the call as recorded "
        "until those runs end, or give the changed call a new name= (it then starts afresh)"
    )


class ChildJobFailedError(XJobsError):
    """A child job called from a step (``ctx.step.call``/``call_many``) ended without a result.

    ``children`` lists each child that ended dead, failed or cancelled, in input order, as
    ``{"index", "id", "state", "stop_reason", "last_error"}``; ``child_id``, ``state`` and
    ``last_error`` are the first of them. The parent catches it like any error; uncaught, it
    ends the parent at once (a retry would replay the same children)::

        try:
            label = ctx.step.call(make_label, {"order_id": order_id})
        except ChildJobFailedError as error:
            label = fallback_label(order_id, error.last_error)
    """

    code = "X_CHILD_FAILED"
    retry = "terminal"
    default_hint = "catch ChildJobFailedError in the parent, or fix the child and retry both"

    def __init__(self, message: str, *, children: list[dict[str, Any]], **meta: Any) -> None:
        super().__init__(message, children=children, **meta)
        self.children = children
        first = children[0] if children else {}
        self.child_id: str | None = first.get("id")
        self.state: str | None = first.get("state")
        self.last_error: str | None = first.get("last_error")


class ChildDepthError(XJobsError):
    """A step asked for child jobs (``ctx.step.call``/``call_many``) from a job already
    ``MAX_CHILD_DEPTH`` generations below a job nobody called: its children would nest one
    deeper than the bound. Nothing is recorded or enqueued; a retry would ask the same, so it
    is terminal. A handler that calls its own job as a child hits it instead of filling the
    table one generation per run."""

    code = "X_CHILD_DEPTH"
    retry = "terminal"
    default_hint = (
        "let the parent loop over ctx.step.call instead of each child calling the next, or "
        "enqueue the next job instead of calling it"
    )


class JobAbortedError(JobInterrupt):
    """The run was aborted; nothing more it writes will land."""

    code = "X_ABORTED"


class LeaseLostError(JobInterrupt):
    """The run no longer holds its job: the lease lapsed or was taken."""

    code = "X_JOB_LEASE_LOST"


class SlotLostError(JobInterrupt):
    """The run's fleet concurrency slot is no longer its own."""

    code = "X_JOB_SLOT_LOST"


class JobCancelledError(JobInterrupt):
    """The job was cancelled while it ran."""

    code = "X_JOB_CANCELLED"


class StepSuspension(JobInterrupt):
    """Internal: a step parks the run until ``resume_at`` (a sleep or an event wait).

    It unwinds the handler like a cancellation (an ``except Exception`` must not stop it) and
    the executor turns it into a SuspendUntil settle that burns no attempt (SPEC STEP-10).
    """

    code = "X_STEP_SUSPENDED"

    def __init__(
        self,
        step: str,
        resume_at: Any,
        reason: str,
        resume_in: float = 0.0,
        children: tuple[Any, ...] | None = None,
    ) -> None:
        super().__init__(f"step {step!r} parks the run until {resume_at} ({reason})")
        self.step, self.resume_at, self.reason = step, resume_at, reason
        #: seconds from now to ``resume_at``, both on the step store's clock (issue 11)
        self.resume_in = resume_in
        #: the live child jobs a call step waits for: the last to end wakes the run (issue 32)
        self.children = children


class JobSnooze(JobInterrupt):
    """Internal: ``ctx.snooze`` puts the run back for ``seconds`` without spending an attempt.

    It unwinds the handler like a step suspension (an ``except Exception`` must not stop it),
    and the executor settles it as a snooze (issue 29).
    """

    code = "X_JOB_SNOOZED"

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the run snoozes for {seconds:g}s")
        self.seconds = seconds


# --- the declaration errors of rules above (JobDefinitionError.of) -----------------------------


class InvariantDefinitionError(JobDefinitionError, InvariantError):
    """A declaration broke a rule of the API: ``concurrency=0``, a bad backfill ``batch=``, ..."""

    code = "X_INVARIANT"


class JobDuplicateDefinitionError(JobDefinitionError, JobDuplicateError):
    """Two jobs (or two crons, two backfills) declare one name."""

    code = "X_JOB_DUPLICATE"


class JobTenantRequiredDefinitionError(JobDefinitionError, JobTenantRequiredError):
    """A job's ``tenant=`` is neither a callable nor ``"required"``."""

    code = "X_JOB_TENANT_REQUIRED"


JobDefinitionError._of.update(
    {
        InvariantError: InvariantDefinitionError,
        JobDuplicateError: JobDuplicateDefinitionError,
        JobTenantRequiredError: JobTenantRequiredDefinitionError,
    }
)


def __getattr__(name: str) -> type[JobDefinitionError]:
    """``errors.<Rule>DefinitionError`` for every other rule of this module, made on first use,
    so a pickled one loads in a process that has not made it yet."""
    rule = globals().get(name.removesuffix("DefinitionError") + "Error")
    if (
        name.endswith("DefinitionError")
        and isinstance(rule, type)
        and issubclass(rule, XJobsError)
        and not issubclass(rule, JobDefinitionError)
    ):
        return JobDefinitionError.of(rule)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Every code this package owns, with its class: the table the docs list. A declaration's
#: error for a rule (``InvariantDefinitionError``) carries its rule's code, so the rule's class
#: stands for it here.
CODES: dict[str, type[_Coded]] = {
    cls.code: cls
    for cls in (
        InvariantError,
        DurationInvalidError,
        CronInvalidError,
        IdempotencyRequiredError,
        InputInvalidError,
        PayloadTooLargeError,
        QueueUnknownError,
        ConfigInvalidError,
        JobDuplicateError,
        DriverUnavailableError,
        ValueRefusedError,
        JobUnknownError,
        ResultInvalidError,
        JobTimeoutError,
        OutboxNoTxError,
        TerminalError,
        RetryAfterError,
        RateLimited,
        ErrorRetryInvalidError,
        ConcurrencyUnenforceableError,
        JobCrashedError,
        JobUndecodableError,
        SlotLostError,
        StepDuplicateError,
        StepLimitError,
        SnoozeLimitError,
        JobExpiredError,
        StepOutputInvalidError,
        StepAtomicAliasError,
        StepAtomicNestedError,
        JobNotFoundError,
        JobIdAmbiguousError,
        JobNotCancellableError,
        JobNotRetryableError,
        JobNotWaitingError,
        BatchClosedError,
        BatchNotFoundError,
        DependencyUnknownError,
        DependencyFailedError,
        DependencyCycleError,
        ChildJobFailedError,
        ChildDepthError,
        StepReplayMismatchError,
        JobAbortedError,
        LeaseLostError,
        JobCancelledError,
        JobTenantRequiredError,
        BackfillPendingError,
        BackfillAppliedError,
        BackfillEnvironmentError,
        BackfillMigrationPendingError,
        BackfillRunningError,
        BackfillStalledError,
        BackfillUnknownError,
        CronUnknownError,
        ManifestInvalidError,
        ManifestDriftError,
        JobRowStatusUnknownError,
    )
}


# --- the text of an error, in one place --------------------------------------------------------


def describe_error(error: BaseException) -> str:
    """How an error reads in ``last_error``, a step record or a log: the code first for ours,
    else the exception's type and message."""
    if isinstance(error, XJobsError | JobInterrupt):
        return str(error)
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def first_line(error: BaseException) -> str:
    """The first line of an error's message (a database error's can run to many)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
