"""The history's jobs found by tenant and by batch (issue 46): ``erase_tenant`` deletes a
tenant's moved jobs a batch at a time, and a batch's member list reads its moved members, each
of which would otherwise read every day of the history. Partial, so a job with no tenant or no
batch adds no entry.

Made on the partitioned parent, so each day's partition gets its own index, now and when it is
attached. PostgreSQL cannot build an index on a partitioned table ``CONCURRENTLY``: each
existing day is locked against the mover's inserts while its index is built. The history is
new (migration 0032, in the same release), so there is little or nothing to index; a site that
already moved many days of jobs pays one index build over them, during which the history's
writers wait (the mover, a retry bringing a job back) while its readers go on; claims and
settles never touch the history.
"""

from django.db import migrations

INDEXES = """
CREATE INDEX IF NOT EXISTS x_job_history_tenant_idx ON x_job_history (tenant_id)
    WHERE tenant_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS x_job_history_batch_idx ON x_job_history (batch_id, id)
    WHERE batch_id IS NOT NULL
"""
INDEXES_DROP = """
DROP INDEX IF EXISTS x_job_history_batch_idx;
DROP INDEX IF EXISTS x_job_history_tenant_idx
"""


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0033_pauses_problem_input"),
    ]

    operations = [migrations.RunSQL(INDEXES, reverse_sql=INDEXES_DROP)]
