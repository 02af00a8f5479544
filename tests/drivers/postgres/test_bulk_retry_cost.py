"""What a retry by filter costs the database a batch (issue 45, SPEC BULK-26, BULK-27): with no
job of the batch in the history it is one statement, the history not asked; that statement
reads each row once, by its id, and updates it by the ctid it read. Counted in statements and
in plan nodes, not in time: ``python -m bench.run --workloads BULK`` times it beside a drain.
A row another transaction changes while the statement waits for its lock is judged again at its
newest version, as an update by id judged it."""

from __future__ import annotations

import threading
from uuid import UUID

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from django_xjobs import operations
from django_xjobs.drivers import install, uninstall
from django_xjobs.drivers.contract import BulkAction, EnqueueRequest, Finish
from django_xjobs.drivers.postgres import PostgresDriver
from django_xjobs.drivers.postgres.bulk import STATEMENTS, filter_params
from django_xjobs.operations import bulk, job_filter
from tests.drivers.contract.support import claim
from tests.support.database import lock_waiters
from tests.support.plans import plan
from tests.support.process import wait_for

FILL = """
INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                    state, stop_reason, last_error, priority, run_at, created_at, updated_at)
SELECT gen_random_uuid(), 'tests.jobs.ok', 'default', jsonb_build_object('n', g),
       'dead:' || g, gen_random_uuid(), 1, 3, 'dead', 'terminal',
       'X_TERMINAL: the partner answered 503', 0, now(), now(), now()
FROM generate_series(1, %s) AS g
"""

#: the text that names each statement of a retry by filter
RETRY, RESTORE, WALK = "WITH found AS", "DELETE FROM x_job_history", "AS matched"


@pytest.fixture
def postgres():
    driver = PostgresDriver("default")
    install(driver)
    yield driver
    uninstall(driver)


def _dead(count: int) -> list:
    with connection.cursor() as cursor:
        cursor.execute(FILL, [count])
        cursor.execute("SELECT id FROM x_jobs WHERE state = 'dead' ORDER BY id")
        return [row[0] for row in cursor.fetchall()]


def _kinds(queries: list[dict]) -> list[str]:
    """Each statement sent, by what it is (the transactions' own left out)."""
    names = {RETRY: "retry", RESTORE: "restore", WALK: "walk"}
    kinds = [next((n for text, n in names.items() if text in q["sql"]), q["sql"]) for q in queries]
    return [
        k for k in kinds if not k.startswith(("SAVEPOINT", "RELEASE", "INSERT INTO x_operator"))
    ]


@pytest.mark.django_db
def test_bulk_26_a_batch_with_no_moved_job_is_one_statement(postgres, monkeypatch):
    monkeypatch.setattr(bulk, "BATCH", 1000)
    _dead(2500)
    with CaptureQueriesContext(connection) as queries:
        answer = operations.retry_jobs(state="dead")
    assert (answer["matched"], answer["changed"], answer["batches"]) == (2500, 2500, 3)
    # one read of the walk, then one statement a batch: the history is not asked
    assert _kinds(queries.captured_queries) == ["walk", "retry", "retry", "retry"]


@pytest.mark.django_db
def test_bulk_27_the_retry_reads_each_row_once_and_updates_it_by_its_ctid(postgres):
    ids = _dead(50)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE x_jobs")
        cursor.execute("SET LOCAL enable_seqscan = off")  # a small table: as a big one is read
    where = job_filter(state="dead")
    params = {
        **filter_params(where, bulk.VERB_STATES["retry"]),
        "ids": ids,
        "to_queue": None,
        "restored": False,
    }
    for generic in (False, True):  # the custom plan, and a prepared statement's generic one
        top = plan(STATEMENTS["bulk_retry"], params, generic=generic)
        nodes = list(_nodes(top))
        update = next(n for n in nodes if n.get("Operation") == "Update")
        [scanned] = [n for n in update["Plans"] if n.get("Parent Relationship") == "Outer"]
        assert scanned["Node Type"] == "Tid Scan"
        by_key = [n for n in nodes if n.get("Index Name") == "x_jobs_pkey"]
        assert len(by_key) == 1  # the batch's rows found by id once, not again to update them


def _nodes(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.django_db(transaction=True)
def test_bulk_27_a_row_changed_while_the_batch_waits_is_judged_at_its_newest_version(postgres):
    touched, retried, other = (_ended_dead(postgres, key) for key in ("a", "b", "c"))
    where = job_filter(state="dead")
    store = postgres.jobs().bulk()
    ids = store.match(where, states=bulk.VERB_STATES["retry"], after=None, limit=10)
    assert sorted(ids) == sorted([touched, retried, other])
    answers: list[tuple[int, list]] = []

    def act() -> None:
        try:
            action = BulkAction(verb="retry", states=bulk.VERB_STATES["retry"])
            answers.append(store.act(action, ids, where))
        finally:
            connections["default"].close()

    with transaction.atomic():  # another operator's writes hold two rows until they commit
        with connection.cursor() as cursor:
            # a write that leaves the job dead (and admitted): a new version, a new ctid
            cursor.execute("UPDATE x_jobs SET updated_at = now() WHERE id = %s", [touched])
        operations.retry_job(retried)  # and one that moves the job on
        worker = threading.Thread(target=act)
        worker.start()
        with connection.cursor() as cursor:
            wait_for(lambda: lock_waiters(cursor, RETRY) == 1, timeout=10)
    worker.join(timeout=10)
    # the touched job runs again as an update by id would have run it; the retried one is
    # skipped (counted by the caller as matched but not changed), not run twice
    assert answers == [(2, [])]
    assert postgres.reads().get_job(touched).state == "ready"
    assert postgres.reads().get_job(other).state == "ready"
    row = postgres.reads().get_job(retried)
    assert (row.state, row.attempt) == ("ready", 0)


def _ended_dead(driver: PostgresDriver, key: str) -> UUID:
    """A job enqueued, claimed and ended dead, by the driver's own verbs."""
    request = EnqueueRequest(
        name="tests.jobs.ok",
        queue="default",
        input={},
        input_json="{}",
        idempotency_key=key,
        max_attempts=3,
    )
    job_id = driver.jobs().enqueue(request).id
    [job] = claim(driver, limit=1)
    error = "X_TERMINAL: the card was declined"
    assert driver.runs().finish(Finish(job.id, job.lease_token, "dead", error=error))
    return job_id
