"""A worker that exits past ``--shutdown-timeout`` with runs in flight marks its presence row
stopped (``x_workers.stopped_at``): ``xjobs workers`` and the admin say it exited, rather than
"lapsed, in flight 2" forever, and the re-claim of its runs records an exit, not an outage."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("django_xjobs", "0012_privilege")]

    operations = [
        migrations.AddField(
            model_name="worker",
            name="stopped_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
