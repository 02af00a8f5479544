"""A publish and a park racing for one run (issue 43, SPEC EVT-06), on two real sessions: the
run has written its waiting step and is about to park when the event is published. Whichever
takes the job row first, the other waits for it and the run is due at once; neither ends with
the run parked for its next look. The two orders are forced with an open transaction on a
connection of the test's own."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection as django_connection

from django_xjobs.drivers.contract import StepRecord, SuspendUntil
from django_xjobs.drivers.postgres import STATEMENTS as JOB_STATEMENTS
from django_xjobs.drivers.postgres import PostgresDriver
from django_xjobs.drivers.postgres.steps import STATEMENTS
from django_xjobs.payload import dumps
from tests import jobs
from tests.declarations.test_enqueue_many import own_connection
from tests.drivers.contract.support import claim
from tests.support.process import wait_for

HOUR = 3600.0

pytestmark = pytest.mark.django_db(transaction=True)


def _parking(driver):
    """A claimed run whose waiting step is written and committed, not parked yet."""
    jobs.ok.enqueue(n=uuid.uuid4().int % 10**9)
    [job] = claim(driver)
    record = StepRecord(
        run_id=job.run_id,
        name="shipped",
        status="waiting",
        started_at=driver.steps().now() - timedelta(seconds=1),
        event="order.shipped",
        match={"order_id": 7},
    )
    assert driver.steps().put(record, job_id=job.id, lease_token=job.lease_token)
    return job


def _in_thread(fn):
    """Run ``fn`` on a thread with its own database connection; the thread, started."""

    def run():
        try:
            fn()
        finally:
            django_connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _blocked(watcher, table_statement: str) -> bool:
    """Whether a session is waiting for a row lock while running ``table_statement``."""
    rows = watcher.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND datname = current_database() AND query LIKE %s",
        [f"%{table_statement}%"],
    ).fetchall()
    return rows[0][0] > 0


def _publish_params():
    return {
        "id": uuid.uuid4(),
        "name": "order.shipped",
        "payload": dumps({"order_id": 7}),
        "data": dumps({"order_id": 7}),  # what the waiters are matched on (SPEC CRYPT-08)
        "correlation_key": None,
        "ttl": 3600.0,
        "tenant_id": None,
        "started": 0,
        "cancelled": 0,
        "refused": "[]",
    }


def test_evt_06_a_park_that_waits_for_the_publish_reads_its_mark():
    """The publish takes the row first (the run still running) and commits while the park waits
    for it: the park, whose snapshot predates the event, is due now by the publish's mark."""
    driver = PostgresDriver("default")
    job = _parking(driver)
    with own_connection() as publisher, own_connection() as watcher:
        with publisher.transaction():
            publisher.execute(STATEMENTS["publish_event"], _publish_params())
            parked = []
            park = _in_thread(
                lambda: parked.append(
                    driver.runs().suspend(SuspendUntil(job.id, job.lease_token, delay=HOUR))
                )
            )
            wait_for(lambda: _blocked(watcher, "UPDATE x_jobs"), what="the park to wait")
        park.join(30)
    assert parked == [True]
    row = driver.reads().get_job(job.id)
    assert row.state == "suspended"
    assert row.run_at <= driver.steps().now()


def test_evt_06_a_publish_that_waits_for_the_park_releases_the_parked_run():
    """The park takes the row first and commits while the publish waits for it: the publish,
    whose snapshot saw the run running, finds it parked and releases it."""
    driver = PostgresDriver("default")
    job = _parking(driver)
    params = {
        "id": job.id,
        "lease_token": job.lease_token,
        "delay": HOUR,
        "error": None,
        "snoozed": False,
        "parked": False,
        "failure": None,
        "keep": 10,
    }
    with own_connection() as parker, own_connection() as watcher:
        with parker.transaction():
            parker.execute(JOB_STATEMENTS["suspend"], params)
            publish = _in_thread(
                lambda: driver.events().publish(
                    id=uuid.uuid4(),
                    name="order.shipped",
                    payload={"order_id": 7},
                    correlation_key=None,
                    ttl=3600.0,
                )
            )
            # its head: the activity view keeps a statement's first kilobyte only
            wait_for(lambda: _blocked(watcher, "WITH waiting AS"), what="the publish")
        publish.join(30)
    row = driver.reads().get_job(job.id)
    assert row.state == "ready"
    assert row.run_at <= driver.steps().now()
