"""What an operator's call or command is refused with: backfills (SPEC §16), unknown crons and
jobs, a manifest out of date, and a job in a state the action does not apply to."""

from __future__ import annotations

from .base import XJobsError


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


class ManifestInvalidError(XJobsError):
    """The manifest file is missing, unreadable, or not an xjobs manifest."""

    code = "X_MANIFEST_INVALID"


class ManifestDriftError(XJobsError):
    """The declared jobs, crons or backfills no longer match the committed manifest."""

    code = "X_MANIFEST_DRIFT"


class JobNotFoundError(XJobsError):
    """No job has this id."""

    code = "X_JOB_NOT_FOUND"


class AuditRecordNotFoundError(XJobsError):
    """No operator action of the audit trail has this id (or it is not a UUID)."""

    code = "X_AUDIT_NOT_FOUND"
    default_hint = "python manage.py xjobs audit lists the records with their ids"


class EventNotFoundError(XJobsError):
    """No live event has this id: it was never published, or it expired (its ``ttl``)."""

    code = "X_EVENT_NOT_FOUND"
    default_hint = "python manage.py xjobs events lists the live events with their ids"


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


class JobFilterError(XJobsError):
    """A bulk action's filter is malformed: a field no filter has, a value of the wrong kind,
    an ``input`` that is not a JSON object, or a time without a timezone."""

    code = "X_FILTER_INVALID"


class BulkDeleteLiveError(XJobsError):
    """A bulk delete's filter admits live jobs: only finished jobs (done, dead, failed,
    cancelled) are deleted, so the filter must name their states."""

    code = "X_BULK_DELETE_LIVE"


class ConfirmationRequiredError(XJobsError):
    """The command would act on more jobs than it acts on unasked, and there is no terminal to
    ask on: nothing was changed."""

    code = "X_CONFIRMATION_REQUIRED"


class InputEncryptedError(JobFilterError):
    """A filter on job inputs was given while inputs are encrypted at rest: the database cannot
    look inside an encrypted input, so the filter would match nothing."""

    code = "X_INPUT_ENCRYPTED"
    retry = "terminal"
    default_hint = (
        "filter on a job declared with @job(..., encrypt=False) (name it), or on the job's name, "
        "state, queue or tenant instead"
    )


class TenantRunningError(XJobsError):
    """``erase_tenant`` found jobs of the tenant running, and was not told ``force``: nothing
    was erased."""

    code = "X_TENANT_RUNNING"
    retry = "terminal"
    default_hint = (
        "wait for them to finish (or cancel them), or pass force=True (--force): a running job "
        "erased under its worker has every later write refused, as a lost lease's is"
    )


class QueueMoveInvalidError(XJobsError):
    """``move_queue`` was asked a move that is not one: to the database the jobs are moved
    from, with no other jobs database to move from, or for a queue the settings do not route
    to the target yet (its new jobs would keep landing where it is moved from). Nothing was
    moved (SPEC SHARD-31)."""

    code = "X_MOVE_INVALID"
    retry = "terminal"
    default_hint = (
        'route the queue first (XJOBS["QUEUE_DATABASES"] = {queue: target}, deployed to every '
        "process), then move the jobs left where it lived"
    )


class QueueMoveRunningError(XJobsError):
    """``move_queue`` found runs of the queue running in a database it moves from: the queue
    is paused there so they drain, and nothing was moved (SPEC SHARD-32)."""

    code = "X_MOVE_RUNNING"
    retry = "terminal"
    default_hint = (
        "run the move again once they end (xjobs ls --queue QUEUE --state running); the queue "
        "stays paused in that database until the move completes"
    )
