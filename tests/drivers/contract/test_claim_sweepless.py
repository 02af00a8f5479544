"""The claim without its lapsed-lease half (``lapsed=False``, the claim a worker makes between
its sweeps) on both drivers, and the claim's plan on PostgreSQL: the claim index walked in order
whatever the statistics say (SPEC DRV-03, LEASE-01)."""

from __future__ import annotations

import pytest
from django.db import connection

from django_xjobs.drivers.contract import Shed
from django_xjobs.drivers.postgres import STATEMENTS
from tests import jobs
from tests.support.plans import plan

VIS = 30.0


def claim(driver, limit=10, queues=("default",), worker="w1", vis=VIS, **kwargs):
    return driver.runs().claim(
        queues=list(queues), limit=limit, visibility_timeout=vis, worker_id=worker, **kwargs
    )


def test_lease_01_a_claim_without_the_sweep_leaves_a_lapsed_row_for_the_sweep(harness):
    jobs.ok.enqueue(n=1)
    [first] = claim(harness.driver, vis=5)
    harness.advance(5)
    assert claim(harness.driver, worker="w2", lapsed=False) == []
    [second] = claim(harness.driver, worker="w2", lapsed=True)
    assert (second.id, second.attempt) == (first.id, 2)
    assert second.lease_token != first.lease_token


def test_drv_03_a_claim_without_the_sweep_takes_waiting_rows_in_order(harness):
    low = jobs.ok.enqueue(n=1).id
    other = jobs.on_other_queue.enqueue(n=1).id
    high = jobs.important.enqueue(n=1).id
    jobs.ok.using(delay="1h").enqueue(n=2)
    claimed = claim(harness.driver, limit=2, queues=("default", "other"), lapsed=False)
    assert [j.id for j in claimed] == [high, low]
    assert all(j.attempt == 1 for j in claimed)
    row = harness.row(high)
    assert (row.state, row.claimed_by, row.lease_token) == ("running", "w1", claimed[0].lease_token)
    assert [j.id for j in claim(harness.driver, queues=("default", "other"), lapsed=False)] == [
        other
    ]


def test_a_claim_without_the_sweep_returns_what_a_run_needs(harness):
    jobs.ok.using(tenant_id="t-1").enqueue(n=7)
    [held] = claim(harness.driver, vis=5)
    harness.advance(5)
    # no presence row: its worker died with it, which marks it, and counts nothing (LEASE-16)
    [lapsed] = claim(harness.driver, worker="w2")
    assert (lapsed.lease_expiries, lapsed.died_with) == (0, "w1")
    assert harness.driver.runs().shed(Shed(lapsed.id, lapsed.lease_token, delay=0, reason="full"))
    [job] = claim(harness.driver, worker="w3", lapsed=False)
    assert (job.id, job.run_id, job.name, job.queue) == (held.id, held.run_id, held.name, "default")
    assert (job.input, job.tenant_id, job.idempotency_key) == (
        {"n": 7},
        "t-1",
        held.idempotency_key,
    )
    # a shed keeps the mark: the next claim still runs it alone
    assert (job.attempt, job.max_attempts, job.died_with) == (2, held.max_attempts, "w1")
    assert job.created_at == harness.row(job.id).created_at


# --- the plan (PostgreSQL) -----------------------------------------------------------------


def _stale_statistics(rows: int) -> None:
    """``rows`` ready jobs, with statistics taken while every one of them was done: the table a
    burst lands in after a drained queue was analyzed."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt,
                                max_attempts, state, priority, run_at, created_at, updated_at)
            SELECT gen_random_uuid(), 'tests.jobs.ok', 'default', '{}', 'k' || g,
                   gen_random_uuid(), 0, 3, 'done', 0, now() - make_interval(secs => g),
                   now(), now()
            FROM generate_series(1, %s) AS g
            """,
            [rows],
        )
        cursor.execute("ANALYZE x_jobs")
        cursor.execute("UPDATE x_jobs SET state = 'ready'")


