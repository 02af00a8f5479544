"""A job and what its runs leave: the job's row (SPEC §14 x_jobs) and its states, its step
records, the events steps wait for, the batches jobs belong to, and the overview's proxy."""

from __future__ import annotations

from django.db import models
from django.db.models import Q, Value
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from ..ids import uuid7
from ..states import WAITING_STATES, shown_state
from .fields import GinIndex, PgArrayField, StoredJSONField


class JobState(models.TextChoices):
    READY = "ready"
    DELAYED = "delayed"
    RUNNING = "running"
    SUSPENDED = "suspended"
    DONE = "done"
    FAILED = "failed"
    DEAD = "dead"
    CANCELLED = "cancelled"


class StopReason(models.TextChoices):
    TERMINAL = "terminal"
    ATTEMPTS_EXHAUSTED = "attempts-exhausted"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    #: not started by its ``expires_at``: never run (issue 29)
    EXPIRED = "expired"
    #: a job it waited for (``using(after=...)``) ended dead, failed or cancelled: never run
    DEPENDENCY_FAILED = "dependency_failed"


LIVE = [JobState.READY, JobState.DELAYED, JobState.RUNNING, JobState.SUSPENDED]
CLAIMABLE = [JobState.READY, JobState.DELAYED, JobState.SUSPENDED]
# The claim and lease indexes are defined by the states a row is NOT in (claimable = none of
# the others; running = none of the others). Spelled out positively, the claim's own filter
# would also prove the live-key index's predicate, and with statistics taken while no row was
# claimable the planner reads that whole index and sorts it instead of walking the claim index
# in order (30 ms a claim on a 30k backlog). The state check makes both spellings the same set.
NOT_CLAIMABLE = [s for s in JobState if s not in CLAIMABLE]
NOT_RUNNING = [s for s in JobState if s != JobState.RUNNING]
#: the states retention prunes from, by age (SPEC RET-*): the only rows whose age is looked up
FINISHED = [s for s in JobState if s not in LIVE]


