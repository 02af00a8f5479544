"""An event starts jobs and cancels them (issue 43): ``@job(on_event=...)`` enqueues a job of
the declaration per published event, its data as the inputs, in the publisher's transaction
(SPEC EVT-07); a declaration that cannot be made from the data is recorded on the event, and the
publish commits (EVT-08); ``@job(cancel_on=...)`` cancels the matching live runs of the event's
tenant (EVT-09); the event row counts what its publish did (EVT-11). On both drivers (the
``harness`` fixture) unless a case is about PostgreSQL's transactions."""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from django_xjobs import publish_event
from django_xjobs.drivers import create, install, uninstall
from django_xjobs.drivers.contract import SuspendUntil
from django_xjobs.models import Job, JobEvent, OutboxEntry
from django_xjobs.run.execution import Outcome
from django_xjobs.steps import events
from django_xjobs.testing import run_until_idle
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.drivers.contract.support import claim
from tests.models import Ledger
from tests.settings import XJOBS as TEST_XJOBS
from tests.support.process import wait_for

_n = itertools.count(1)
HOUR = 3600.0


def _rows(harness, handle):
    return harness.driver.reads().list_jobs(name=handle.name)


def test_evt_07_an_event_starts_a_job_of_each_declaration_with_its_data(harness):
    record = publish_event("user.created", {"user_id": 1, "plan": "pro"}, tenant_id="acme")
    [welcome] = _rows(harness, jobs.welcome)
    [plan] = _rows(harness, jobs.start_plan)
    assert (welcome.input, welcome.tenant_id) == (
        {"user_id": 1, "email": "", "plan": "pro"},
        "acme",
    )
    assert (plan.input, plan.tenant_id, plan.idempotency_key) == (
        {"user_id": 1, "plan": "pro"},
        "acme",
        "plan:pro",
    )
    assert welcome.enqueued_by == f"event:{record.id}"
    assert (record.started, record.refused) == (2, ())
    assert publish_event("user.upgraded", {"plan": "team"}).started == 1  # a list of names
    assert {e.outcome for e in run_until_idle()} == {Outcome.COMPLETED}
    assert harness.row(welcome.id).result == {"user_id": 1, "email": "", "tenant": "acme"}


def test_evt_07_a_job_is_started_once_per_idempotency_key(harness):
    """Two publishes whose data render one key: the second finds the live job (deduplicated),
    and does not count it as started."""
    first = publish_event("user.created", {"user_id": 2, "plan": "pro"})
    second = publish_event("user.created", {"user_id": 2, "plan": "pro", "email": "a@b.c"})
    assert (first.started, second.started) == (2, 0)
    assert len(_rows(harness, jobs.welcome)) == 1
    third = publish_event("user.created", {"user_id": 3, "plan": "pro"})
    assert third.started == 1  # welcome for user 3; the plan's key is live
    assert len(_rows(harness, jobs.welcome)) == 2


def test_evt_08_a_declaration_the_data_cannot_start_is_recorded_and_the_publish_commits(
    harness, caplog
):
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        record = publish_event("user.created", {"user_id": 4})  # no "plan": the key cannot render
    [line] = [r.getMessage() for r in caplog.records if "xjobs.event.refused" in r.getMessage()]
    assert f"id={record.id}" in line and f"job={jobs.start_plan.name}" in line
    [refusal] = record.refused
    assert (refusal["job"], refusal["code"]) == (jobs.start_plan.name, "X_INPUT_INVALID")
    assert "plan" in refusal["message"]
    assert record.started == 1 and len(_rows(harness, jobs.welcome)) == 1
    assert _rows(harness, jobs.start_plan) == []
    found = harness.driver.events().find("user.created", after=record.published_at)
    assert found.id == record.id and [dict(r) for r in found.refused] == [dict(refusal)]


