"""Every write fenced on one claimed row finds that row by its primary key, whatever the
statistics say.

The case that bit: statistics taken while every row was ready (so ``state = 'running'`` looked
like no row at all), then the table truncated and refilled, as a benchmark or a fresh deployment
does. A fence written ``state = 'running'`` proves the live-key and lease indexes' predicates, and
the planner read one of them whole, filtering on the id: each batched ack of a 10k drain took
hundreds of milliseconds. Checked with a custom plan and with the generic plan a prepared
statement settles on (SPEC STATE-01's fence, DESIGN Q-01)."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from django_xjobs.drivers.postgres import STATEMENTS
from django_xjobs.drivers.postgres.outbox import STATEMENTS as OUTBOX
from django_xjobs.drivers.postgres.steps import STATEMENTS as STEP_STATEMENTS
from tests.support.plans import plan

FILL = """
INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                    state, priority, run_at, created_at, updated_at)
SELECT gen_random_uuid(), 'tests.jobs.ok', 'default', '{}', 'k' || g, gen_random_uuid(), 0, 3,
       'ready', 0, now(), now(), now()
FROM generate_series(1, 10000) AS g
"""

ID = uuid.uuid4()
TOKEN = uuid.uuid4()
PARAMS = {
    "id": ID,
    "job_id": ID,
    "lease_token": TOKEN,
    "ids": [ID, uuid.uuid4()],
    "tokens": [TOKEN, uuid.uuid4()],
    "results": [None, None],
    "visibility_timeout": 30.0,
    "delay": 1.0,
    "error": None,
    "failure": None,
    "keep": 10,
    "counts_as_attempt": True,
    "crashed": False,
    "snoozed": False,
    "parked": False,
    "progress": '{"done": 1, "total": 2, "note": ""}',
    "stop_reason": None,
    "keep_place": False,
    "state": "dead",
    "reason": None,
    "run_id": uuid.uuid4(),
    "name": "s",
    "status": "completed",
    "output": None,
    "started_at": None,
    "completed_at": None,
    "wake_at": None,
    "event": None,
    "correlation_key": None,
    "match": None,
    "any_tenant": False,
    "attempts": 1,
    "position": 0,
    "ran_for": 0.5,
    "outcome": "retried",
    "bounds": [0.1, 1.0, 10.0],
}

FENCED = {
    "complete": STATEMENTS["complete"],
    "retry": STATEMENTS["retry"],
    "suspend": STATEMENTS["suspend"],
    "shed": STATEMENTS["shed"],
    "finish": STATEMENTS["finish"],
    "heartbeat": STATEMENTS["heartbeat"],
    "progress": STATEMENTS["progress"],
    "cancel": STATEMENTS["cancel"],
    "put_step": STEP_STATEMENTS["put_step"],
}


def _reads(node: dict, table: str) -> list[str]:
    """How the plan reads ``table``: the index of each index scan, "Seq Scan" for a whole read."""
    found = []
    if node.get("Index Name", "").startswith(f"{table}_"):
        found.append(node["Index Name"])
    elif node["Node Type"] == "Seq Scan" and node.get("Relation Name") == table:
        found.append("Seq Scan")
    for child in node.get("Plans", []):
        found += _reads(child, table)
    return found


@pytest.fixture
def stale_statistics():
    """x_jobs analyzed full of ready jobs, then truncated and refilled, not analyzed since."""
    with connection.cursor() as cursor:
        cursor.execute(FILL)
        cursor.execute("ANALYZE x_jobs")
        cursor.execute("TRUNCATE x_jobs CASCADE")
        cursor.execute(FILL)


@pytest.mark.django_db
@pytest.mark.parametrize("statement", sorted(FENCED))
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_a_fenced_write_finds_its_row_by_the_primary_key(stale_statistics, statement, generic):
    reads = _reads(plan(FENCED[statement], PARAMS, generic=generic), "x_jobs")
    assert reads and set(reads) == {"x_jobs_pkey"}, reads


# --- the outbox: the on-commit publish and the relay's writes name their rows by id -----------

STAGE = """
INSERT INTO x_outbox (id, job, queue, input, idempotency_key, max_attempts, priority, run_at,
                      staged_at, published_at)
SELECT gen_random_uuid(), 'tests.jobs.ok', 'default', '{}', 'k' || g, 3, 0, now(), now(),
       PUBLISHED
FROM generate_series(1, 10000) AS g
"""

OUTBOX_PARAMS = {
    "ids": [uuid.uuid4() for _ in range(500)],
    "run_ids": [uuid.uuid4() for _ in range(500)],
    "job_ids": [uuid.uuid4() for _ in range(500)],
    "id": ID,
    "job_id": ID,
    "lease": 30.0,
    "token": "relay-1",
}

KEYED = ("claim_ids", "publish_taken", "release", "mark_published", "take_claimed",
         "collapsed", "mark_published_many")  # fmt: skip


@pytest.fixture
def stale_outbox_statistics():
    """x_outbox analyzed full of published rows, then truncated and 10k rows staged."""
    with connection.cursor() as cursor:
        cursor.execute(STAGE.replace("PUBLISHED", "now()"))
        cursor.execute("ANALYZE x_outbox")
        cursor.execute("TRUNCATE x_outbox")
        cursor.execute(STAGE.replace("PUBLISHED", "NULL"))


@pytest.mark.django_db
@pytest.mark.parametrize("statement", KEYED)
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_an_outbox_write_by_id_finds_its_rows_by_the_primary_key(
    stale_outbox_statistics, statement, generic
):
    """A chunk of 500 ids out of 10k rows may be read by the primary key or, with the ids known,
    by one pass over the table; never through the unpublished index, which the stale statistics
    make look empty and which holds every staged row."""
    reads = _reads(plan(OUTBOX[statement], OUTBOX_PARAMS, generic=generic), "x_outbox")
    assert reads and set(reads) <= {"x_outbox_pkey", "Seq Scan"}, reads
