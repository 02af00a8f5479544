"""A publish releases the runs waiting for it (issue 43): a waiting step keeps the ``match``
fields and the ``any_tenant`` choice it waits with, which the publish matches it by, and two
partial indexes let the publish find its waiters by event name (waiting steps only) and their
runs by run id (suspended runs only), so an ordinary job writes no entry in either.

A step already waiting when this migration runs gets its match from the output it was written
with (``output.match``, kept for ``why``); its ``any_tenant`` is unknown, so it is released only
by its own tenant's events, and finds another tenant's at its next look (``event_poll``).

On a large table the index builds block writes while they read; run this migration in a quiet
moment, or create the two indexes beforehand with ``CREATE INDEX CONCURRENTLY`` under the same
definitions and fake the migration.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0025_overview"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobstep",
            name="any_tenant",
            field=models.BooleanField(
                blank=True,
                help_text="A waiting step that takes an event of any tenant, not only its run's.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="jobstep",
            name="match",
            field=models.JSONField(
                blank=True,
                help_text="A waiting step's match: the fields an event's data must hold to "
                "release it.",
                null=True,
            ),
        ),
        migrations.RunSQL(
            "UPDATE x_job_steps SET match = output -> 'match' "
            "WHERE status = 'waiting' AND jsonb_typeof(output -> 'match') = 'object'",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("state", "suspended")),
                fields=["run_id"],
                name="x_jobs_suspended_run_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="jobstep",
            index=models.Index(
                condition=models.Q(("status", "waiting")),
                fields=["event"],
                name="x_job_steps_waiting_idx",
            ),
        ),
    ]
