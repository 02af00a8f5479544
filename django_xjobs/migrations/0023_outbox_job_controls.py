"""The outbox carries the job controls an enqueue may ask for (issue 29): an expiry
(``expires_at`` as given, or ``expires_in`` kept relative to when the job falls due) and a
replace (``on_conflict="replace"``, debounce). A staged job then expires or replaces its waiting
holder exactly as a direct enqueue does. Nullable or defaulted in the database: adding them
rewrites no row, and a row staged by a worker of the previous release publishes as before."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0022_queue_depth"),
    ]

    operations = [
        migrations.AddField(
            model_name="outboxentry",
            name="expires_at",
            field=models.DateTimeField(
                blank=True,
                help_text="The job's expiry, as given: not started by then.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="outboxentry",
            name="expires_in",
            field=models.FloatField(
                blank=True,
                help_text="The job's expiry in seconds from when it falls due (run_at), as given.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="outboxentry",
            name="replace",
            field=models.BooleanField(
                db_default=False,
                help_text="Published as on_conflict='replace': a waiting holder of the key takes it.",
            ),
        ),
    ]
