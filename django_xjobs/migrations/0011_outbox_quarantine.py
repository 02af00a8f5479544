"""An outbox row whose publish fails for a reason that fails the same way again is quarantined
(issue 24): it carries the error that put it there and the relay leaves it out of its batches,
so one row can no longer hold back every row staged after it.

Three nullable columns, added without a default: no table rewrite and no lock held for longer
than the catalog change. No index: the unpublished-row index already holds every quarantined
row, and there are few of them.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0010_queue_upkeep"),
    ]

    operations = [
        migrations.AddField(
            model_name="outboxentry",
            name="quarantined_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="outboxentry",
            name="error_code",
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="outboxentry",
            name="error",
            field=models.TextField(blank=True, null=True),
        ),
    ]
