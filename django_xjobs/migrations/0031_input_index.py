"""Jobs found by what they carry (issue 45): a GIN index on ``x_jobs.input`` for ``input @>``
containment, the filter of the admin's job list, ``xjobs ls --input`` and the bulk verbs.

Built ``CONCURRENTLY`` (a non-atomic migration): a table of millions of rows goes on taking
enqueues, claims and settles while it is built, where a plain ``CREATE INDEX`` would hold off
every write until it is done (docs/howto/incidents.md says how long it took on 10 million rows).
A build that fails (it was interrupted, or the server stopped) leaves an invalid index behind:
``DROP INDEX CONCURRENTLY x_jobs_input_idx`` and run ``migrate`` again.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations

import django_xjobs.models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_xjobs", "0029_job_versions"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=django_xjobs.models.GinIndex(
                fields=["input"], name="x_jobs_input_idx", opclasses=["jsonb_path_ops"]
            ),
        ),
    ]
