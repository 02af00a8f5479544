"""Queue depth over time, for the overview: one row per minute and queue, sampled once a minute
for the fleet (worker/depth.py) and pruned after ``XJOBS["ROLLUP_RETENTION"]`` like the rollup.
The unique key is what the sample's ``ON CONFLICT DO NOTHING`` resolves on; it also serves the
reads, which filter on a window of minutes."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0021_pg_array_field"),
    ]

    operations = [
        migrations.CreateModel(
            name="QueueDepth",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("minute", models.DateTimeField()),
                ("queue", models.TextField()),
                ("ready", models.IntegerField()),
                ("delayed", models.IntegerField()),
                ("running", models.IntegerField()),
            ],
            options={
                "db_table": "x_queue_depth",
                "constraints": [
                    models.UniqueConstraint(fields=("minute", "queue"), name="x_queue_depth_key")
                ],
            },
        ),
    ]
