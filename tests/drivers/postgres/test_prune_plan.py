"""Retention finds old finished jobs through the age index, which holds finished jobs only
(migration 0007): a live job writes no entry into it, and the prune still walks it in order, with
a custom plan and with the generic plan a prepared statement settles on."""

from __future__ import annotations

import pytest
from django.db import connection

from django_xjobs.drivers.postgres import STATEMENTS
from tests.support.plans import plan

DAY = 86400


def _fill() -> None:
    """20k done jobs, 1 % of them older than a month, beside 20k ready ones; analyzed."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt,
                                max_attempts, state, priority, run_at, created_at, updated_at)
            SELECT gen_random_uuid(), 'tests.jobs.ok', 'default', '{}', 'k' || g,
                   gen_random_uuid(), 1, 3, CASE WHEN g % 2 = 0 THEN 'done' ELSE 'ready' END, 0,
                   now(), now(),
                   now() - CASE WHEN g % 200 = 0 THEN interval '40 days' ELSE interval '1 hour' END
            FROM generate_series(1, 40000) AS g
            """
        )
        cursor.execute("ANALYZE x_jobs")


def _plan(statement: str, generic: bool) -> dict:
    params = {"states": ["done"], "older_than": 30 * DAY, "batch": 1000, "after": "-infinity"}
    return plan(STATEMENTS[statement], params, generic=generic)


def _reads(plan: dict) -> list[str]:
    """The indexes the plan reads, and "Seq Scan" for each whole-table read of ``x_jobs``."""
    found = []
    if "Index Name" in plan:
        found.append(plan["Index Name"])
    elif plan["Node Type"] == "Seq Scan" and plan.get("Relation Name") == "x_jobs":
        found.append("Seq Scan")
    for child in plan.get("Plans", []):
        found += _reads(child)
    return found


@pytest.mark.django_db
@pytest.mark.parametrize("statement", ["prune", "prune_count"])
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_the_prune_reads_old_finished_jobs_through_the_age_index(statement, generic):
    _fill()
    reads = _reads(_plan(statement, generic))
    assert "x_jobs_finished_idx" in reads, reads
    assert "Seq Scan" not in reads, reads


@pytest.mark.django_db
def test_a_live_job_has_no_entry_in_the_age_index():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_indexdef('x_jobs_finished_idx'::regclass),"
            " pg_get_expr(indpred, indrelid) FROM pg_index"
            " WHERE indexrelid = 'x_jobs_finished_idx'::regclass"
        )
        definition, predicate = cursor.fetchone()
    assert "(state, updated_at)" in definition
    for state in ("ready", "delayed", "running", "suspended"):
        assert f"'{state}'" not in predicate, predicate
    for state in ("done", "failed", "dead", "cancelled"):
        assert f"'{state}'" in predicate, predicate
