"""A publish releases the runs waiting for it (issue 43): a waiting step keeps the ``match``
fields and the ``any_tenant`` choice it waits with, which the publish matches it by, and two
partial indexes let the publish find its waiters by event name (waiting steps only) and their
runs by run id (suspended runs only), so an ordinary job writes no entry in either.

A step already waiting when this migration runs has neither (a migration only adds: SPEC
DB-01): any event of its name and its run's tenant releases it, and the run, finding none that
matches, parks again and stores them then. One that takes any tenant's event finds another
tenant's at its next look (``event_poll``), as before.

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
