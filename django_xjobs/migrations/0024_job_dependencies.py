"""Dependencies (issue 32): ``x_jobs.after`` names the jobs a job waits for, ``waiting_on``
counts those not done yet, ``dependants`` (on the job waited for) names who waits, and the
settle that ends a dependency releases its dependants in the same statement. All nullable and
null on every job without dependencies: adding them rewrites no row, and a settle of a job
nobody waits for reads nothing more. The outbox carries ``after`` so a staged enqueue waits
as a direct one does."""

import django_xjobs.models
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0023_outbox_job_controls"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="after",
            field=django_xjobs.models.PgArrayField(
                base_field=models.UUIDField(),
                blank=True,
                help_text="The jobs this one waits for (using(after=...)); null: none.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="after_failed",
            field=models.UUIDField(
                blank=True,
                help_text="The dependency that ended dead, failed or cancelled: this job ends dependency_failed at its claim.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="dependants",
            field=django_xjobs.models.PgArrayField(
                base_field=models.UUIDField(),
                blank=True,
                help_text="Jobs waiting for this one: released in the same write that settles it; null (every job nobody waits for) costs its settle nothing.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="run_anyway",
            field=models.BooleanField(
                blank=True,
                help_text="Runs once its dependencies ended, however they ended.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="waiting_on",
            field=models.IntegerField(
                blank=True,
                help_text="How many of its `after` jobs are not done yet; it runs at 0. Null: no dependencies.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="outboxentry",
            name="after",
            field=django_xjobs.models.PgArrayField(
                base_field=models.UUIDField(), blank=True, null=True
            ),
        ),
        migrations.AddField(
            model_name="outboxentry",
            name="run_anyway",
            field=models.BooleanField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="job",
            name="stop_reason",
            field=models.TextField(
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
    ]