def test_evt_08_a_key_callable_that_raises_refuses_its_declaration(harness):
    """A callable key (or tenant) the data does not suit raises its own error: refused with the
    input's code as well, never the publish's failure."""
    record = publish_event("user.deleted", {"user_id": 5, "email": "a@b.c"})
    [refusal] = record.refused
    assert (refusal["job"], refusal["code"], record.started) == (
        jobs.farewell.name,
        "X_INPUT_INVALID",
        0,
    )
    assert "TypeError" in refusal["message"]
    assert publish_event("user.deleted", {"user_id": 5}).started == 1


@pytest.mark.parametrize("data", [None, [1, 2], "text", {"email": "a@b.c"}])
def test_evt_08_data_that_is_not_the_inputs_refuses_every_declaration(harness, data):
    """Not an object, or an object without an input the handler requires: each declaration is
    refused with its coded error, none dropped."""
    record = publish_event("user.created", data)
    assert record.started == 0
    assert sorted((r["job"], r["code"]) for r in record.refused) == [
        (jobs.start_plan.name, "X_INPUT_INVALID"),
        (jobs.welcome.name, "X_INPUT_INVALID"),
    ]
    assert _rows(harness, jobs.welcome) == []


def test_evt_07_an_event_nothing_declares_does_only_what_it_did(harness):
    record = publish_event("order.shipped", {"order_id": 1})
    assert (record.started, record.cancelled, record.refused) == (0, 0, ())


# --- cancel_on ---------------------------------------------------------------------------------


def _fulfil(harness, state: str, order_id: int, tenant: str | None = None):
    """A ``fulfil`` run in ``state``, made before any other is ready; its id and claim."""
    handle = jobs.fulfil if tenant is None else jobs.fulfil.using(tenant_id=tenant)
    if state == "delayed":
        handle = handle.using(delay=HOUR)
    job_id = handle.enqueue(order_id=order_id).id
    job = None
    if state in ("running", "suspended"):
        [job] = claim(harness.driver)
    if state == "suspended":
        assert harness.driver.runs().suspend(SuspendUntil(job.id, job.lease_token, delay=HOUR))
    assert harness.row(job_id).state == state
    return job_id, job


@pytest.mark.parametrize("state", ["ready", "delayed", "running", "suspended"])
def test_evt_09_cancel_on_cancels_a_live_run_in_each_state(harness, state):
    job_id, job = _fulfil(harness, state, order_id=10)
    other, _ = _fulfil(harness, "ready", order_id=11)
    record = publish_event("order.cancelled", {"order_id": 10, "why": "customer"})
    assert record.cancelled == 1
    row = harness.row(job_id)
    assert (row.state, row.stop_reason) == ("cancelled", "cancelled")
    assert row.last_error == f"cancelled by event 'order.cancelled' ({record.id})"
    assert harness.row(other).state == "ready"
    if job is not None:  # its holder is fenced out: the lease token went with the cancel
        assert not harness.driver.runs().heartbeat(job.id, job.lease_token, 30)
    assert publish_event("order.cancelled", {"order_id": 10}).cancelled == 0
    assert publish_event("order.cancelled", {"id": 11}).cancelled == 0  # lacks the field


def test_evt_09_an_event_declared_to_both_cancel_and_start_a_job_restarts_it(harness):
    first = publish_event("account.changed", {"account_id": 1})
    second = publish_event("account.changed", {"account_id": 1, "field": "email"})
    assert [(e.cancelled, e.started) for e in (first, second)] == [(0, 1), (1, 1)]
    rows = sorted(_rows(harness, jobs.resync), key=lambda r: r.state)
    assert [(r.state, r.input) for r in rows] == [
        ("cancelled", {"account_id": 1}),
        ("ready", {"account_id": 1, "field": "email"}),
    ]


