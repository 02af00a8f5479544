"""What the roles keep beside the jobs: the outbox's staged enqueues, the backfills' ledger,
and the figures of the overview (what ended each minute, each queue's depth)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from ..ids import uuid7
from .fields import PgArrayField


class OutboxEntry(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    job = models.TextField()
    queue = models.TextField(db_default="default")
    input = models.JSONField()
    idempotency_key = models.TextField()
    max_attempts = models.IntegerField(db_default=3)
    priority = models.IntegerField(db_default=0)
    run_at = models.DateTimeField(db_default=Now())
    staged_at = models.DateTimeField(db_default=Now())
    tenant_id = models.TextField(null=True, blank=True)
    traceparent = models.TextField(null=True, blank=True)
    enqueued_by = models.TextField(null=True, blank=True)
    published_at = models.DateTimeField(null=True, blank=True)
    #: the job this row was published as: its own id, or the live duplicate it collapsed into
    job_id = models.UUIDField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.TextField(null=True, blank=True)
    #: set when a publish failed for a reason that fails the same way again (issue 24): the
    #: relay leaves the row alone until an operator retries or discards it
    quarantined_at = models.DateTimeField(null=True, blank=True)
    #: the SQLSTATE or error code that put the row in quarantine, and the error's text
    error_code = models.TextField(null=True, blank=True)
    error = models.TextField(null=True, blank=True)
    #: the job controls the publish applies as a direct enqueue would (issue 29)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="The job's expiry, as given: not started by then."
    )
    expires_in = models.FloatField(
        null=True,
        blank=True,
        help_text="The job's expiry in seconds from when it falls due (run_at), as given.",
    )
    replace = models.BooleanField(
        db_default=False,
        help_text="Published as on_conflict='replace': a waiting holder of the key takes it.",
    )
    #: the job's dependencies, published as using(after=..., run_anyway=...) (issue 32)
    after = PgArrayField(models.UUIDField(), null=True, blank=True)
    run_anyway = models.BooleanField(null=True, blank=True)

    class Meta:
        db_table = "x_outbox"
        verbose_name_plural = "outbox entries"
        indexes = [
            models.Index(
                fields=["staged_at", "id"],
                condition=Q(published_at__isnull=True),
                name="x_outbox_unpublished_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.job} staged {self.staged_at}"


class Backfill(models.Model):
    run_id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    name = models.TextField()
    checksum = models.TextField()
    app_version = models.TextField()
    status = models.TextField(db_default="running")
    rows_processed = models.BigIntegerField(db_default=0)
    last_cursor = models.TextField(null=True, blank=True)
    started_at = models.DateTimeField(db_default=Now())
    completed_at = models.DateTimeField(null=True, blank=True)
    environment = models.TextField(
        null=True, blank=True, help_text='XJOBS["ENVIRONMENT"] where the pass ran.'
    )
    pages = models.IntegerField(db_default=0)
    job_id = models.UUIDField(null=True, blank=True, help_text="The pass's job.")
    error = models.TextField(null=True, blank=True, help_text="Why a failed pass stopped.")

    class Meta:
        db_table = "x_backfills"
        indexes = [models.Index("name", models.F("started_at").desc(), name="x_backfills_name_idx")]

    def __str__(self) -> str:
        return f"{self.name} [{self.status}]"


class JobRollup(models.Model):
    """What ended in one minute, per queue, job name and outcome: written by the settle
    statements in the same statement as the settle (rollup.py). ``shard`` spreads concurrent
    settlers over rows of their own, so no two workers wait on one row's lock; reads sum it."""

    id = models.BigAutoField(primary_key=True)
    minute = models.DateTimeField()
    queue = models.TextField()
    name = models.TextField()
    outcome = models.TextField()
    shard = models.IntegerField(db_default=0)
    count = models.BigIntegerField(db_default=0)
    run_seconds = models.FloatField(db_default=0.0)
    wait_seconds = models.FloatField(db_default=0.0)
    run_buckets = PgArrayField(models.BigIntegerField())
    wait_buckets = PgArrayField(models.BigIntegerField())

    class Meta:
        db_table = "x_job_rollup"
        constraints = [
            models.UniqueConstraint(
                fields=["minute", "queue", "name", "outcome", "shard"], name="x_job_rollup_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.minute:%H:%M} {self.queue}/{self.name} {self.outcome} x{self.count}"


class QueueDepth(models.Model):
    """One queue's live depth at one minute, for the overview's depth over time: sampled once a
    minute for the whole fleet by the workers' presence beat (worker/depth.py); the unique key
    is what makes a second worker's sample of the same minute write nothing."""

    id = models.BigAutoField(primary_key=True)
    minute = models.DateTimeField()
    queue = models.TextField()
    ready = models.IntegerField()
    delayed = models.IntegerField()
    running = models.IntegerField()

    class Meta:
        db_table = "x_queue_depth"
        constraints = [
            models.UniqueConstraint(fields=["minute", "queue"], name="x_queue_depth_key")
        ]

    def __str__(self) -> str:
        return f"{self.minute:%H:%M} {self.queue}"


class OperatorAction(models.Model):
    """One operator action, as the audit trail keeps it (issue 45): who (the admin's user, the
    command line's login and host, or the ``by=`` of an API call), when, the verb, the job or
    the filter it acted on, the reason given, and what it changed. Written by the operator API
    only; read-only in the admin and ``xjobs audit``; kept for ``XJOBS["AUDIT_RETENTION"]``."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    at = models.DateTimeField(db_default=Now())
    actor = models.TextField(help_text="admin:<user>, cli:<login>@<host>, or an API call's by=.")
    verb = models.TextField()
    job_id = models.TextField(null=True, blank=True, help_text="The one job acted on.")
    target = models.TextField(
        null=True, blank=True, help_text="What else was acted on: a queue, a cron, a batch."
    )
    filter = models.JSONField(
        null=True, blank=True, help_text="A bulk action's filter, its input values redacted."
    )
    reason = models.TextField(null=True, blank=True)
    matched = models.IntegerField(null=True, blank=True)
    changed = models.IntegerField(null=True, blank=True)
    skipped = models.IntegerField(null=True, blank=True)
    # a bulk action done by a background job (issue 45, the admin's "all N matching"): where
    # it is, and the counts above kept as its batches commit
    status = models.TextField(
        null=True, blank=True, help_text="queued, running, done or failed; null: done at once."
    )
    expected = models.IntegerField(null=True, blank=True, help_text="Matched when it was asked.")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(null=True, blank=True, help_text="Why its last run failed.")
    by_job = models.TextField(null=True, blank=True, help_text="The background job doing it.")

    class Meta:
        db_table = "x_operator_actions"
        verbose_name = "operator action"
        indexes = [models.Index(fields=["at"], name="x_operator_actions_at_idx")]
        # the admin shows them; nobody adds, changes or deletes one there
        default_permissions = ("view",)

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.verb}"
