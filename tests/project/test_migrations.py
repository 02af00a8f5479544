"""SPEC DB-01: every table comes from this one app's migrations, and after ``0001_initial`` a
table is only ever extended (new columns, new tables, new or redefined indexes, added
constraints, indexes replaced, storage settings), never narrowed or edited: no column or table is removed,
renamed or altered. An installation upgraded across releases then keeps every column a rolling
worker of the previous release still reads and writes.

The rule, read off the operations 0002-0010 use, is a whitelist: an operation not on it (a
``RemoveField``, ``AlterField``, ``RenameField``, ``DeleteModel``, ``RunPython``...) fails the
test until the rule is changed on purpose, next to this docstring.

Changed on purpose for 0015: an ``AlterField`` that leaves the column as it was (only what
Django keeps out of the database changed: ``choices``, ``help_text``...) is allowed, so a
stop reason can gain a choice (``expired``) that the admin then shows and filters by.

Changed on purpose for 0032: a ``RunSQL`` may create a new table or index (``x_job_history``, a
partitioned table Django cannot declare) — never alter or drop one that exists — and a
``SeparateDatabaseAndState`` is judged by the operations it holds.
"""

from __future__ import annotations

import re
from pathlib import Path

from django.apps import apps
from django.db import connection, migrations, models
from django.db.migrations.loader import MigrationLoader

from django_xjobs.states import LIVE_STATES

APP = "django_xjobs"
PACKAGE = Path(__file__).resolve().parents[2] / "django_xjobs"
INITIAL = "0001_initial"

#: RunSQL may only change a table's storage parameters (autovacuum and the like: 0006, 0010)
STORAGE_ONLY = re.compile(r"^\s*ALTER\s+TABLE\s+\w+\s+(SET|RESET)\s*\([^;]*\)\s*$", re.I | re.S)
#: ... or create a new table or index (0032: the history's partitioned parents; 0033: an index
#: built concurrently)
CREATES = re.compile(
    r"^\s*CREATE\s+(TABLE|INDEX(\s+CONCURRENTLY)?(\s+IF\s+NOT\s+EXISTS)?)\s+x_\w+\s", re.I
)


def app_migrations() -> list[migrations.Migration]:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    found = [m for (app, _), m in loader.disk_migrations.items() if app == APP]
    return sorted(found, key=lambda m: m.name)


def statements(sql) -> list[str]:
    chunks = [sql] if isinstance(sql, str) else list(sql)
    return [s for chunk in chunks for s in str(chunk).split(";") if s.strip()]


def alters_column(migration: migrations.Migration, op: migrations.AlterField) -> bool:
    """Whether ``op`` changes the column in the database: the SQL Django's schema editor would
    run for it, collected rather than run. Attributes kept out of the database (``choices``,
    ``help_text``) and a field class swapped for one with the same column (0021) emit none."""
    from django.db import connection

    loader = MigrationLoader(None, ignore_no_migrations=True)
    key = (APP, migration.name)
    if key in loader.graph.nodes:
        before = loader.project_state(key, at_end=False)
    else:  # a synthetic migration: judged against the latest state
        before = loader.project_state()
    after = before.clone()
    op.state_forwards(APP, after)
    with connection.schema_editor(collect_sql=True, atomic=False) as editor:
        op.database_forwards(APP, editor, before, after)
    return bool(editor.collected_sql)


