"""The rollup the overview reads: one row per minute × queue × job name × outcome × shard,
written by the settle statements (drivers/postgres/jobs.sql) and pruned after
``XJOBS["ROLLUP_RETENTION"]``. The unique key is what their upsert resolves on; it also serves
the reads, which filter on a window of minutes."""

import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0016_cron_controls"),
    ]

    operations = [
        migrations.CreateModel(
            name="JobRollup",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("minute", models.DateTimeField()),
                ("queue", models.TextField()),
                ("name", models.TextField()),
                ("outcome", models.TextField()),
                ("shard", models.IntegerField(db_default=0)),
                ("count", models.BigIntegerField(db_default=0)),
                ("run_seconds", models.FloatField(db_default=0.0)),
                ("wait_seconds", models.FloatField(db_default=0.0)),
                (
                    "run_buckets",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.BigIntegerField(), size=None
                    ),
                ),
                (
                    "wait_buckets",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.BigIntegerField(), size=None
                    ),
                ),
            ],
            options={
                "db_table": "x_job_rollup",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("minute", "queue", "name", "outcome", "shard"),
                        name="x_job_rollup_key",
                    )
                ],
            },
        ),
    ]