class Job(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    name = models.TextField()
    queue = models.TextField(db_default="default")
    input = StoredJSONField()
    idempotency_key = models.TextField()
    run_id = models.UUIDField(default=uuid7)
    attempt = models.IntegerField(db_default=0)
    max_attempts = models.IntegerField(db_default=3)
    state = models.TextField(choices=JobState.choices, db_default=JobState.READY)
    priority = models.IntegerField(db_default=0, help_text="Higher runs first.")
    run_at = models.DateTimeField(db_default=Now())
    visible_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.TextField(null=True, blank=True)
    lease_token = models.UUIDField(
        null=True, blank=True, help_text="Minted by every claim; fences every settle and heartbeat."
    )
    lease_expiries = models.IntegerField(
        db_default=0,
        help_text="Runs in a row whose lease lapsed (the worker died or stalled); a settle resets it.",
    )
    lapsed_holder = models.TextField(
        null=True,
        blank=True,
        help_text="A worker whose lease lapsed while it still looked alive: whether that was a "
        "crash is judged at the next lapse, by whether its presence lapsed too.",
    )
    last_error = models.TextField(null=True, blank=True)
    errors = models.JSONField(
        db_default=Value([], output_field=models.JSONField()),
        help_text="The last failed attempts, oldest first: error, class path, traceback, outcome.",
    )
    stop_reason = models.TextField(choices=StopReason.choices, null=True, blank=True)
    result = StoredJSONField(null=True, blank=True)
    tenant_id = models.TextField(null=True, blank=True)
    traceparent = models.TextField(null=True, blank=True)
    enqueued_by = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())
    started_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the first attempt was claimed; kept through retries and resumes, "
        "cleared when an operator retries the job.",
    )
    last_attempted_at = models.DateTimeField(
        null=True, blank=True, help_text="When the latest attempt was claimed."
    )
    attempted_by = models.TextField(
        null=True,
        blank=True,
        help_text="The worker that claimed the latest attempt (kept once it settles).",
    )
    expires_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Not started by then: never run, dead with stop reason expired.",
    )
    snoozes = models.IntegerField(
        db_default=0, help_text="Times a run snoozed (ctx.snooze): no attempt spent for them."
    )
    progress = models.JSONField(
        null=True,
        blank=True,
        help_text="The latest ctx.progress() of a run: done, total, note, at.",
    )
    limit_key = models.TextField(
        null=True,
        blank=True,
        help_text="The fleet-wide limit this run counts against (job name and rendered "
        "limit_key); null: no per-key limit.",
    )
    batch_id = models.UUIDField(
        null=True,
        blank=True,
        help_text="The batch this job is a member of (x_batches): its final state is counted "
        "there in the same write that settles it.",
    )
    after = PgArrayField(
        models.UUIDField(),
        null=True,
        blank=True,
        help_text="The jobs this one waits for (using(after=...)); null: none.",
    )
    dependants = PgArrayField(
        models.UUIDField(),
        null=True,
        blank=True,
        help_text="Jobs waiting for this one: released in the same write that settles it; "
        "null (every job nobody waits for) costs its settle nothing.",
    )
    waiting_on = models.IntegerField(
        null=True,
        blank=True,
        help_text="How many of its `after` jobs are not done yet; it runs at 0. Null: no "
        "dependencies.",
    )
    after_failed = models.UUIDField(
        null=True,
        blank=True,
        help_text="The dependency that ended dead, failed or cancelled: this job ends "
        "dependency_failed at its claim.",
    )
    run_anyway = models.BooleanField(
        null=True,
        blank=True,
        help_text="Runs once its dependencies ended, however they ended.",
    )
    event_released_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a published event answered the step this run was parking on: its park "
        "in that attempt is due at once.",
    )
    version = models.IntegerField(
        null=True,
        blank=True,
        help_text="The version of its job's code the run started under, stamped at its first "
        "claim; empty reads as 1.",
    )
    parked = models.BooleanField(
        db_default=False,
        default=False,
        help_text="Suspended by a worker of a newer version (old_runs='park'): only a worker of "
        "its own version, or one that replays or restarts old runs, takes it.",
    )

    class Meta:
        db_table = "x_jobs"
        ordering = ["-created_at"]
        # view_job shows a payload's shape only; this shows its values (admin/permissions.py)
        permissions = [
            ("view_job_payload", "Can view job inputs, results, step outputs and event data")
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=JobState.values), name="x_jobs_state_check"
            ),
            # One live row per (name, tenant, key): SPEC ENQ-06..10, SE-01, SE-02.
            models.UniqueConstraint(
                "name",
                Coalesce("tenant_id", Value("")),
                "idempotency_key",
                condition=Q(state__in=LIVE),
                name="x_jobs_name_tenant_idempotency_live_idx",
            ),
        ]
        indexes = [
            models.Index(
                "queue",
                models.F("priority").desc(),
                "run_at",
                "id",  # the claim's full ORDER BY, so equal run_at rows need no sort
                condition=~Q(state__in=NOT_CLAIMABLE),
                name="x_jobs_claim_idx",
            ),
            models.Index(
                fields=["visible_at"], condition=~Q(state__in=NOT_RUNNING), name="x_jobs_lease_idx"
            ),
            models.Index(
                fields=["state", "updated_at"],
                condition=Q(state__in=FINISHED),
                name="x_jobs_finished_idx",
            ),
            # Limited runs only (limits/worker.py): the keys with work waiting, and each
            # key's waiting rows in claim order; a job with no limit adds no entry here.
            models.Index(
                "queue",
                "limit_key",
                models.F("priority").desc(),
                "run_at",
                "id",
                condition=~Q(state__in=NOT_CLAIMABLE) & Q(limit_key__isnull=False),
                name="x_jobs_limit_wait_idx",
            ),
            # A key's running count, read under the key's lock by the limited claim.
            models.Index(
                fields=["limit_key"],
                condition=~Q(state__in=NOT_RUNNING) & Q(limit_key__isnull=False),
                name="x_jobs_limit_run_idx",
            ),
            models.Index(
                fields=["batch_id"],
                condition=Q(batch_id__isnull=False),
                name="x_jobs_batch_idx",
            ),
            # Jobs found by what they carry (issue 45): ``input @> {...}`` in the admin's list,
            # ``xjobs ls --input`` and the bulk verbs' filter. jsonb_path_ops: a hash of each
            # path to a value, smaller than jsonb_ops's keys and values, and containment is the
            # one operator asked of it (docs/howto/incidents.md, bench/README.md).
            GinIndex(fields=["input"], opclasses=["jsonb_path_ops"], name="x_jobs_input_idx"),
        ]

    def __str__(self) -> str:
        # the one state word every screen shows: a waiting row is ready or delayed by its run_at
        # (the page title and the badge agree, issue 42)
        return f"{self.name} [{shown_state(self.state, self.run_at, timezone.now())}] {self.id}"


def state_filter(state: str) -> Q:
    """The rows ``shown_state`` calls ``state``, on the database clock: a waiting row is ready
    once due and delayed until then, whichever it is stored as (DESIGN Q-05, issue 23)."""
    if state == "ready":
        return Q(state__in=WAITING_STATES, run_at__lte=Now())
    if state == "delayed":
        return Q(state__in=WAITING_STATES, run_at__gt=Now())
    return Q(state=state)


