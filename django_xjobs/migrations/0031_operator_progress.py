"""A bulk action's progress (issue 45): the admin's "all N matching" larger than a batch is done by
a background job, and its audit row says where it is — queued, running, done or failed — with the
count asked about, when it started and finished, the error of a failed run and the job doing it.
Nullable columns only: no table rewrite, and every row written before reads as done at once."""

from django.db import migrations, models


def _text(help_text):
    return models.TextField(blank=True, null=True, help_text=help_text)


class Migration(migrations.Migration):

    dependencies = [
        ("django_xjobs", "0030_tenant_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="operatoraction",
            name="status",
            field=_text("queued, running, done or failed; null: done at once."),
        ),
        migrations.AddField(
            model_name="operatoraction",
            name="expected",
            field=models.IntegerField(blank=True, null=True, help_text="Matched when it was asked."),
        ),
        migrations.AddField(
            model_name="operatoraction",
            name="started_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="operatoraction",
            name="finished_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="operatoraction",
            name="error",
            field=_text("Why its last run failed."),
        ),
        migrations.AddField(
            model_name="operatoraction",
            name="by_job",
            field=_text("The background job doing it."),
        ),
    ]
