"""Batches (issue 32): ``x_batches`` counts its members' final states, and ``x_jobs.batch_id``
names a member's batch. A job with no batch carries a null and costs its settle nothing more:
the settle's batch step reads only the rows it settled, and finds no batch to count."""

import django.db.models.functions.datetime
import django_xjobs.ids
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0018_limits"),
    ]

    operations = [
        migrations.CreateModel(
            name="JobBatch",
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
                ("input", models.JSONField(default=dict)),
                (
                    "callbacks",
                    models.JSONField(
                        default=list,
                        help_text="The jobs to insert when the last member ends: on, name, queue, id, run_id, max_attempts, priority, tenant_id.",
                    ),
                ),
                ("total", models.IntegerField(db_default=0)),
                (
                    "pending",
                    models.IntegerField(
                        db_default=0, help_text="Members not yet in a final state."
                    ),
                ),
                ("done", models.IntegerField(db_default=0)),
                ("dead", models.IntegerField(db_default=0)),
                ("failed", models.IntegerField(db_default=0)),
                ("cancelled", models.IntegerField(db_default=0)),
                (
                    "created_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
                (
                    "closed_at",
                    models.DateTimeField(blank=True, help_text="No member joins after.", null=True),
                ),
                (
                    "completed_at",
                    models.DateTimeField(
                        blank=True,
                        help_text="When its last member ended and its callbacks were queued.",
                        null=True,
                    ),
                ),
            ],
            options={
                "verbose_name_plural": "job batches",
                "db_table": "x_batches",
                "ordering": ["-created_at"],
            },
        ),
        migrations.AddField(
            model_name="job",
            name="batch_id",
            field=models.UUIDField(
                blank=True,
                help_text="The batch this job is a member of (x_batches): its final state is counted there in the same write that settles it.",
                null=True,
            ),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("batch_id__isnull", False)),
                fields=["batch_id"],
                name="x_jobs_batch_idx",
            ),
        ),
    ]
