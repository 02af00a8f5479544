"""The backfill ledger records where each pass ran and how far it got.

``x_backfills`` had one row per pass since 0001; a pass now also records the environment it ran
in (``XJOBS["ENVIRONMENT"]``: only a completed pass in the same environment blocks a re-run),
the pages it handled, its job and, when it failed, why. Every column is nullable or has a
database default, so adding them rewrites no row.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0008_job_attempt_times"),
    ]

    operations = [
        migrations.AddField(
            model_name="backfill",
            name="environment",
            field=models.TextField(
                blank=True, help_text='XJOBS["ENVIRONMENT"] where the pass ran.', null=True
            ),
        ),
        migrations.AddField(
            model_name="backfill",
            name="pages",
            field=models.IntegerField(db_default=0),
        ),
        migrations.AddField(
            model_name="backfill",
            name="job_id",
            field=models.UUIDField(blank=True, help_text="The pass's job.", null=True),
        ),
        migrations.AddField(
            model_name="backfill",
            name="error",
            field=models.TextField(blank=True, help_text="Why a failed pass stopped.", null=True),
        ),
    ]
