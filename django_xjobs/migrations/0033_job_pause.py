"""Operators' pauses of a job name or of a limit key until resumed (issue 45): ``x_job_controls``
holds one row per job or key an operator paused with ``pause_jobs``.

Small and read once a poll by each worker, never in a claim: the claim is told the paused names
and keys as a parameter, so a fleet with nothing paused runs the claim it ran before (an empty
array, tested per row at no measurable cost). A key's pause with an end stays in its
``x_limit_keys`` row, the pause a ``RateLimited`` takes.
"""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0032_job_history"),
    ]

    operations = [
        migrations.CreateModel(
            name="JobControl",
            fields=[
                ("target", models.TextField(primary_key=True, serialize=False)),
                ("name", models.TextField(help_text="The job paused.")),
                (
                    "limit_key",
                    models.TextField(
                        blank=True,
                        help_text="Its rendered limit key paused; null: the whole job.",
                        null=True,
                    ),
                ),
                (
                    "paused_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        help_text="Paused since.",
                    ),
                ),
                (
                    "paused_by",
                    models.TextField(blank=True, help_text="Who paused it, when known.", null=True),
                ),
                (
                    "paused_until",
                    models.DateTimeField(
                        blank=True,
                        help_text="The pause ends by itself then (pause_jobs(until=)); null: "
                        "until resumed.",
                        null=True,
                    ),
                ),
                (
                    "updated_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
            ],
            options={
                "db_table": "x_job_controls",
                "ordering": ["target"],
            },
        ),
    ]
