"""A publish releases the runs waiting for it (issue 43). A waiting step keeps what the publish
matches it by (``match``, ``any_tenant``) and its job's id (``job_id``), and a partial index
finds the waiting steps of an event name, so an ordinary step writes no entry in it. A run the
publish answers while it is still running (between its waiting step's write and its park)
gets ``event_released_at``, and its park is then due at once.

A step already waiting when this migration runs has none of these (a migration only adds:
SPEC DB-01): a publish does not release it, and it finds its event at its next look
(``event_poll``), as before; that look's write stores them.

On a large table the index build blocks writes to ``x_job_steps`` while it reads; run this
migration in a quiet moment, or create ``x_job_steps_waiting_idx`` beforehand with ``CREATE
INDEX CONCURRENTLY`` under the same definition and fake the migration.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0025_overview"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="event_released_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When a published event answered the step this run was parking on: "
                "its park in that attempt is due at once.",
                null=True,
            ),
        ),
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
            name="job_id",
            field=models.UUIDField(
                blank=True,
                help_text="A waiting step's job, which a publish that answers the step releases.",
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
            model_name="jobstep",
            index=models.Index(
                condition=models.Q(("status", "waiting")),
                fields=["event"],
                name="x_job_steps_waiting_idx",
            ),
        ),
    ]
