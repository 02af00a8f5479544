"""Cron controls: ``x_cron_controls`` holds one row per cron an operator paused or resumed.

A paused cron is one whose row has ``paused_at``; read by the scheduler's leader once a round,
never by a worker.
"""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0015_job_controls"),
    ]

    operations = [
        migrations.CreateModel(
            name="CronControl",
            fields=[
                ("cron", models.TextField(primary_key=True, serialize=False)),
                (
                    "paused_at",
                    models.DateTimeField(
                        blank=True, help_text="Paused since; null: not.", null=True
                    ),
                ),
                (
                    "paused_by",
                    models.TextField(blank=True, help_text="Who paused it, when known.", null=True),
                ),
                ("run_key", models.TextField(blank=True, null=True)),
                (
                    "run_at",
                    models.DateTimeField(blank=True, help_text="The latest run now.", null=True),
                ),
                (
                    "updated_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
            ],
            options={
                "db_table": "x_cron_controls",
                "ordering": ["cron"],
            },
        ),
    ]
