"""A tenant's jobs found by an index (issue 46): ``erase_tenant`` deletes them a batch at a time,
and each batch would otherwise read the whole table. Partial, so a job with no tenant adds no
entry; built ``CONCURRENTLY``, so enqueues and claims go on while it is built on a big table."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ("django_xjobs", "0029_job_versions"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                condition=models.Q(("tenant_id__isnull", False)),
                fields=["tenant_id"],
                name="x_jobs_tenant_idx",
            ),
        ),
    ]
