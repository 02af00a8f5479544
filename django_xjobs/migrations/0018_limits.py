"""Fleet-wide limits decided in the claim (worker/claim_limits.py).

A run of a job that declares ``limit_key`` or ``rate_limit`` carries its key in ``x_jobs.limit_key``;
``x_limit_keys`` holds each key's rate window and pause, locked by the claim that takes its runs;
``x_queue_controls.concurrency`` is an operator's runtime cap on a queue. Every new column is
nullable with no default, so adding it rewrites nothing; the two indexes hold limited rows only,
so a table of unlimited jobs builds them empty.
"""

import django.contrib.postgres.fields
import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0017_rollup"),
    ]

    operations = [
        migrations.CreateModel(
            name="LimitKey",
            fields=[
                ("key", models.TextField(primary_key=True, serialize=False)),
                (
                    "starts",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.DateTimeField(),
                        blank=True,
                        help_text="Start times still inside the key's rate window, oldest first; null: none.",
                        null=True,
                        size=None,
                    ),
                ),
                (
                    "paused_until",
                    models.DateTimeField(
                        blank=True,
                        help_text="No run of the key starts before this (RateLimited).",
                        null=True,
                    ),
                ),
                (
                    "updated_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
            ],
            options={
                "db_table": "x_limit_keys",
                "ordering": ["key"],
            },
        ),
        migrations.AddField(
            model_name="job",
            name="limit_key",
            field=models.TextField(
                blank=True,
                help_text="The fleet-wide limit this run counts against (job name and rendered limit_key); null: no per-key limit.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="queuecontrol",
            name="concurrency",
            field=models.IntegerField(
                blank=True,
                help_text="Runs at most this many at once, fleet-wide; null: no cap.",
                null=True,
            ),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                models.F("queue"),
                models.F("limit_key"),
                models.OrderBy(models.F("priority"), descending=True),
                models.F("run_at"),
                models.F("id"),
                condition=models.Q(
                    models.Q(
                        ("state__in", ["running", "done", "failed", "dead", "cancelled"]),
                        _negated=True,
                    ),
                    ("limit_key__isnull", False),
                ),
                name="x_jobs_limit_wait_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(
                    models.Q(
                        (
                            "state__in",
                            [
                                "ready",
                                "delayed",
                                "suspended",
                                "done",
                                "failed",
                                "dead",
                                "cancelled",
                            ],
                        ),
                        _negated=True,
                    ),
                    ("limit_key__isnull", False),
                ),
                fields=["limit_key"],
                name="x_jobs_limit_run_idx",
            ),
        ),
    ]
