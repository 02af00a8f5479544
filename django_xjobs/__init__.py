"""django_xjobs: durable background jobs for Django on PostgreSQL.

::

    from django_xjobs import job, Retry

    @job(idempotency_key="receipt:{order_id}", retry=Retry(attempts=5))
    def send_receipt(ctx, order_id: int): ...

    send_receipt.enqueue(order_id=42)
"""

from .context import JobContext, Signal
from .definitions import JobHandle, job
from .drivers.base import EnqueueResult
from .errors import (
    DriverUnavailableError,
    DurationInvalidError,
    InputInvalidError,
    InvariantError,
    JobAbortedError,
    JobDefinitionError,
    JobDuplicateError,
    JobInterrupt,
    JobTimeoutError,
    JobUnknownError,
    LeaseLostError,
    OutboxNoTxError,
    PayloadTooLargeError,
    QueueUnknownError,
    ResultInvalidError,
    TerminalError,
    XJobsError,
)
from .registry import get_job, registered_jobs
from .retry import Retry, retry_schedule

__all__ = [
    "DriverUnavailableError",
    "DurationInvalidError",
    "EnqueueResult",
    "InputInvalidError",
    "InvariantError",
    "JobAbortedError",
    "JobContext",
    "JobDefinitionError",
    "JobDuplicateError",
    "JobHandle",
    "JobInterrupt",
    "JobTimeoutError",
    "JobUnknownError",
    "LeaseLostError",
    "OutboxNoTxError",
    "PayloadTooLargeError",
    "QueueUnknownError",
    "ResultInvalidError",
    "Retry",
    "Signal",
    "TerminalError",
    "XJobsError",
    "get_job",
    "job",
    "registered_jobs",
    "retry_schedule",
]