def violations(migration: migrations.Migration) -> list[str]:
    """What in ``migration`` (one after 0001) removes or edits rather than adds."""
    found = []
    # an index is not a column: one may be replaced (0006 redefines two, 0007 swaps one for a
    # narrower one), so a removal needs an index added on the same model by the same migration
    indexed = {
        op.model_name_lower for op in migration.operations if isinstance(op, migrations.AddIndex)
    }
    for op in migration.operations:
        where = f"{migration.name}: {op.describe()}"
        if isinstance(op, migrations.SeparateDatabaseAndState):
            held = [*op.database_operations, *op.state_operations]
            inner = type("Migration", (migrations.Migration,), {"operations": held})
            found += violations(inner(migration.name, APP))
        elif isinstance(op, migrations.AddField):
            field = op.field
            fills = field.null or field.has_default() or field.db_default is not models.NOT_PROVIDED
            if not fills:
                found.append(f"{where} adds a NOT NULL column without a default")
        elif isinstance(op, migrations.RemoveIndex):
            if op.model_name_lower not in indexed:
                found.append(f"{where} drops an index without replacing it")
        elif isinstance(op, migrations.AlterField):
            if alters_column(migration, op):
                found.append(f"{where} alters a column: tables only gain columns (DB-01)")
        elif isinstance(op, migrations.RunSQL):
            for sql in statements(op.sql):
                if not (STORAGE_ONLY.match(sql) or CREATES.match(sql)):
                    found.append(f"{where} runs SQL that is not a storage setting: {sql.strip()}")
        # model options (permissions, ordering, names) live in Django's state, not the table:
        # 0012 adds the payload permission this way
        elif not isinstance(
            op,
            migrations.CreateModel
            | migrations.AddIndex
            | migrations.AddConstraint
            | migrations.AlterModelOptions,
        ):
            found.append(f"{where} is a {type(op).__name__}: tables only gain columns (DB-01)")
    return found


def _flat(operations) -> list:
    """The operations, those a ``SeparateDatabaseAndState`` holds in their place (0032)."""
    return [
        inner
        for op in operations
        for inner in (
            [*op.database_operations, *op.state_operations]
            if isinstance(op, migrations.SeparateDatabaseAndState)
            else [op]
        )
    ]


def test_db_01_every_table_is_created_by_this_apps_migrations():
    created = {
        op.options.get("db_table")
        for migration in app_migrations()
        for op in _flat(migration.operations)
        if isinstance(op, migrations.CreateModel)
    }
    tables = {model._meta.db_table for model in apps.get_app_config(APP).get_models()}
    assert tables <= created
    assert {"x_jobs", "x_job_steps", "x_outbox", "x_backfills", "x_job_events"} <= tables


def test_db_01_no_migration_after_the_first_removes_or_alters_a_column_or_table(db):
    later = [m for m in app_migrations() if m.name != INITIAL]
    assert [m.name[:4] for m in later] == [f"{n:04d}" for n in range(2, len(later) + 2)]
    assert [v for migration in later for v in violations(migration)] == []


def test_db_01_the_rule_refuses_what_narrows_or_edits_a_table(db):
    """The rule above must be able to fail: synthetic migrations doing what DB-01 forbids."""
    forbidden = [
        migrations.RemoveField(model_name="job", name="priority"),
        migrations.AlterField(model_name="job", name="priority", field=models.BigIntegerField()),
        migrations.RenameField(model_name="job", old_name="priority", new_name="rank"),
        migrations.DeleteModel(name="Worker"),
        migrations.RenameModel(old_name="Worker", new_name="Presence"),
        migrations.AlterModelTable(name="job", table="x_jobs_v2"),
        migrations.RemoveConstraint(model_name="job", name="x_jobs_state_check"),
        migrations.RemoveIndex(model_name="job", name="x_jobs_claim_idx"),
        migrations.AddField(model_name="job", name="shard", field=models.IntegerField()),
        migrations.RunSQL("ALTER TABLE x_jobs DROP COLUMN priority"),
        migrations.RunSQL(["ALTER TABLE x_jobs SET (fillfactor = 90); DROP TABLE x_workers"]),
        migrations.RunPython(migrations.RunPython.noop),
    ]
    for op in forbidden:
        synthetic = type("Migration", (migrations.Migration,), {"operations": [op]})
        assert violations(synthetic("0099_synthetic", APP)), op.describe()
    allowed = type(
        "Migration",
        (migrations.Migration,),
        {
            "operations": [
                migrations.AddField(
                    model_name="job", name="shard", field=models.IntegerField(null=True)
                ),
                migrations.AddField(
                    model_name="job", name="lane", field=models.IntegerField(db_default=0)
                ),
                migrations.RunSQL("ALTER TABLE x_jobs SET (fillfactor = 90)"),
                migrations.RunSQL("CREATE TABLE x_jobs_more (id uuid) PARTITION BY HASH (id)"),
                # a choice more, the column as it was (0015)
                migrations.AlterField(
                    model_name="job",
                    name="stop_reason",
                    field=models.TextField(null=True, blank=True, choices=[("x", "X")]),
                ),
            ]
        },
    )
    assert violations(allowed("0099_synthetic", APP)) == []


