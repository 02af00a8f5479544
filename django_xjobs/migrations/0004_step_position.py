from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0003_job_errors"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobstep",
            name="position",
            field=models.IntegerField(
                blank=True,
                help_text="The step's place in the run, in the order it was first reached (0, 1, 2...).",
                null=True,
            ),
        ),
    ]
