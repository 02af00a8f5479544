"""Job controls an operator or a handler sets on one job (issue 29): ``expires_at`` (not started
by then: dead, stop reason ``expired``), ``snoozes`` (the bound on ``ctx.snooze``) and
``progress`` (the latest ``ctx.progress``). Each is nullable or defaulted in the database, so
adding them rewrites no row, and a job that uses none of them costs the claim nothing."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0014_queue_pause"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="expires_at",
            field=models.DateTimeField(
                blank=True,
                help_text="Not started by then: never run, dead with stop reason expired.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="progress",
            field=models.JSONField(
                blank=True,
                help_text="The latest ctx.progress() of a run: done, total, note, at.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="snoozes",
            field=models.IntegerField(
                db_default=0,
                help_text="Times a run snoozed (ctx.snooze): no attempt spent for them.",
            ),
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
                ],
                null=True,
            ),
        ),
    ]
