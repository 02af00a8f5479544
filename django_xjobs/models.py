"""The tables (SPEC §14 + DESIGN §4). The hot path writes them with raw SQL in
``drivers/postgres/jobs.sql``; the ORM serves the admin, reads and tests."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Q, Value
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from .ids import uuid7
from .states import WAITING_STATES, shown_state


class PgArrayField(models.Field):  # type: ignore[type-arg]
    """A PostgreSQL array of one element type (``bigint[]``, ``timestamptz[]``), read and written
    as a Python list by psycopg itself.

    Not ``django.contrib.postgres``'s ``ArrayField``: since Django 6.1 that one fails the system
    checks (postgres.E005) unless ``django.contrib.postgres`` is in ``INSTALLED_APPS``, and this app
    asks its users for one entry there, not two. The column is the same one, so the migration
    that swapped them changes nothing in the database. Served by raw SQL and read-only pages:
    no lookups, no form field beyond the default."""

    def __init__(self, base_field: models.Field, **kwargs: Any) -> None:  # type: ignore[type-arg]
        self.base_field = base_field
        super().__init__(**kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs["base_field"] = self.base_field.clone()
        return name, path, args, kwargs

    def db_type(self, connection: Any) -> str:
        return f"{self.base_field.db_type(connection)}[]"

    def get_prep_value(self, value: Any) -> Any:
        return None if value is None else list(value)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return value


class StoredJSONField(models.JSONField):
    """A ``JSONField`` whose read of a value this process cannot decode (nested past the
    recursion limit: written by another version or by SQL) gives a short marker instead of
    failing the whole query, so the admin and ``inspect_job`` still show the row (issue 24).
    Stored exactly as a ``JSONField``; migrations see one."""

    UNDECODABLE = "(undecodable)"

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        try:
            return super().from_db_value(value, expression, connection)
        except RecursionError:
            return {self.UNDECODABLE: "the stored value is nested too deeply to decode"}

    def deconstruct(self) -> Any:
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


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
        ]

    def __str__(self) -> str:
        # the one state word every screen shows: a waiting row is ready or delayed by its run_at
        # (the page title and the badge agree, issue 42)
        return f"{self.name} [{shown_state(self.state, self.run_at, timezone.now())}] {self.id}"


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


class JobEvent(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    name = models.TextField()
    payload = models.JSONField()
    correlation_key = models.TextField(null=True, blank=True)
    published_at = models.DateTimeField(db_default=Now())
    expires_at = models.DateTimeField()
    # a waiter matches only events of its own run's tenant unless it opts into any tenant
    tenant_id = models.TextField(null=True, blank=True)

    class Meta:
        db_table = "x_job_events"
        indexes = [models.Index(fields=["name", "published_at"], name="x_job_events_lookup_idx")]

    def __str__(self) -> str:
        return self.name


class SchedulerState(models.Model):
    task_name = models.TextField(primary_key=True)
    last_fired_at = models.DateTimeField()
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "x_scheduler_state"

    def __str__(self) -> str:
        return self.task_name


class SchedulerLeader(models.Model):
    lock_key = models.TextField(primary_key=True)
    holder = models.TextField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "x_scheduler_leader"

    def __str__(self) -> str:
        return f"{self.lock_key}: {self.holder}"


class JobLease(models.Model):
    """A fleet concurrency slot (SPEC §14 x_job_leases); unique on (lease_key, slot)."""

    id = models.BigAutoField(primary_key=True)
    lease_key = models.TextField()
    slot = models.IntegerField()
    holder = models.TextField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "x_job_leases"
        constraints = [
            models.UniqueConstraint(fields=["lease_key", "slot"], name="x_job_leases_key_slot_key")
        ]
        indexes = [models.Index(fields=["expires_at"], name="x_job_leases_expiry_idx")]

    def __str__(self) -> str:
        return f"{self.lease_key}#{self.slot}"


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


class Worker(models.Model):
    """A worker process's presence, renewed with its heartbeat on the database clock."""

    id = models.TextField(primary_key=True)
    host = models.TextField()
    pid = models.IntegerField()
    queues = models.JSONField(default=list)
    started_at = models.DateTimeField(db_default=Now())
    last_seen = models.DateTimeField(db_default=Now())
    #: the start of the current run of beats with no gap a lease could have lapsed in
    seen_since = models.DateTimeField(db_default=Now())
    expires_at = models.DateTimeField(help_text="Past this without a beat the worker has lapsed.")
    in_flight = models.IntegerField(db_default=0)
    #: set when the process exited past --shutdown-timeout with runs still in flight: its row
    #: says so instead of lapsing, and those runs' lapses are judged as its exit
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "x_workers"
        ordering = ["started_at"]

    def __str__(self) -> str:
        return f"{self.id} ({self.host}:{self.pid})"


class QueueControl(models.Model):
    """An operator's standing orders for one queue, fleet-wide: stored, so a restart or a deploy
    keeps them. Workers read the paused set when told it changed and once a poll, never in a
    claim; a worker never writes here (stopping, crashing or draining pauses nothing)."""

    queue = models.TextField(primary_key=True)
    paused_at = models.DateTimeField(null=True, blank=True, help_text="Paused since; null: not.")
    paused_by = models.TextField(null=True, blank=True, help_text="Who paused it, when known.")
    concurrency = models.IntegerField(
        null=True, blank=True, help_text="Runs at most this many at once, fleet-wide; null: no cap."
    )
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "x_queue_controls"
        ordering = ["queue"]

    def __str__(self) -> str:
        return f"{self.queue} ({'paused' if self.paused_at else 'running'})"


def state_filter(state: str) -> Q:
    """The rows ``shown_state`` calls ``state``, on the database clock: a waiting row is ready
    once due and delayed until then, whichever it is stored as (DESIGN Q-05, issue 23)."""
    if state == "ready":
        return Q(state__in=WAITING_STATES, run_at__lte=Now())
    if state == "delayed":
        return Q(state__in=WAITING_STATES, run_at__gt=Now())
    return Q(state=state)


class CronControl(models.Model):
    """An operator's standing orders for one cron: stored, so a restart or a deploy keeps them.
    The scheduler's leader reads the paused set once a round; a paused cron's watermark stays
    where it was, so on resume its missed occurrences follow its ``catch_up`` rule."""

    cron = models.TextField(primary_key=True)
    paused_at = models.DateTimeField(null=True, blank=True, help_text="Paused since; null: not.")
    paused_by = models.TextField(null=True, blank=True, help_text="Who paused it, when known.")
    #: the key of the latest "run now": a second request with the same key (a double click)
    #: finds it here and enqueues nothing
    run_key = models.TextField(null=True, blank=True)
    run_at = models.DateTimeField(null=True, blank=True, help_text="The latest run now.")
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "x_cron_controls"
        ordering = ["cron"]

    def __str__(self) -> str:
        return f"{self.cron} ({'paused' if self.paused_at else 'running'})"


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


class LimitKey(models.Model):
    """One fleet-wide limit key's state (limits/worker.py): locked by the claim that
    takes its runs, so two workers never count its budget at once. Its running count is not
    stored: it is the key's running rows, so a crashed worker's slot frees when its lease lapses
    and the run is taken again or ends."""

    key = models.TextField(primary_key=True)
    starts = PgArrayField(
        models.DateTimeField(),
        null=True,
        blank=True,
        help_text="Start times still inside the key's rate window, oldest first; null: none.",
    )
    paused_until = models.DateTimeField(
        null=True, blank=True, help_text="No run of the key starts before this (RateLimited)."
    )
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "x_limit_keys"
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key


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