def _never_analyzed(rows: int) -> None:
    """``rows`` ready jobs in a table emptied by TRUNCATE and filled since, never analyzed: the
    peer benchmark's drain, and a queue table right after a burst lands in it."""
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE x_jobs CASCADE")
        cursor.execute(
            """
            INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt,
                                max_attempts, state, priority, run_at, created_at, updated_at)
            SELECT gen_random_uuid(), 'tests.jobs.ok', 'default', '{}', 'k' || g,
                   gen_random_uuid(), 0, 3, 'ready', 0, now() - make_interval(secs => g),
                   now(), now()
            FROM generate_series(1, %s) AS g
            """,
            [rows],
        )


def _plan(statement: str, generic: bool, limit: int) -> dict:
    params = {
        "queues": ["default"],
        "limit": limit,
        "worker_id": "w-plan",
        "versions": "{}",
        "paused": [],
        "visibility_timeout": VIS,
        "lapsed": "{}",
        "lapsed_present": "{}",
        "exited": "{}",
        "keep": 10,
    }
    return plan(STATEMENTS[statement], params, generic=generic, analyze=True)


def _scans(plan: dict) -> list[dict]:
    found = [plan] if "Index Name" in plan or plan["Node Type"] == "Seq Scan" else []
    for child in plan.get("Plans", []):
        found += _scans(child)
    return found


@pytest.mark.django_db
@pytest.mark.parametrize("statement", ["claim", "claim_lapsed"])
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_drv_03_the_claim_walks_the_claim_index_even_with_stale_statistics(statement, generic):
    """Statistics that saw no claimable row made the planner read the whole live-key index and
    sort it (30 ms a claim on a 30k backlog); the claim must step through ``limit`` entries."""
    _stale_statistics(3000)
    scans = _scans(_plan(statement, generic, limit=32))
    waiting = [s for s in scans if s.get("Index Name") == "x_jobs_claim_idx"]
    assert waiting, [s.get("Index Name", s["Node Type"]) for s in scans]
    assert all(s["Actual Rows"] <= 32 for s in waiting), _summary(scans)
    assert not [s for s in scans if s["Node Type"] == "Seq Scan" and s["Relation Name"] == "x_jobs"]
    assert "x_jobs_name_tenant_idempotency_live_idx" not in {s.get("Index Name") for s in scans}
    _assert_found_by_key_once(scans, limit=32)


@pytest.mark.django_db
@pytest.mark.parametrize("statement", ["claim", "claim_lapsed"])
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_drv_03_the_claim_finds_its_rows_by_key_in_a_table_never_analyzed(statement, generic):
    """A table filled since TRUNCATE has no statistics at all: the claim's update found the
    picked rows again by reading the whole table and hashing it (10-20 ms a claim on a 30k
    backlog). It must find them by primary key, and read no more than the queue's own entries of
    the claim index."""
    _never_analyzed(30000)
    scans = _scans(_plan(statement, generic, limit=256))
    assert not [
        s for s in scans if s["Node Type"] == "Seq Scan" and s["Relation Name"] == "x_jobs"
    ], _summary(scans)
    _assert_found_by_key_once(scans, limit=256)
    assert "x_jobs_name_tenant_idempotency_live_idx" not in {s.get("Index Name") for s in scans}


def _assert_found_by_key_once(scans: list[dict], limit: int) -> None:
    """The update finds the picked rows in one pass over the primary key (not one probe of the
    whole list per picked row, nor a scan of the table). A bitmap scan of the key may count a
    row's superseded index entries too, so it is allowed twice ``limit``."""
    by_key = [s for s in scans if s.get("Index Name") == "x_jobs_pkey"]
    assert len(by_key) == 1, _summary(scans)
    assert by_key[0]["Actual Loops"] == 1, _summary(scans)
    assert by_key[0]["Actual Rows"] <= 2 * limit, _summary(scans)


def _summary(scans: list[dict]) -> list[tuple[str, float, float]]:
    return [
        (s.get("Index Name") or s["Node Type"], s["Actual Rows"], s["Actual Loops"]) for s in scans
    ]
