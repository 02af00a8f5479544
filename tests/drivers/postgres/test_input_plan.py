"""Jobs found by what they carry use the input index (issue 45, SPEC BULK-21): the admin's job
list, ``list_jobs`` (``xjobs ls --input``) and the bulk verbs' filter all ask ``input @> ...``,
and each of their statements reaches the rows through ``x_jobs_input_idx`` (GIN,
``jsonb_path_ops``) rather than reading the table, once a site creates that index: it is
opt-in, not a migration, since every claim and settle would pay for its entries
(docs/howto/incidents.md gives its statement and what it costs).

A plan, not a time: a few thousand rows with their statistics (``ANALYZE`` inside the test's
transaction), and sequential scans priced out (``enable_seqscan = off``), so the choice left is
between the input index and walking another index over every row. At 10 million rows the
benchmark (``python -m bench.run --workloads INPUT10M``) times the same statements."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.sites import site
from django.db import connection
from django.test import RequestFactory

from django_xjobs.admin.filters import carried
from django_xjobs.drivers.postgres.bulk import STATEMENTS, filter_params
from django_xjobs.models import Job
from django_xjobs.operations import job_filter
from tests.support.plans import plan

ROWS = 3000
WANTED = {"order_id": 4711}
FILL = """
INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                    state, priority, run_at, created_at, updated_at)
SELECT gen_random_uuid(), 'tests.jobs.ok', 'default',
       jsonb_build_object('order_id', g, 'customer', 'c' || (g %% 100)),
       'k' || g, gen_random_uuid(), 1, 3,
       (ARRAY['done', 'dead', 'failed', 'ready'])[g %% 4 + 1], 0, now(), now(), now()
FROM generate_series(1, %s) AS g
"""

#: docs/howto/incidents.md's index, as a site creates it (there CONCURRENTLY: not in a transaction)
INPUT_INDEX = "CREATE INDEX x_jobs_input_idx ON x_jobs USING gin (input jsonb_path_ops)"

pytestmark = pytest.mark.django_db


@pytest.fixture
def filled():
    with connection.cursor() as cursor:
        cursor.execute(FILL, [ROWS])
        cursor.execute(INPUT_INDEX)  # the documented statement, without CONCURRENTLY
        cursor.execute("ANALYZE x_jobs")
        cursor.execute("SET LOCAL enable_seqscan = off")


def _indexes(node: dict) -> set[str]:
    """The indexes a plan reads, in any of its nodes."""
    found = {node["Index Name"]} if "Index Name" in node else set()
    for child in node.get("Plans", []):
        found |= _indexes(child)
    return found


def _orm_plan(queryset) -> dict:
    text = queryset.explain(format="json")
    return json.loads(text)[0]["Plan"]


def _input_index() -> list[tuple[str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'x_jobs'"
            " AND indexname = 'x_jobs_input_idx'"
        )
        return cursor.fetchall()


def test_bulk_21_no_migration_creates_the_input_index():
    """Opt-in: every claim and settle would write its entries (a drain measured 0.83-0.93 of
    its rate with it), so only the site that wants it pays for it."""
    assert _input_index() == []


def test_bulk_21_the_documented_statement_makes_it_gin_jsonb_path_ops(filled):
    [(definition,)] = _input_index()
    assert "USING gin (input jsonb_path_ops)" in definition


@pytest.mark.parametrize("statement", ["bulk_match", "bulk_count"])
def test_bulk_21_a_bulk_verb_finds_jobs_by_input_through_the_index(filled, statement):
    where = job_filter(input=WANTED)
    after = "00000000-0000-0000-0000-000000000000"
    params = {**filter_params(where, ["dead", "failed"]), "after": after, "limit": 10_000}
    top = plan(STATEMENTS[statement], params, generic=False)
    assert "x_jobs_input_idx" in _indexes(top), top


def test_bulk_21_list_jobs_finds_jobs_by_input_through_the_index(filled):
    rows = Job.objects.filter(input__contains=WANTED).order_by("-created_at", "-id")[:100]
    assert "x_jobs_input_idx" in _indexes(_orm_plan(rows))


def test_bulk_21_the_admin_list_finds_jobs_by_input_through_the_index(filled, admin_user):
    request = RequestFactory().get("/admin/django_xjobs/job/", {"input": json.dumps(WANTED)})
    request.user = admin_user
    rows = carried(site._registry[Job].get_queryset(request), input=json.dumps(WANTED))
    assert "x_jobs_input_idx" in _indexes(_orm_plan(rows.order_by("-created_at", "-pk")))
    assert "x_jobs_input_idx" in _indexes(_orm_plan(rows.values("pk")))  # the page's count
