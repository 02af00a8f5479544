"""django_xjobs: durable background jobs for Django on PostgreSQL.

::

    from django_xjobs import job, Retry

    @job(idempotency_key="receipt:{order_id}", retry=Retry(attempts=5))
    def send_receipt(ctx, order_id: int): ...

    send_receipt.enqueue(order_id=42)
"""

from .actors import Actor
from .backfill import backfill, registered_backfills
from .classify import classify, register_error_retry, retry_class
from .context import JobContext, JobContextFilter, Signal, current_job
from .cron import CronHandle, cron, registered_crons
from .definitions import JobHandle, job
from .drivers.base import EnqueueResult, QueueState
from .errors import (
    BackfillAppliedError,
    BackfillEnvironmentError,
    BackfillMigrationPendingError,
    BackfillPendingError,
    BackfillRunningError,
    BackfillStalledError,
    BackfillUnknownError,
    DriverUnavailableError,
    DurationInvalidError,
    InputInvalidError,
    InvariantError,
    JobAbortedError,
    JobCancelledError,
    JobDefinitionError,
    JobDuplicateError,
    JobInterrupt,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
    JobTenantRequiredError,
    JobTimeoutError,
    JobUnknownError,
    LeaseLostError,
    OutboxNoTxError,
    PayloadTooLargeError,
    QueueUnknownError,
    ResultInvalidError,
    RetryAfterError,
    StepAtomicAliasError,
    StepAtomicNestedError,
    StepDuplicateError,
    StepOutputInvalidError,
    TerminalError,
    ValueRefusedError,
    XJobsError,
)
from .events import publish_event
from .inspect import (
    cancel_job,
    discard_outbox_entry,
    inspect_dead_letters,
    inspect_job,
    inspect_manifest,
    inspect_outbox,
    inspect_queues,
    inspect_workers,
    pause_queue,
    resume_queue,
    retry_job,
    retry_outbox_entry,
)
from .registry import get_job, registered_jobs
from .retry import Retry, retry_schedule

__all__ = [
    "Actor",
    "BackfillAppliedError",
    "BackfillEnvironmentError",
    "BackfillMigrationPendingError",
    "BackfillPendingError",
    "BackfillRunningError",
    "BackfillStalledError",
    "BackfillUnknownError",
    "CronHandle",
    "DriverUnavailableError",
    "DurationInvalidError",
    "EnqueueResult",
    "InputInvalidError",
    "InvariantError",
    "JobAbortedError",
    "JobCancelledError",
    "JobContext",
    "JobContextFilter",
    "JobDefinitionError",
    "JobDuplicateError",
    "JobHandle",
    "JobInterrupt",
    "JobNotCancellableError",
    "JobNotFoundError",
    "JobNotRetryableError",
    "JobTenantRequiredError",
    "JobTimeoutError",
    "JobUnknownError",
    "LeaseLostError",
    "OutboxNoTxError",
    "PayloadTooLargeError",
    "QueueState",
    "QueueUnknownError",
    "ResultInvalidError",
    "Retry",
    "RetryAfterError",
    "Signal",
    "StepAtomicAliasError",
    "StepAtomicNestedError",
    "StepDuplicateError",
    "StepOutputInvalidError",
    "TerminalError",
    "ValueRefusedError",
    "XJobsError",
    "backfill",
    "cancel_job",
    "classify",
    "cron",
    "current_job",
    "discard_outbox_entry",
    "get_job",
    "inspect_dead_letters",
    "inspect_job",
    "inspect_manifest",
    "inspect_outbox",
    "inspect_queues",
    "inspect_workers",
    "job",
    "pause_queue",
    "publish_event",
    "register_error_retry",
    "registered_backfills",
    "registered_crons",
    "registered_jobs",
    "resume_queue",
    "retry_class",
    "retry_job",
    "retry_outbox_entry",
    "retry_schedule",
]
