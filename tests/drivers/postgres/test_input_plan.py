"""Jobs found by what they carry use the input index (issue 45, SPEC BULK-21): the admin's job
list, ``list_jobs`` (``xjobs ls --input``) and the bulk verbs' filter all ask ``input @> ...``,
and each of their statements reaches the rows through ``x_jobs_input_idx`` (GIN,
``jsonb_path_ops``) rather than reading the table, once a site creates that index: it is
opt-in, not a migration, since every claim and settle would pay for its entries
(docs/howto/incidents.md gives its statement and what it costs). The dead, failed and
cancelled rows have an index of their own that migration 0033 makes (SPEC BULK-23..25), partial
on those states, so a drain writes no entry in it.

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
from django_xjobs.models import Job, state_filter
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

#: the opt-in index over every row, and migration 0033's over the problem rows only
INPUT_INDEXES = {"x_jobs_input_idx", "x_jobs_problem_input_idx"}

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
    assert _indexes(top) & INPUT_INDEXES, top


def test_bulk_21_list_jobs_finds_jobs_by_input_through_the_index(filled):
    rows = Job.objects.filter(input__contains=WANTED).order_by("-created_at", "-id")[:100]
    assert "x_jobs_input_idx" in _indexes(_orm_plan(rows))  # live rows too: the full one


def test_bulk_21_the_admin_list_finds_jobs_by_input_through_the_index(filled, admin_user):
    request = RequestFactory().get("/admin/django_xjobs/job/", {"input": json.dumps(WANTED)})
    request.user = admin_user
    rows = carried(site._registry[Job].get_queryset(request), input=json.dumps(WANTED))
    assert "x_jobs_input_idx" in _indexes(_orm_plan(rows.order_by("-created_at", "-pk")))
    assert "x_jobs_input_idx" in _indexes(_orm_plan(rows.values("pk")))  # the page's count


# --- the partial index migration 0033 makes: dead, failed and cancelled rows only ------------


@pytest.fixture
def problems():
    """The rows without the opt-in index: only what the migrations made."""
    with connection.cursor() as cursor:
        cursor.execute(FILL, [ROWS])
        cursor.execute("ANALYZE x_jobs")
        cursor.execute("SET LOCAL enable_seqscan = off")


def test_bulk_23_the_migration_makes_a_partial_gin_index_of_the_problem_rows(db):
    """SPEC BULK-23: GIN jsonb_path_ops on input, only while a row is dead, failed or
    cancelled: a done row, and every live one, writes no entry."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'x_jobs_problem_input_idx'"
        )
        [(definition,)] = cursor.fetchall()
    assert "USING gin (input jsonb_path_ops)" in definition
    for state in ("dead", "failed", "cancelled"):
        assert f"'{state}'" in definition
    for state in ("done", "ready", "delayed", "running", "suspended"):
        assert f"'{state}'" not in definition


def test_bulk_24_a_retry_by_input_reaches_the_problem_rows_through_the_partial_index(problems):
    """SPEC BULK-24: a verb whose states are among the index's (retry: dead and failed) finds
    them by input through it; cancel, on live rows, does not (the index has none of them)."""
    after = "00000000-0000-0000-0000-000000000000"
    for statement in ("bulk_match", "bulk_count"):
        retry = {**filter_params(job_filter(input=WANTED), ["dead", "failed"]), "after": after}
        top = plan(STATEMENTS[statement], {**retry, "limit": 10_000}, generic=False)
        assert "x_jobs_problem_input_idx" in _indexes(top), top
        dead = job_filter(input=WANTED, state="dead")
        only = {**filter_params(dead, ["done", "dead", "failed", "cancelled"]), "after": after}
        top = plan(STATEMENTS[statement], {**only, "limit": 10_000}, generic=False)
        assert "x_jobs_problem_input_idx" in _indexes(top), top
    live = {**filter_params(job_filter(input=WANTED), ["ready", "delayed"]), "after": after}
    top = plan(STATEMENTS["bulk_match"], {**live, "limit": 10_000}, generic=False)
    assert "x_jobs_problem_input_idx" not in _indexes(top), top


def test_bulk_25_the_admin_list_and_ls_by_input_and_a_problem_state_use_it(problems, admin_user):
    """SPEC BULK-25: the admin's list filtered by input and state=dead (its page and its count)
    and list_jobs(state="dead", input=) (xjobs ls) reach the rows through the partial index."""
    rows = Job.objects.filter(state_filter("dead"), input__contains=WANTED)  # list_jobs's
    assert "x_jobs_problem_input_idx" in _indexes(_orm_plan(rows.order_by("-created_at", "-id")))
    request = RequestFactory().get(
        "/admin/django_xjobs/job/", {"input": json.dumps(WANTED), "state__exact": "dead"}
    )
    request.user = admin_user
    listed = carried(site._registry[Job].get_queryset(request), input=json.dumps(WANTED))
    listed = listed.filter(state="dead")
    assert "x_jobs_problem_input_idx" in _indexes(_orm_plan(listed.order_by("-created_at", "-pk")))
    assert "x_jobs_problem_input_idx" in _indexes(_orm_plan(listed.values("pk")))
