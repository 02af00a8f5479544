"""The relay against a job that moved to the history (issue 46, HIST-13): a relay published a
staged row's job and died before it marked the row; the job ran, finished and moved to the
history; once the dead relay's lease lapses a real relay takes the row again. It must mark it
published as the job it already is, never insert that job a second time.

On PostgreSQL the insert and the mark commit together on the jobs' own database, so the case
arises where the outbox is on another database (``OUTBOX_DATABASES``): the test stages on the
``orders`` database. The memory driver's outbox publishes through its enqueue, as across
databases."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connections

from django_xjobs.drivers import create, install, uninstall
from django_xjobs.drivers.contract import EnqueueRequest
from django_xjobs.drivers.postgres.outbox import PostgresOutboxStore
from django_xjobs.models import Job
from django_xjobs.outbox.relay import Relay
from django_xjobs.testing import run_until_idle

LEASE = 30.0


def _request() -> EnqueueRequest:
    return EnqueueRequest(
        name="tests.jobs.ok",
        queue="default",
        input={"n": 1},
        input_json=json.dumps({"n": 1}),
        idempotency_key="ok:relayed",
        max_attempts=3,
    )


@pytest.fixture(params=["memory", "orders"])
def across(request, transactional_db):
    """(driver, outbox store, a function that ages the store's claims)."""
    driver = create("memory" if request.param == "memory" else "postgres")
    install(driver)
    if request.param == "memory":
        store = driver.outbox("default", claim_lease=LEASE)
        yield driver, store, store.shift
    else:
        store = PostgresOutboxStore("orders", LEASE)

        def lapse(seconds: float) -> None:
            with connections["orders"].cursor() as cursor:
                cursor.execute(
                    "UPDATE x_outbox SET claimed_at = claimed_at - %(d)s",
                    {"d": timedelta(seconds=seconds)},
                )

        yield driver, store, lapse
    uninstall(driver)


@pytest.mark.django_db(transaction=True, databases=["default", "orders"])
def test_hist_13_a_relay_publishing_again_a_moved_job_inserts_nothing(across):
    driver, store, lapse = across
    row_id = store.stage(_request())
    [row] = store.claim(10, "relay-dead")
    assert driver.jobs().enqueue(row.request()).id == row_id  # published; never marked
    run_until_idle(driver=driver, queues=["default"])
    assert driver.reads().get_job(row_id).state == "done"
    driver.jobs().age(120, only={"jobs"})
    assert driver.history().move_finished(grace=60) == 1
    lapse(LEASE + 1)  # the dead relay's lease is over: the row is taken again
    relay = Relay(store=store, driver=driver)
    assert relay.tick() == 1  # marked published, as the job it already is
    assert relay.tick() == 0
    assert store.pending()[0] == 0
    [found] = driver.reads().list_jobs()
    assert (found.id, found.state) == (row_id, "done")  # in the history, once
    if driver.database is not None:
        assert not Job.objects.filter(pk=row_id).exists()  # nothing back in x_jobs
