"""A claim plan that does not depend on the statistics, and autovacuum settings for a queue table.

The claim index was defined by ``state IN ('ready', 'delayed', 'suspended')``. A claim that
filters on those states also proves the live-key unique index's predicate, so the planner may
read that whole index and sort it instead of walking the claim index in order. It does, when the
statistics were taken while no row was claimable (a drained table, then a burst): a 30k backlog
drained at a third of its speed, each claim reading 30k index entries. Defined as "none of the
other states", the claim index can only be proved by the claim's own filter; the state check makes
the two definitions the same set of rows. The lease index, walked by the lapsed-lease sweep, is
redefined the same way for the same reason ("running" = none of the other states).
"""

from django.db import migrations, models

# x_jobs is a queue: most of its rows change state within seconds of being written, so the
# defaults (analyze after 10 % of the table changed, vacuum after 20 %) leave the planner with
# statistics from a table that no longer exists, and the claim index full of dead entries a claim
# must step over. Analyze and vacuum after 2 % instead (plus a small floor, so a near-empty table
# is not analyzed on every few jobs). No fillfactor: every write changes ``state`` and
# ``updated_at``, both indexed, so no update of a job row can be a HOT update anyway.
AUTOVACUUM = """
ALTER TABLE x_jobs SET (
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_analyze_threshold = 500,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 500,
    autovacuum_vacuum_insert_scale_factor = 0.05
)
"""
AUTOVACUUM_RESET = """
ALTER TABLE x_jobs RESET (
    autovacuum_analyze_scale_factor,
    autovacuum_analyze_threshold,
    autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor
)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0005_worker_presence"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="job",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "state__in",
                        [
                            "ready",
                            "delayed",
                            "running",
                            "suspended",
                            "done",
                            "failed",
                            "dead",
                            "cancelled",
                        ],
                    )
                ),
                name="x_jobs_state_check",
            ),
        ),
        migrations.RemoveIndex(
            model_name="job",
            name="x_jobs_claim_idx",
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                models.F("queue"),
                models.OrderBy(models.F("priority"), descending=True),
                models.F("run_at"),
                models.F("id"),
                condition=models.Q(
                    ("state__in", ["running", "done", "failed", "dead", "cancelled"]),
                    _negated=True,
                ),
                name="x_jobs_claim_idx",
            ),
        ),
        migrations.RemoveIndex(
            model_name="job",
            name="x_jobs_lease_idx",
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(
                    (
                        "state__in",
                        ["ready", "delayed", "suspended", "done", "failed", "dead", "cancelled"],
                    ),
                    _negated=True,
                ),
                fields=["visible_at"],
                name="x_jobs_lease_idx",
            ),
        ),
        migrations.RunSQL(AUTOVACUUM, reverse_sql=AUTOVACUUM_RESET),
    ]
