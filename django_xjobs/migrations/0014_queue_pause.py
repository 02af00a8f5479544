"""Fleet-wide queue controls: ``x_queue_controls`` holds one row per queue an operator set.

A paused queue is one whose row has ``paused_at``; the row stays on resume, so the per-queue
settings that come later live beside the pause. Small and read once a poll by each worker,
never in a claim: a fleet with nothing paused pays nothing on its hot path.
"""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0013_worker_stopped"),
    ]

    operations = [
        migrations.CreateModel(
            name="QueueControl",
            fields=[
                ("queue", models.TextField(primary_key=True, serialize=False)),
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
                (
                    "updated_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
            ],
            options={
                "db_table": "x_queue_controls",
                "ordering": ["queue"],
            },
        ),
    ]
