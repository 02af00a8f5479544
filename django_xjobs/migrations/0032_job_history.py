"""Finished jobs leave the hot table (issue 46, HIST-01..): ``x_job_history`` holds x_jobs's
columns and ``finished_at``, partitioned by LIST on ``state`` (done, failed, dead, cancelled:
RETENTION keeps each state its own time, so each has its own partitions) and each state by
RANGE on ``finished_at``, one partition a day. The days are created ahead and dropped by the
driver (drivers/postgres/archive.py), never here.

This migration only creates empty parents: no row moves and no lock is held on x_jobs beyond
reading its columns. The finished rows already in x_jobs are moved by the same batched mover
that moves every later one, once ``XJOBS["HISTORY"]`` is on (workers, or ``xjobs partitions
--move``). A column later added to x_jobs must be added to x_job_history in the same migration
(the mover names every column of ``JobColumns``).
"""

import django.db.models.functions.datetime
from django.db import migrations, models

import django_xjobs.ids
import django_xjobs.models

HISTORY = """
CREATE TABLE x_job_history (LIKE x_jobs INCLUDING DEFAULTS, finished_at timestamptz NOT NULL)
    PARTITION BY LIST (state);
CREATE TABLE x_job_history_done PARTITION OF x_job_history FOR VALUES IN ('done')
    PARTITION BY RANGE (finished_at);
CREATE TABLE x_job_history_failed PARTITION OF x_job_history FOR VALUES IN ('failed')
    PARTITION BY RANGE (finished_at);
CREATE TABLE x_job_history_dead PARTITION OF x_job_history FOR VALUES IN ('dead')
    PARTITION BY RANGE (finished_at);
CREATE TABLE x_job_history_cancelled PARTITION OF x_job_history FOR VALUES IN ('cancelled')
    PARTITION BY RANGE (finished_at);
CREATE INDEX x_job_history_id_idx ON x_job_history (id);
CREATE INDEX x_job_history_created_idx ON x_job_history (created_at, id)
"""
HISTORY_DROP = "DROP TABLE x_job_history"


