"""Every error the library raises: one root, one class per code, a message and a hint.

``str(error)`` starts with the code, so a stored ``last_error`` can be searched by it.

A module per kind, every name re-exported here and named here (``django_xjobs.errors.<Name>``,
the path its pickles, a stored failure's class path and the reference use): ``base`` (the roots,
``XJobsError`` and ``JobInterrupt``, and an error's text), ``declaration`` (a declaration or an
input), ``runtime`` (the store, runs, batches and dependencies), ``steps`` (``ctx.step``),
``operator`` (backfills, crons, manifests, an operator's action on a job), ``interrupts`` (a run
told to stop).
"""

from __future__ import annotations

from .base import (
    JobInterrupt,
    RetryKind,
    XJobsError,
    _Coded,
    describe_error,
    first_line,
)
from .declaration import (
    ConfigInvalidError,
    CronInvalidError,
    DurationInvalidError,
    IdempotencyRequiredError,
    InputInvalidError,
    InvariantDefinitionError,
    InvariantError,
    JobDefinitionError,
    JobDuplicateDefinitionError,
    JobDuplicateError,
    JobTenantRequiredDefinitionError,
    JobTenantRequiredError,
    JobVersionInvalidError,
    PayloadTooLargeError,
    QueueUnknownError,
)
from .interrupts import (
    JobAbortedError,
    JobCancelledError,
    JobSnooze,
    LeaseLostError,
    SlotLostError,
    StepSuspension,
)
from .operator import (
    BackfillAppliedError,
    BackfillEnvironmentError,
    BackfillMigrationPendingError,
    BackfillPendingError,
    BackfillRunningError,
    BackfillStalledError,
    BackfillUnknownError,
    BulkDeleteLiveError,
    ConfirmationRequiredError,
    CronUnknownError,
    EventNotFoundError,
    JobFilterError,
    JobIdAmbiguousError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
    JobNotWaitingError,
    ManifestDriftError,
    ManifestInvalidError,
)
from .runtime import (
    BatchClosedError,
    BatchNotFoundError,
    ConcurrencyUnenforceableError,
    DependencyCycleError,
    DependencyFailedError,
    DependencyUnknownError,
    DriverUnavailableError,
    ErrorRetryInvalidError,
    JobCrashedError,
    JobExpiredError,
    JobRowStatusUnknownError,
    JobTimeoutError,
    JobUndecodableError,
    JobUnknownError,
    JobVersionError,
    OutboxNoTxError,
    RateLimited,
    ResultInvalidError,
    RetryAfterError,
    SnoozeLimitError,
    TerminalError,
    ValueRefusedError,
)
from .steps import (
    ChildDepthError,
    ChildJobFailedError,
    StepAtomicAliasError,
    StepAtomicNestedError,
    StepDuplicateError,
    StepLimitError,
    StepOutputInvalidError,
    StepPatchError,
    StepReplayMismatchError,
)

__all__ = [
    "BackfillAppliedError",
    "BackfillEnvironmentError",
    "BackfillMigrationPendingError",
    "BackfillPendingError",
    "BackfillRunningError",
    "BackfillStalledError",
    "BackfillUnknownError",
    "BatchClosedError",
    "BatchNotFoundError",
    "BulkDeleteLiveError",
    "ChildDepthError",
    "ChildJobFailedError",
    "ConcurrencyUnenforceableError",
    "ConfigInvalidError",
    "ConfirmationRequiredError",
    "CronInvalidError",
    "CronUnknownError",
    "DependencyCycleError",
    "DependencyFailedError",
    "DependencyUnknownError",
    "DriverUnavailableError",
    "DurationInvalidError",
    "ErrorRetryInvalidError",
    "EventNotFoundError",
    "IdempotencyRequiredError",
    "InputInvalidError",
    "InvariantDefinitionError",
    "InvariantError",
    "JobAbortedError",
    "JobCancelledError",
    "JobCrashedError",
    "JobDefinitionError",
    "JobDuplicateDefinitionError",
    "JobDuplicateError",
    "JobExpiredError",
    "JobFilterError",
    "JobIdAmbiguousError",
    "JobInterrupt",
    "JobNotCancellableError",
    "JobNotFoundError",
    "JobNotRetryableError",
    "JobNotWaitingError",
    "JobRowStatusUnknownError",
    "JobSnooze",
    "JobTenantRequiredDefinitionError",
    "JobTenantRequiredError",
    "JobTimeoutError",
    "JobUndecodableError",
    "JobUnknownError",
    "JobVersionError",
    "JobVersionInvalidError",
    "LeaseLostError",
    "ManifestDriftError",
    "ManifestInvalidError",
    "OutboxNoTxError",
    "PayloadTooLargeError",
    "QueueUnknownError",
    "RateLimited",
    "ResultInvalidError",
    "RetryAfterError",
    "RetryKind",
    "SlotLostError",
    "SnoozeLimitError",
    "StepAtomicAliasError",
    "StepAtomicNestedError",
    "StepDuplicateError",
    "StepLimitError",
    "StepOutputInvalidError",
    "StepPatchError",
    "StepReplayMismatchError",
    "StepSuspension",
    "TerminalError",
    "ValueRefusedError",
    "XJobsError",
    "describe_error",
    "first_line",
]

# Each class is named by the path users import it from, whichever module defines it.
for _cls in (_Coded, *(globals()[name] for name in __all__)):
    if isinstance(_cls, type) and _cls.__module__.startswith(f"{__name__}."):
        _cls.__module__ = __name__
del _cls


def __getattr__(name: str) -> type[JobDefinitionError]:
    """``errors.<Rule>DefinitionError`` for every other rule of this package, made on first use,
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
        JobVersionInvalidError,
        JobVersionError,
        StepPatchError,
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
        EventNotFoundError,
        ManifestInvalidError,
        ManifestDriftError,
        JobRowStatusUnknownError,
        JobFilterError,
        BulkDeleteLiveError,
        ConfirmationRequiredError,
    )
}