class JobStep(models.Model):
    """A step record of a run (SPEC §14 x_job_steps); a surrogate key keeps the admin simple."""

    id = models.BigAutoField(primary_key=True)
    run_id = models.UUIDField()
    name = models.TextField()
    status = models.TextField()
    output = StoredJSONField(null=True, blank=True)
    started_at = models.DateTimeField(db_default=Now())
    completed_at = models.DateTimeField(null=True, blank=True)
    wake_at = models.DateTimeField(null=True, blank=True)
    event = models.TextField(null=True, blank=True)
    correlation_key = models.TextField(null=True, blank=True)
    match = models.JSONField(
        null=True,
        blank=True,
        help_text="A waiting step's match: the fields an event's data must hold to release it.",
    )
    any_tenant = models.BooleanField(
        null=True,
        blank=True,
        help_text="A waiting step that takes an event of any tenant, not only its run's.",
    )
    job_id = models.UUIDField(
        null=True,
        blank=True,
        help_text="A waiting step's job, which a publish that answers the step releases.",
    )
    error = models.TextField(null=True, blank=True)
    attempts = models.IntegerField(db_default=1)
    position = models.IntegerField(
        null=True,
        blank=True,
        help_text="The step's place in the run, in the order it was first reached (0, 1, 2...).",
    )

    class Meta:
        db_table = "x_job_steps"
        constraints = [
            models.UniqueConstraint(fields=["run_id", "name"], name="x_job_steps_run_name_key")
        ]
        # the waiters a publish releases, by event name: only waiting steps have an entry
        indexes = [
            models.Index(
                fields=["event"],
                condition=Q(status="waiting"),
                name="x_job_steps_waiting_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} [{self.status}]"


class JobEvent(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    name = models.TextField()
    payload = models.JSONField()
    correlation_key = models.TextField(null=True, blank=True)
    published_at = models.DateTimeField(db_default=Now())
    expires_at = models.DateTimeField()
    # a waiter matches only events of its own run's tenant unless it opts into any tenant
    tenant_id = models.TextField(null=True, blank=True)
    # what the publish did, counted in its own transaction (issue 43): the waiting runs it
    # released, the jobs its ``on_event`` declarations started, the live runs its ``cancel_on``
    # declarations cancelled, and each declaration it could not start, with the coded error
    released = models.IntegerField(
        default=0, db_default=0, help_text="Waiting runs this event released when published."
    )
    started = models.IntegerField(
        default=0, db_default=0, help_text="Jobs started by declarations with on_event."
    )
    cancelled = models.IntegerField(
        default=0, db_default=0, help_text="Live runs cancelled by declarations with cancel_on."
    )
    refused = models.JSONField(
        default=list,
        db_default=models.Value([], models.JSONField()),
        blank=True,
        help_text="Each on_event declaration this event could not start: "
        '[{"job": name, "code": X_..., "message": ...}].',
    )

    class Meta:
        db_table = "x_job_events"
        indexes = [models.Index(fields=["name", "published_at"], name="x_job_events_lookup_idx")]

    def __str__(self) -> str:
        return self.name


class JobBatch(models.Model):
    """A batch (``django_xjobs.Batch``, issue 32): its members' final states are counted here in
    the transaction that settles each one, and the member that brings ``pending`` to 0 after
    the batch is closed inserts its callbacks in that same statement (docs/concepts/workflows)."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    input = models.JSONField(default=dict)
    callbacks = models.JSONField(
        default=list,
        help_text="The jobs to insert when the last member ends: on, name, queue, id, run_id, "
        "max_attempts, priority, tenant_id.",
    )
    total = models.IntegerField(db_default=0)
    pending = models.IntegerField(db_default=0, help_text="Members not yet in a final state.")
    done = models.IntegerField(db_default=0)
    dead = models.IntegerField(db_default=0)
    failed = models.IntegerField(db_default=0)
    cancelled = models.IntegerField(db_default=0)
    created_at = models.DateTimeField(db_default=Now())
    closed_at = models.DateTimeField(null=True, blank=True, help_text="No member joins after.")
    completed_at = models.DateTimeField(
        null=True, blank=True, help_text="When its last member ended and its callbacks were queued."
    )

    class Meta:
        db_table = "x_batches"
        ordering = ["-created_at"]
        verbose_name_plural = "job batches"

    def __str__(self) -> str:
        return f"batch {self.id}"


class Overview(Job):
    """The fleet overview's entry on the admin index (issue 42): a proxy of ``Job`` with no table
    of its own, whose admin list is the overview page (admin/overview.py)."""

    class Meta:
        proxy = True
        verbose_name = "overview"
        verbose_name_plural = "overview"
        # seen with the view permission on jobs (admin/overview.py): no permissions of its own
        default_permissions = ()