STATE = migrations.CreateModel(
    name="JobHistory",
    fields=[
        (
            "id",
            models.UUIDField(
                default=django_xjobs.ids.uuid7,
                editable=False,
                primary_key=True,
                serialize=False,
            ),
        ),
        ("name", models.TextField()),
        ("queue", models.TextField(db_default="default")),
        ("input", models.JSONField()),
        ("idempotency_key", models.TextField()),
        ("run_id", models.UUIDField(default=django_xjobs.ids.uuid7)),
        ("attempt", models.IntegerField(db_default=0)),
        ("max_attempts", models.IntegerField(db_default=3)),
        (
            "state",
            models.TextField(
                choices=[
                    ("ready", "Ready"),
                    ("delayed", "Delayed"),
                    ("running", "Running"),
                    ("suspended", "Suspended"),
                    ("done", "Done"),
                    ("failed", "Failed"),
                    ("dead", "Dead"),
                    ("cancelled", "Cancelled"),
                ],
                db_default="ready",
            ),
        ),
        ("priority", models.IntegerField(db_default=0, help_text="Higher runs first.")),
        (
            "run_at",
            models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
        ),
        ("visible_at", models.DateTimeField(blank=True, null=True)),
        ("claimed_by", models.TextField(blank=True, null=True)),
        (
            "lease_token",
            models.UUIDField(
                blank=True,
                help_text="Minted by every claim; fences every settle and heartbeat.",
                null=True,
            ),
        ),
        (
            "lease_expiries",
            models.IntegerField(
                db_default=0,
                help_text="Runs in a row whose lease lapsed (the worker died or stalled); a settle resets it.",
            ),
        ),
        (
            "lapsed_holder",
            models.TextField(
                blank=True,
                help_text="A worker whose lease lapsed while it still looked alive: whether that was a crash is judged at the next lapse, by whether its presence lapsed too.",
                null=True,
            ),
        ),
        ("last_error", models.TextField(blank=True, null=True)),
        (
            "errors",
            models.JSONField(
                db_default=models.Value([], output_field=models.JSONField()),
                help_text="The last failed attempts, oldest first: error, class path, traceback, outcome.",
            ),
        ),
        (
            "stop_reason",
            models.TextField(
                blank=True,
                choices=[
                    ("terminal", "Terminal"),
                    ("attempts-exhausted", "Attempts Exhausted"),
                    ("cancelled", "Cancelled"),
                    ("timeout", "Timeout"),
                    ("expired", "Expired"),
                    ("dependency_failed", "Dependency Failed"),
                ],
                null=True,
            ),
        ),
        ("result", models.JSONField(blank=True, null=True)),
        ("tenant_id", models.TextField(blank=True, null=True)),
        ("traceparent", models.TextField(blank=True, null=True)),
        ("enqueued_by", models.TextField(blank=True, null=True)),
        (
            "created_at",
            models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
        ),
        (
            "updated_at",
            models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
        ),
        (
            "started_at",
            models.DateTimeField(
                blank=True,
                help_text="When the first attempt was claimed; kept through retries and resumes, cleared when an operator retries the job.",
                null=True,
            ),
        ),
        (
            "last_attempted_at",
            models.DateTimeField(
                blank=True, help_text="When the latest attempt was claimed.", null=True
            ),
        ),
        (
            "attempted_by",
            models.TextField(
                blank=True,
                help_text="The worker that claimed the latest attempt (kept once it settles).",
                null=True,
            ),
        ),
        (
            "expires_at",
            models.DateTimeField(
                blank=True,
                help_text="Not started by then: never run, dead with stop reason expired.",
                null=True,
            ),
        ),
        (
            "snoozes",
            models.IntegerField(
                db_default=0,
                help_text="Times a run snoozed (ctx.snooze): no attempt spent for them.",
            ),
        ),
        (
            "progress",
            models.JSONField(
                blank=True,
                help_text="The latest ctx.progress() of a run: done, total, note, at.",
                null=True,
            ),
        ),
        (
            "limit_key",
            models.TextField(
                blank=True,
                help_text="The fleet-wide limit this run counts against (job name and rendered limit_key); null: no per-key limit.",
                null=True,
            ),
        ),
        (
            "batch_id",
            models.UUIDField(
                blank=True,
                help_text="The batch this job is a member of (x_batches): its final state is counted there in the same write that settles it.",
                null=True,
            ),
        ),
        (
            "after",
            django_xjobs.models.PgArrayField(
                base_field=models.UUIDField(),
                blank=True,
                help_text="The jobs this one waits for (using(after=...)); null: none.",
                null=True,
            ),
        ),
        (
            "dependants",
            django_xjobs.models.PgArrayField(
                base_field=models.UUIDField(),
                blank=True,
                help_text="Jobs waiting for this one: released in the same write that settles it; null (every job nobody waits for) costs its settle nothing.",
                null=True,
            ),
        ),
        (
            "waiting_on",
            models.IntegerField(
                blank=True,
                help_text="How many of its `after` jobs are not done yet; it runs at 0. Null: no dependencies.",
                null=True,
            ),
        ),
        (
            "after_failed",
            models.UUIDField(
                blank=True,
                help_text="The dependency that ended dead, failed or cancelled: this job ends dependency_failed at its claim.",
                null=True,
            ),
        ),
        (
            "run_anyway",
            models.BooleanField(
                blank=True,
                help_text="Runs once its dependencies ended, however they ended.",
                null=True,
            ),
        ),
        (
            "event_released_at",
            models.DateTimeField(
                blank=True,
                help_text="When a published event answered the step this run was parking on: its park in that attempt is due at once.",
                null=True,
            ),
        ),
        (
            "version",
            models.IntegerField(
                blank=True,
                help_text="The version of its job's code the run started under, stamped at its first claim; empty reads as 1.",
                null=True,
            ),
        ),
        (
            "parked",
            models.BooleanField(
                db_default=False,
                default=False,
                help_text="Suspended by a worker of a newer version (old_runs='park'): only a worker of its own version, or one that replays or restarts old runs, takes it.",
            ),
        ),
        ("finished_at", models.DateTimeField()),
    ],
    options={
        "verbose_name": "finished job (history)",
        "verbose_name_plural": "job history",
        "db_table": "x_job_history",
        "ordering": ["-finished_at"],
        "default_permissions": ("view",),
    },
)


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0031_operator_progress"),
    ]

    operations = [
        # the table is partitioned, which Django cannot declare: it is made here, and Django's
        # state holds the model over it (so flush and a test's teardown empty it too)
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(HISTORY, reverse_sql=HISTORY_DROP)],
            state_operations=[STATE],
        ),
    ]
