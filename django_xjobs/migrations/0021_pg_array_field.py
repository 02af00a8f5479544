"""The three array columns (the rollup's buckets, a limit key's starts) move from
``django.contrib.postgres``'s ArrayField to the app's own ``PgArrayField``: Django 6.1 refuses
the former unless ``django.contrib.postgres`` is installed too. Same column types: no SQL."""

import django_xjobs.models
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0020_lease_token_help"),
    ]

    operations = [
        migrations.AlterField(
            model_name="jobrollup",
            name="run_buckets",
            field=django_xjobs.models.PgArrayField(base_field=models.BigIntegerField()),
        ),
        migrations.AlterField(
            model_name="jobrollup",
            name="wait_buckets",
            field=django_xjobs.models.PgArrayField(base_field=models.BigIntegerField()),
        ),
        migrations.AlterField(
            model_name="limitkey",
            name="starts",
            field=django_xjobs.models.PgArrayField(
                base_field=models.DateTimeField(),
                blank=True,
                help_text="Start times still inside the key's rate window, oldest first; null: none.",
                null=True,
            ),
        ),
    ]
