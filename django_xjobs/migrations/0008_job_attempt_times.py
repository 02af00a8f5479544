"""When a job's first attempt and its latest attempt were claimed, and by which worker.

``started_at`` is set by the claim that takes a job's first attempt and kept through retries,
resumes and lapsed leases; ``last_attempted_at`` and ``attempted_by`` are set by every claim
(``claimed_by`` is cleared when the run settles; ``attempted_by`` is kept). An operator's retry
starts the job over and clears all three. The ``django.tasks`` backend answers
``TaskResult.started_at``, ``last_attempted_at`` and ``worker_ids`` from them, and the admin
shows them.

The columns are nullable with no default, so adding them changes only the catalog: no row is
rewritten and the lock that blocks writes is held for a moment, however large ``x_jobs`` is.
Rows claimed before this migration keep NULL until their next claim.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0007_finished_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="started_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When the first attempt was claimed; kept through retries and "
                "resumes, cleared when an operator retries the job.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="last_attempted_at",
            field=models.DateTimeField(
                blank=True, help_text="When the latest attempt was claimed.", null=True
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="attempted_by",
            field=models.TextField(
                blank=True,
                help_text="The worker that claimed the latest attempt (kept once it settles).",
                null=True,
            ),
        ),
    ]
