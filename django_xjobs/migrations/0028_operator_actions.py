"""The operators' audit trail (issue 45): one row per operator action (a retry, a cancel, a bulk
action by filter, a queue paused, ...), with who did it, when, on which job or filter, why and
what it changed. A new table: nothing existing is rewritten. Rows are only viewed in the admin
(its own view permission: no add, change or delete) and pruned after XJOBS["AUDIT_RETENTION"].

And a queue's pause may end by itself (``pause_queue(until=...)``): a nullable column, so no
table rewrite, and every pause taken before reads as lasting until it is resumed.
"""

import django.db.models.functions.datetime
import django_xjobs.ids
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_xjobs', '0027_event_outcomes'),
    ]

    operations = [
        migrations.AddField(
            model_name="queuecontrol",
            name="paused_until",
            field=models.DateTimeField(
                blank=True,
                help_text="The pause ends by itself then (pause_queue(until=)); null: until resumed.",
                null=True,
            ),
        ),
        migrations.CreateModel(
            name='OperatorAction',
            fields=[
                ('id', models.UUIDField(default=django_xjobs.ids.uuid7, editable=False, primary_key=True, serialize=False)),
                ('at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('actor', models.TextField(help_text="admin:<user>, cli:<login>@<host>, or an API call's by=.")),
                ('verb', models.TextField()),
                ('job_id', models.TextField(blank=True, help_text='The one job acted on.', null=True)),
                ('target', models.TextField(blank=True, help_text='What else was acted on: a queue, a cron, a batch.', null=True)),
                ('filter', models.JSONField(blank=True, help_text="A bulk action's filter, its input values redacted.", null=True)),
                ('reason', models.TextField(blank=True, null=True)),
                ('matched', models.IntegerField(blank=True, null=True)),
                ('changed', models.IntegerField(blank=True, null=True)),
                ('skipped', models.IntegerField(blank=True, null=True)),
            ],
            options={
                'verbose_name': 'operator action',
                'db_table': 'x_operator_actions',
                'default_permissions': ('view',),
                'indexes': [models.Index(fields=['at'], name='x_operator_actions_at_idx')],
            },
        ),
    ]