def test_evt_09_cancel_on_never_crosses_tenants(harness):
    a, _ = _fulfil(harness, "ready", order_id=20, tenant="A")
    b, _ = _fulfil(harness, "ready", order_id=20, tenant="B")
    none, _ = _fulfil(harness, "ready", order_id=20)
    assert publish_event("order.cancelled", {"order_id": 20}, tenant_id="A").cancelled == 1
    assert [harness.row(j).state for j in (a, b, none)] == ["cancelled", "ready", "ready"]
    assert publish_event("order.cancelled", {"order_id": 20}).cancelled == 1  # no tenant: none
    assert [harness.row(j).state for j in (b, none)] == ["ready", "cancelled"]


def test_evt_11_the_event_row_counts_what_its_publish_did(harness):
    waiter = jobs.waiter.enqueue(order_id=30).id
    run_until_idle()
    assert harness.row(waiter).state == "suspended"
    cancelled, _ = _fulfil(harness, "ready", order_id=30)
    record = publish_event("order.shipped", {"order_id": 30})
    assert (record.released, record.started, record.cancelled) == (1, 0, 0)
    record = publish_event("order.cancelled", {"order_id": 30})
    assert (record.released, record.started, record.cancelled) == (0, 0, 1)
    assert harness.row(cancelled).state == "cancelled"
    found = harness.driver.events().find("order.cancelled", after=record.published_at)
    assert (found.released, found.started, found.cancelled, found.refused) == (0, 0, 1, ())


# --- PostgreSQL: the publisher's transaction -----------------------------------------------------


@pytest.fixture
def postgres(transactional_db):
    driver = create("postgres")
    install(driver)
    try:
        yield driver
    finally:
        uninstall(driver)


@pytest.mark.parametrize("outbox", ["off", "auto"])
def test_evt_07_a_rolled_back_publish_leaves_neither_the_event_nor_its_jobs(postgres, outbox):
    """With the outbox on, the jobs still go straight to the jobs table in the publisher's
    transaction: the event's counts are decided there."""
    ready, _ = _fulfil(_Rows(postgres), "ready", order_id=40)
    with override_settings(XJOBS={**TEST_XJOBS, "OUTBOX": outbox}):
        with pytest.raises(RuntimeError), transaction.atomic():
            publish_event("user.created", {"user_id": 40, "plan": "x"})
            publish_event("order.cancelled", {"order_id": 40})
            assert Job.objects.filter(name=jobs.welcome.name).count() == 1  # inside: there
            raise RuntimeError("the caller's transaction fails")
        assert not Job.objects.filter(name=jobs.welcome.name).exists()
        assert not JobEvent.objects.exists()
        assert postgres.reads().get_job(ready).state == "ready"
        with transaction.atomic():
            record = publish_event("user.created", {"user_id": 40, "plan": "x"})
        assert record.started == 2
    stored = JobEvent.objects.get(id=record.id)
    assert (stored.started, stored.refused) == (2, [])
    assert Job.objects.filter(name=jobs.welcome.name, state="ready").count() == 1


@pytest.mark.django_db
def test_evt_08_a_row_the_database_refuses_is_recorded_and_the_rest_commits():
    """The refused write is undone by its own savepoint: without it the publisher's transaction
    would be aborted and the event's own statement refused."""
    driver = create("postgres")
    install(driver)
    try:
        with connection.cursor() as cursor:  # the test's transaction takes it away again
            cursor.execute(
                "ALTER TABLE x_jobs ADD CONSTRAINT no_plan_x CHECK (idempotency_key <> 'plan:x')"
            )
        record = publish_event("user.created", {"user_id": 50, "plan": "x"})
    finally:
        uninstall(driver)
    [refusal] = record.refused
    assert (refusal["job"], record.started) == (jobs.start_plan.name, 1)
    assert refusal["code"].startswith("X_")
    assert JobEvent.objects.get(id=record.id).refused == [dict(refusal)]
    assert Job.objects.filter(name=jobs.welcome.name).count() == 1


class _Rows:
    def __init__(self, driver):
        self.driver = driver

    def row(self, job_id):
        return self.driver.reads().get_job(job_id)


# --- a running run sees its stop signal ----------------------------------------------------------


