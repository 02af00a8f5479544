"""The fleet overview on the admin index (issue 42): ``Overview``, a proxy of ``Job`` with no
table and no permissions of its own, whose admin list is the overview page. Nothing changes in
the database."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0024_job_dependencies"),
    ]

    operations = [
        migrations.CreateModel(
            name="Overview",
            fields=[],
            options={
                "verbose_name": "overview",
                "verbose_name_plural": "overview",
                "proxy": True,
                "default_permissions": (),
                "indexes": [],
                "constraints": [],
            },
            bases=("django_xjobs.job",),
        ),
    ]
