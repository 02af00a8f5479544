"""A bulk action racing a settle on PostgreSQL (issue 45, SPEC BULK-04): the batch's statement
read the row as live, then waits on its lock while a settle that ended the job commits; when
it gets the lock it checks the row again and leaves it as the settle left it, counted as
skipped. The memory driver acts under its one lock, so only the database has this race."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction

from django_xjobs.drivers import install, uninstall
from django_xjobs.drivers.contract import BulkAction, Complete
from django_xjobs.drivers.postgres import PostgresDriver
from django_xjobs.operations import bulk, job_filter
from tests import jobs
from tests.drivers.contract.support import claim
from tests.support.database import lock_waiters
from tests.support.process import wait_for


@pytest.mark.django_db(transaction=True)
def test_bulk_04_a_settle_that_commits_while_the_batch_waits_on_its_row_is_kept():
    driver = PostgresDriver("default")
    install(driver)
    try:
        jobs.ok.enqueue(n=1)
        [held] = claim(driver)
        waiting = jobs.ok.enqueue(n=2).id
        where, states = job_filter(), bulk.VERB_STATES["cancel"]
        store = driver.jobs().bulk()
        ids = store.match(where, states=states, after=None, limit=10)
        assert set(ids) == {held.id, waiting}
        answers: list[tuple[int, list]] = []

        def cancel() -> None:
            try:
                action = BulkAction(verb="cancel", states=states, reason="incident")
                answers.append(store.act(action, ids, where))
            finally:
                connections["default"].close()

        with transaction.atomic():  # the settle holds the row until it commits
            assert driver.runs().complete([Complete(held.id, held.lease_token)]) == {held.id}
            canceller = threading.Thread(target=cancel)
            canceller.start()
            with connection.cursor() as cursor:
                wait_for(lambda: lock_waiters(cursor, "WITH prior AS") == 1, timeout=10)
        canceller.join(timeout=10)
        assert answers == [(1, [])]
        assert driver.reads().get_job(held.id).state == "done"
        row = driver.reads().get_job(waiting)
        assert (row.state, row.last_error) == ("cancelled", "incident")
    finally:
        uninstall(driver)