def test_evt_09_a_running_run_sees_its_stop_signal_and_ends_cancelled(live_harness, caplog):
    token = f"cancel-on-{uuid.uuid4()}"
    job_id = jobs.fulfil.enqueue(order_id=60, token=token, hold=30.0).id
    worker = Worker(
        queues=["default"], concurrency=1, driver=live_harness.driver, heartbeat_interval=0.05
    )
    thread = threading.Thread(target=worker.run)
    with caplog.at_level(logging.INFO, logger="django_xjobs"):
        thread.start()
        try:
            waiting = Ledger.objects.filter(token=token, phase="waiting")
            wait_for(waiting.exists, timeout=20, what="the run to reach its wait")
            record = publish_event("order.cancelled", {"order_id": 60})
            cancelled = lambda: worker.outcomes.get(Outcome.CANCELLED) == 1  # noqa: E731
            wait_for(cancelled, timeout=20, what="the run to stop, cancelled")
        finally:
            worker.stop()
            thread.join(20)
    assert record.cancelled == 1
    row = live_harness.row(job_id)
    assert (row.state, row.stop_reason) == ("cancelled", "cancelled")
    assert str(record.id) in row.last_error
    assert live_harness.driver.steps().list(row.run_id) == []  # its next step was refused
    mine = [r.getMessage() for r in caplog.records if str(job_id) in r.getMessage()]
    assert any("xjobs.job.cancelled" in m for m in mine), mine


# --- what a publish costs, and an event kept in another database ---------------------------------


def _statements(fn) -> list[str]:
    events._last_purge[0] = time.monotonic()  # no sweep of expired events inside the count
    with CaptureQueriesContext(connection) as queries:
        fn()
    return [q["sql"].split()[0].upper() for q in queries.captured_queries]


def test_evt_11_an_event_is_one_statement_and_a_declaration_adds_its_own(postgres):
    """Nothing declared on it: the one publish statement, its release count written in it, in
    autocommit. Declared on: a transaction, in which each on_event declaration adds its enqueue
    in a savepoint and each cancel_on declaration one statement."""
    assert _statements(lambda: publish_event("order.shipped", {"order_id": 90})) == ["WITH"]
    started = _statements(lambda: publish_event("user.upgraded", {"plan": "solo"}))
    assert started == ["BEGIN", "SAVEPOINT", "WITH", "RELEASE", "WITH", "COMMIT"]
    cancelled = _statements(lambda: publish_event("order.cancelled", {"order_id": 90}))
    assert cancelled == ["BEGIN", "WITH", "WITH", "COMMIT"]


@pytest.mark.django_db(transaction=True, databases=["default", "orders"])
def test_evt_07_an_event_kept_in_another_database_stages_its_jobs_in_its_outbox():
    """Its jobs take the ordinary route of an enqueue from a transaction on that database:
    staged in its outbox, gone with a rollback, published to the jobs database at commit."""
    driver = create("postgres")
    install(driver)
    settings = {**TEST_XJOBS, "OUTBOX": "auto", "OUTBOX_DATABASES": ["default", "orders"]}
    data = {"user_id": 80, "plan": "orders"}
    try:
        with override_settings(XJOBS=settings):
            with pytest.raises(RuntimeError), transaction.atomic(using="orders"):
                record = publish_event("user.created", data, using="orders")
                assert record.started == 2
                assert OutboxEntry.objects.using("orders").count() == 2
                raise RuntimeError("rolled back on the orders database")
            assert not JobEvent.objects.using("orders").exists()
            assert not OutboxEntry.objects.using("orders").exists()
            with transaction.atomic(using="orders"):
                record = publish_event("user.created", data, using="orders")
    finally:
        uninstall(driver)
    assert JobEvent.objects.using("orders").get(id=record.id).started == 2
    assert not JobEvent.objects.exists()
    assert Job.objects.filter(name__in=[jobs.welcome.name, jobs.start_plan.name]).count() == 2
