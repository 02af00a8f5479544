"""Least privilege: a permission of its own for job payloads (``view_job`` alone shows their
shape), and events scoped to a tenant (a waiter matches its own tenant's events)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("django_xjobs", "0011_outbox_quarantine")]

    operations = [
        migrations.AlterModelOptions(
            name="job",
            options={
                "ordering": ["-created_at"],
                "permissions": [
                    (
                        "view_job_payload",
                        "Can view job inputs, results, step outputs and event data",
                    )
                ],
            },
        ),
        migrations.AddField(
            model_name="jobevent",
            name="tenant_id",
            field=models.TextField(blank=True, null=True),
        ),
    ]
