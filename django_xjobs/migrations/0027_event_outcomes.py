"""What a publish did, kept on its event row (issue 43): the waiting runs it released, the jobs
its ``on_event`` declarations started, the live runs its ``cancel_on`` declarations cancelled,
and the declarations it could not start with their coded errors. ``xjobs events`` and the
admin's event list show them. Columns with database defaults only: no table rewrite, and an
event published before this migration reads as having done nothing of the kind.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0026_waiting_step_match"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobevent",
            name="cancelled",
            field=models.IntegerField(
                db_default=0,
                default=0,
                help_text="Live runs cancelled by declarations with cancel_on.",
            ),
        ),
        migrations.AddField(
            model_name="jobevent",
            name="refused",
            field=models.JSONField(
                blank=True,
                db_default=models.Value([], models.JSONField()),
                default=list,
                help_text='Each on_event declaration this event could not start: [{"job": name, "code": X_..., "message": ...}].',
            ),
        ),
        migrations.AddField(
            model_name="jobevent",
            name="released",
            field=models.IntegerField(
                db_default=0,
                default=0,
                help_text="Waiting runs this event released when published.",
            ),
        ),
        migrations.AddField(
            model_name="jobevent",
            name="started",
            field=models.IntegerField(
                db_default=0, default=0, help_text="Jobs started by declarations with on_event."
            ),
        ),
    ]
