"""Operators' pauses of a job name or of a limit key until resumed, and the input index on the
rows an incident is about (issue 45).

``x_job_controls`` holds one row per job or key an operator paused with ``pause_jobs``. Small and
read once a poll by each worker, never in a claim: a claim is told the paused names and keys,
and one told of none is the statement it was. A key's pause with an end stays in its
``x_limit_keys`` row, the pause a ``RateLimited`` takes.

``x_jobs_problem_input_idx`` finds dead, failed and cancelled jobs by what they carry (GIN,
``jsonb_path_ops``, for ``input @> ...``): a partial index, so a row has entries only while it
is in one of those states. A job that ends done never writes one, nor does a claim or a settle
of a live row: the drain pays nothing, where the opt-in index over every row
(``x_jobs_input_idx``) cost a drain 7 to 17 %. Built ``CONCURRENTLY`` (hence ``atomic = False``),
so enqueues, claims and settles go on while it is built on a big table, and first, so a build
that is interrupted leaves nothing else half done: drop the invalid index it leaves
(``DROP INDEX CONCURRENTLY x_jobs_problem_input_idx``) and migrate again.
"""

import django.db.models.functions.datetime
from django.db import migrations, models


#: the states whose rows the index holds: those an incident's jobs end in and an operator
#: retries, requeues or deletes by filter (bulk.sql's verbs); done rows, the bulk of a table,
#: and every live row stay out of it
PROBLEM_STATES = "('dead', 'failed', 'cancelled')"


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ("django_xjobs", "0032_job_history"),
    ]

    operations = [
        migrations.RunSQL(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS x_jobs_problem_input_idx ON x_jobs "
            f"USING gin (input jsonb_path_ops) WHERE state IN {PROBLEM_STATES}",
            reverse_sql="DROP INDEX CONCURRENTLY IF EXISTS x_jobs_problem_input_idx",
        ),
        migrations.CreateModel(
            name="JobControl",
            fields=[
                ("target", models.TextField(primary_key=True, serialize=False)),
                ("name", models.TextField(help_text="The job paused.")),
                (
                    "limit_key",
                    models.TextField(
                        blank=True,
                        help_text="Its rendered limit key paused; null: the whole job.",
                        null=True,
                    ),
                ),
                (
                    "paused_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        help_text="Paused since.",
                    ),
                ),
                (
                    "paused_by",
                    models.TextField(blank=True, help_text="Who paused it, when known.", null=True),
                ),
                (
                    "paused_until",
                    models.DateTimeField(
                        blank=True,
                        help_text="The pause ends by itself then (pause_jobs(until=)); null: "
                        "until resumed.",
                        null=True,
                    ),
                ),
                (
                    "updated_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
            ],
            options={
                "db_table": "x_job_controls",
                "ordering": ["target"],
            },
        ),
    ]
