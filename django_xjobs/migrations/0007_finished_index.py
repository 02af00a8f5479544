"""The age index covers finished jobs only.

``x_jobs_state_updated_idx`` indexed every row by (state, updated_at), so each job wrote three
entries into it on its way through (enqueued, claimed, settled), each one a page write and WAL,
while the only reads by age are retention's and ``xjobs prune``'s, which look at finished rows
alone. Indexed only while finished, a job writes one entry, when it settles: an enqueue touches
three indexes instead of four, a claim two instead of three. The prune statement repeats the
index's predicate so that even a generic prepared plan can use it.

On a large table the index build reads the whole table under a lock that blocks writes; run
this migration in a quiet moment, or create ``x_jobs_finished_idx`` beforehand with
``CREATE INDEX CONCURRENTLY`` under the same definition and fake the migration.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0006_claim_plan"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="job",
            name="x_jobs_state_updated_idx",
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("state__in", ["done", "failed", "dead", "cancelled"])),
                fields=["state", "updated_at"],
                name="x_jobs_finished_idx",
            ),
        ),
    ]
