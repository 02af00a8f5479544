"""A publish finds its waiters by the partial index of migration 0026 (issue 43): the waiting
steps of its event name, then each one's job by its key. It never reads
``x_jobs`` or ``x_job_steps`` whole, whatever the statistics say: with ``x_jobs`` analyzed full
of ready jobs, then truncated and refilled (as test_fence_plan.py leaves it), and
``x_job_steps`` full of completed steps. The runs an event's ``cancel_on`` cancels are found
on the live-key index (SPEC EVT-09)."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from django_xjobs.drivers.postgres.steps import STATEMENTS
from tests.drivers.postgres.test_fence_plan import FILL, _reads
from tests.support.plans import plan

STEPS = """
INSERT INTO x_job_steps (run_id, name, status, output, started_at, completed_at)
SELECT gen_random_uuid(), 'step', 'completed', '{}'::jsonb, now(), now()
FROM generate_series(1, 20000)
"""

PARAMS = {
    "id": uuid.uuid4(),
    "name": "order.shipped",
    "payload": '{"order_id": 7}',
    "data": '{"order_id": 7}',  # what the waiters are matched on (SPEC CRYPT-08)
    "correlation_key": None,
    "ttl": 3600.0,
    "tenant_id": None,
    "started": 0,
    "cancelled": 0,
    "refused": "[]",
}


@pytest.fixture
def stale_statistics():
    with connection.cursor() as cursor:
        cursor.execute(FILL)
        cursor.execute("ANALYZE x_jobs")
        cursor.execute("TRUNCATE x_jobs CASCADE")
        cursor.execute(FILL)
        cursor.execute(STEPS)
        cursor.execute("ANALYZE x_job_steps")


@pytest.mark.django_db
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_evt_06_a_publish_reads_only_its_waiters(stale_statistics, generic):
    top = plan(STATEMENTS["publish_event"], PARAMS, generic=generic)
    # each waiting step's job by its key, then the released ones by theirs
    assert set(_reads(top, "x_jobs")) == {"x_jobs_pkey"}, top
    assert _reads(top, "x_job_steps") == ["x_job_steps_waiting_idx"], top


CANCEL = {"name": "tests.jobs.fulfil", "tenant_id": None, "match": '{"order_id": 7}', "reason": "r"}


@pytest.mark.django_db
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_evt_09_a_cancel_on_event_reads_the_jobs_live_rows_by_its_key_index(
    stale_statistics, generic
):
    """The runs an event cancels are found on the live-key index (name, tenant over the live
    states), the job's live rows of that tenant; none by a GIN index, none by a whole read."""
    top = plan(STATEMENTS["cancel_on_event"], CANCEL, generic=generic)
    reads = set(_reads(top, "x_jobs"))
    assert reads == {"x_jobs_name_tenant_idempotency_live_idx", "x_jobs_pkey"}, top