def test_hist_01_the_history_migration_moves_no_row_and_the_mover_moves_them_all(
    transactional_db,
):
    """SPEC HIST-01: from a table holding finished rows, migration 0032 creates the empty
    history and leaves every row where it is; the batched mover then moves every finished one."""
    from django.db.migrations.executor import MigrationExecutor

    from django_xjobs.drivers import get_driver
    from django_xjobs.testing.factories import DeadJobFactory, DoneJobFactory, JobFactory

    before, after = [(APP, "0031_operator_progress")], [(APP, "0032_job_history")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('x_job_history')")
            assert cursor.fetchone() == (None,)
        done = DoneJobFactory.create_batch(3)
        dead = DeadJobFactory()
        live = JobFactory()
        with connection.cursor() as cursor:  # finished two and forty days ago
            cursor.execute(
                "UPDATE x_jobs SET updated_at = now() - interval '1 day' * "
                "CASE state WHEN 'done' THEN 2 ELSE 40 END WHERE state <> 'ready'"
            )
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM x_jobs")
            assert cursor.fetchone() == (5,)
            cursor.execute("SELECT count(*) FROM x_job_history")
            assert cursor.fetchone() == (0,)
    finally:  # the later migrations too: the next test on this database expects every table
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    history = get_driver().history()
    assert history.move_finished(grace=3600, batch=2) == 4
    reads = get_driver().reads()
    assert {reads.get_job(j.id).state for j in done} == {"done"}
    assert reads.get_job(dead.id).state == "dead"
    assert reads.get_job(live.id).state == "ready"
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM x_jobs")
        assert cursor.fetchone() == (1,)
        cursor.execute("SELECT count(DISTINCT tableoid) FROM x_job_history")
        assert cursor.fetchone() == (2,)  # two days of done and dead: one partition each


def unique_indexes() -> dict[str, str]:
    """Each unique index on the tables the upserts and the one-live-row rule target, by name."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes"
            " WHERE tablename IN ('x_jobs', 'x_job_steps', 'x_job_leases')"
            " AND indexdef LIKE 'CREATE UNIQUE INDEX%%'"
        )
        return dict(cursor.fetchall())


def test_db_02_the_one_live_row_rule_is_a_partial_unique_index_the_statements_target(db):
    """SPEC DB-02: the migrations make the one-live-row rule a unique index over the namespace
    (name, ``coalesce(tenant_id, '')``, key) for the live states only, and the two-column keys
    of steps and slots unique constraints; the upserts of steps.sql and leases.sql target those
    columns (an ``ON CONFLICT`` naming columns no unique index covers fails at run time)."""
    indexes = unique_indexes()
    live = indexes["x_jobs_name_tenant_idempotency_live_idx"]
    assert "(name, COALESCE(tenant_id, ''::text), idempotency_key)" in live
    where = live.partition(" WHERE ")[2]
    assert sorted(re.findall(r"'(\w+)'::text", where)) == sorted(LIVE_STATES)
    assert "(run_id, name)" in indexes["x_job_steps_run_name_key"]
    assert "(lease_key, slot)" in indexes["x_job_leases_key_slot_key"]
    sql = PACKAGE / "drivers" / "postgres"
    assert "ON CONFLICT (run_id, name)" in (sql / "steps.sql").read_text()
    assert "ON CONFLICT (lease_key, slot)" in (sql / "leases.sql").read_text()


def test_a_migration_names_the_app_fields_by_their_public_path():
    """The field classes live in ``models/fields.py`` (issue 41), but a migration written now
    names them as the landed ones do (``django_xjobs.models.PgArrayField``) and sees a
    ``StoredJSONField`` as Django's ``JSONField``: moving the module changes no migration."""
    from django.db.migrations.writer import MigrationWriter

    from django_xjobs.models import Job, LimitKey, OutboxEntry

    for model, name in ((Job, "after"), (OutboxEntry, "after"), (LimitKey, "starts")):
        text, imports = MigrationWriter.serialize(model._meta.get_field(name))
        assert text.startswith("django_xjobs.models.PgArrayField(base_field=models.")
        assert imports == {"import django_xjobs.models", "from django.db import models"}
    text, _ = MigrationWriter.serialize(Job._meta.get_field("input"))
    assert text == "models.JSONField()"
