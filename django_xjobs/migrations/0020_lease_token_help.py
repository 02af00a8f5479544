"""The lease token's help text says what it fences in the project's own words: every settle and
the heartbeat. The column is unchanged."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0019_workflows"),
    ]

    operations = [
        migrations.AlterField(
            model_name="job",
            name="lease_token",
            field=models.UUIDField(
                blank=True,
                help_text="Minted by every claim; fences every settle and heartbeat.",
                null=True,
            ),
        ),
    ]
