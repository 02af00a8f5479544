"""Each run records the version of its job's code it started under (issue 44), stamped by the
claim at its first claim, and whether a worker of a newer version parked it. A nullable column
and one with a database default: no table rewrite; a run claimed before this migration reads as
version 1, and none is parked.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0028_operator_actions"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="version",
            field=models.IntegerField(
                blank=True,
                help_text="The version of its job's code the run started under, stamped at its "
                "first claim; empty reads as 1.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="parked",
            field=models.BooleanField(
                db_default=False,
                default=False,
                help_text="Suspended by a worker of a newer version (old_runs='park'): only a "
                "worker of its own version, or one that replays or restarts old runs, takes it.",
            ),
        ),
    ]
