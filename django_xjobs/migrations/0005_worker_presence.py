import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0004_step_position"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="lapsed_holder",
            field=models.TextField(
                blank=True,
                help_text="A worker whose lease lapsed while it still looked alive: whether that was a crash is judged at the next lapse, by whether its presence lapsed too.",
                null=True,
            ),
        ),
        migrations.CreateModel(
            name="Worker",
            fields=[
                ("id", models.TextField(primary_key=True, serialize=False)),
                ("host", models.TextField()),
                ("pid", models.IntegerField()),
                ("queues", models.JSONField(default=list)),
                (
                    "started_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
                (
                    "last_seen",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
                (
                    "seen_since",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
                (
                    "expires_at",
                    models.DateTimeField(
                        help_text="Past this without a beat the worker has lapsed."
                    ),
                ),
                ("in_flight", models.IntegerField(db_default=0)),
            ],
            options={
                "db_table": "x_workers",
                "ordering": ["started_at"],
            },
        ),
    ]
