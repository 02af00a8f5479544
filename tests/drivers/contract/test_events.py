"""The driver contract, events: a publish releases the runs parked on a step it answers, in the
same statement (issue 43, SPEC EVT-06), by the rule a waiting step finds an event by (EVT-02).
Every case runs on the memory driver AND the PostgreSQL driver through the ``harness`` fixture,
asserting the same answers; the rollback case is the PostgreSQL driver's alone (the memory
driver has no transaction)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import transaction

from django_xjobs import publish_event
from django_xjobs.drivers import create, install, uninstall
from django_xjobs.drivers.contract import StepRecord, SuspendUntil
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.declarations.test_enqueue_many import own_connection, wake_ups
from tests.drivers.contract.support import claim

_n = itertools.count()
HOUR = 3600.0


def _park(
    harness,
    *,
    event="order.shipped",
    tenant=None,
    match=None,
    correlation_key=None,
    any_tenant=False,
    reached=-1.0,
):
    """A run parked an hour on a waiting step, first reached ``reached`` seconds from now, as
    ``ctx.step.wait_for_event`` leaves it; its job id."""
    handle = jobs.ok if tenant is None else jobs.ok.using(tenant_id=tenant)
    job_id = handle.enqueue(n=next(_n)).id
    [job] = [j for j in claim(harness.driver) if j.id == job_id]
    now = harness.driver.steps().now()
    record = StepRecord(
        run_id=job.run_id,
        name="shipped",
        status="waiting",
        started_at=now + timedelta(seconds=reached),
        output={"match": match},
        wake_at=now + timedelta(seconds=HOUR),
        event=event,
        correlation_key=correlation_key,
        position=0,
        match=match,
        any_tenant=any_tenant,
    )
    assert harness.driver.steps().put(record, job_id=job.id, lease_token=job.lease_token)
    harness.driver.runs().suspend(SuspendUntil(job.id, job.lease_token, delay=HOUR))
    assert harness.row(job_id).state == "suspended"
    return job_id


def _released(harness, job_id) -> bool:
    row = harness.row(job_id)
    if row.state == "suspended":
        return False
    assert row.state == "ready"
    assert row.run_at <= harness.driver.steps().now()
    return True


def test_evt_06_a_publish_releases_the_matching_waiters_at_once(harness):
    plain = _park(harness)
    matched = _park(harness, match={"order_id": 7})
    keyed = _park(harness, correlation_key="order-7")
    publish_event("order.shipped", {"order_id": 7, "carrier": "ups"}, correlation_key="order-7")
    assert [_released(harness, j) for j in (plain, matched, keyed)] == [True, True, True]


def test_evt_06_a_publish_leaves_the_waiters_it_does_not_answer(harness):
    other_name = _park(harness, event="order.paid")
    other_match = _park(harness, match={"order_id": 8})
    other_key = _park(harness, correlation_key="order-8")
    other_tenant = _park(harness, tenant="B")
    later = _park(harness, reached=+60)  # first reached after the event was published
    publish_event("order.shipped", {"order_id": 7}, correlation_key="order-7")
    parked = (other_name, other_match, other_key, other_tenant, later)
    assert [_released(harness, j) for j in parked] == [False] * 5


def test_evt_06_tenants_release_as_find_matches_them(harness):
    mine = _park(harness, tenant="A")
    none = _park(harness)
    anyone = _park(harness, tenant="C", any_tenant=True)
    publish_event("order.shipped", {"order_id": 1}, tenant_id="A")
    assert [_released(harness, j) for j in (mine, none, anyone)] == [True, False, True]
    publish_event("order.shipped", {"order_id": 1})  # no tenant: only a waiter without one
    assert _released(harness, none)


def test_evt_06_match_fields_are_equal_and_typed_as_find_compares_them(harness):
    strings = _park(harness, match={"order_id": "7"})
    flags = _park(harness, match={"paid": True})
    both = _park(harness, match={"order_id": 7, "paid": True})
    publish_event("order.shipped", {"order_id": 7, "paid": 1})
    assert [_released(harness, j) for j in (strings, flags, both)] == [False, False, False]
    publish_event("order.shipped", {"order_id": 7, "paid": True, "extra": [1]})
    assert [_released(harness, j) for j in (strings, flags, both)] == [False, True, True]


@pytest.mark.parametrize("data", [None, [1, 2], "text"])
def test_evt_02_06_a_waiter_without_match_takes_an_event_of_any_data(harness, data):
    """No match takes any data, an object or not, on both drivers: found and released."""
    job_id = _park(harness)
    after = harness.driver.steps().now() - timedelta(seconds=5)
    publish_event("order.shipped", data)
    assert _released(harness, job_id)
    assert harness.driver.events().find("order.shipped", after=after).payload == data
    assert harness.driver.events().find("order.shipped", after=after, match={"a": 1}) is None


def _parking(harness, *, match=None):
    """A run that has written its waiting step, first reached a second ago, and not parked
    yet: the claimed job."""
    jobs.ok.enqueue(n=next(_n))
    [job] = claim(harness.driver)
    now = harness.driver.steps().now()
    record = StepRecord(
        run_id=job.run_id,
        name="shipped",
        status="waiting",
        started_at=now - timedelta(seconds=1),
        event="order.shipped",
        match=match,
    )
    assert harness.driver.steps().put(record, job_id=job.id, lease_token=job.lease_token)
    return job


def test_evt_06_a_publish_while_the_waiter_parks_makes_its_park_due_now(harness):
    """The event comes after the step looked and before the run parked: the park is due at
    once (a publish that sees the running run marks it), not at its next look an hour away."""
    job = _parking(harness, match={"order_id": 7})
    other = _parking(harness, match={"order_id": 8})
    publish_event("order.shipped", {"order_id": 7})
    assert harness.row(job.id).state == "running"  # a running run is not released
    for parked in (job, other):
        harness.driver.runs().suspend(SuspendUntil(parked.id, parked.lease_token, delay=HOUR))
    assert _released(harness, job.id) is False  # parked, and due now
    assert harness.row(job.id).run_at <= harness.driver.steps().now()
    assert harness.row(other.id).run_at > harness.driver.steps().now() + timedelta(minutes=59)


def test_evt_06_an_event_from_before_the_waiting_write_makes_the_park_due_now(harness):
    """Published after the step was first reached but before its waiting record was written
    (the publish could not see it): the park finds the event and is due at once."""
    jobs.ok.enqueue(n=next(_n))
    [job] = claim(harness.driver)
    now = harness.driver.steps().now()
    publish_event("order.shipped", {"order_id": 7})
    record = StepRecord(
        run_id=job.run_id,
        name="shipped",
        status="waiting",
        started_at=now - timedelta(seconds=1),
        event="order.shipped",
        match={"order_id": 7},
    )
    assert harness.driver.steps().put(record, job_id=job.id, lease_token=job.lease_token)
    harness.driver.runs().suspend(SuspendUntil(job.id, job.lease_token, delay=HOUR))
    assert harness.row(job.id).run_at <= harness.driver.steps().now()


def test_evt_06_a_sleep_parks_for_its_delay_whatever_was_published(harness):
    jobs.ok.enqueue(n=next(_n))
    [job] = claim(harness.driver)
    publish_event("order.shipped", {"order_id": 7})
    harness.driver.runs().suspend(SuspendUntil(job.id, job.lease_token, delay=HOUR))
    assert harness.row(job.id).run_at > harness.driver.steps().now() + timedelta(minutes=59)


def test_evt_06_only_a_parked_run_is_released(harness):
    """A run already due or running keeps its state and time: the release is for parked runs."""
    job_id = _park(harness)
    [job] = [j for j in claim(harness.driver) if j.id == job_id] or [None]
    assert job is None  # parked an hour: not claimable yet
    harness.advance(HOUR + 1)  # due now: a claim takes it, running
    [job] = [j for j in claim(harness.driver) if j.id == job_id]
    publish_event("order.shipped", {"order_id": 1})
    row = harness.row(job_id)
    assert (row.state, row.lease_token) == ("running", job.lease_token)


def test_evt_06_the_released_step_returns_the_events_data(harness):
    """End to end with the default event_poll (30 s): released, the run is claimed at once, with
    no time moved, and its step returns the payload."""
    job_id = jobs.waiter_default_poll.enqueue(order_id=5).id
    run_until_idle()
    assert harness.row(job_id).state == "suspended"
    assert run_until_idle() == []  # parked for its poll: nothing due
    publish_event("order.shipped", {"order_id": 5, "carrier": "dhl"})
    [execution] = run_until_idle()
    row = harness.row(job_id)
    assert (execution.outcome, row.state) == ("completed", "done")
    assert row.result == {"order_id": 5, "carrier": "dhl"}


def test_evt_06_a_waiter_stores_what_it_is_released_by(harness):
    job_id = jobs.tenant_waiter.using(tenant_id="A").enqueue(order_id=3, any_tenant=True).id
    run_until_idle()
    [step] = harness.driver.steps().list(harness.row(job_id).run_id)
    assert (step.status, step.event, step.match, step.any_tenant) == (
        "waiting",
        "order.shipped",
        {"order_id": 3},
        True,
    )
    publish_event("order.shipped", {"order_id": 3}, tenant_id="B")
    assert _released(harness, job_id)


def test_evt_06_a_step_waiting_without_its_match_gets_it_at_its_next_write(harness):
    """A step waiting since before migration 0026 has no match: the next write stores it, and
    a later one does not replace it (the first kept, as the event is)."""
    jobs.ok.enqueue(n=next(_n))
    [job] = claim(harness.driver)
    step = StepRecord(run_id=job.run_id, name="shipped", status="waiting", event="order.shipped")
    for match in (None, {"order_id": 1}, {"order_id": 2}):
        put = replace(step, match=match)
        assert harness.driver.steps().put(put, job_id=job.id, lease_token=job.lease_token)
    [stored] = harness.driver.steps().list(job.run_id)
    assert stored.match == {"order_id": 1}


@pytest.fixture
def postgres(transactional_db):
    driver = create("postgres")
    install(driver)
    try:
        yield driver
    finally:
        uninstall(driver)


class _Harness:
    def __init__(self, driver):
        self.driver = driver

    def row(self, job_id):
        return self.driver.reads().get_job(job_id)


def test_evt_06_a_rolled_back_publish_releases_nothing(postgres):
    """Nothing is released, and no worker woken, unless the publisher commits; then the
    workers of the released runs' queue are woken once, as a settle's release wakes them."""
    harness = _Harness(postgres)
    first, second = _park(harness), _park(harness)
    with own_connection() as listener, own_connection() as other:
        listener.execute("LISTEN xjobs")
        with pytest.raises(RuntimeError), transaction.atomic():
            publish_event("order.shipped", {"order_id": 1})
            raise RuntimeError("the caller's transaction fails")
        assert wake_ups(listener, other) == []
        assert [harness.row(j).state for j in (first, second)] == ["suspended", "suspended"]
        after = harness.row(first).created_at
        assert postgres.events().find("order.shipped", after=after) is None
        with transaction.atomic():
            publish_event("order.shipped", {"order_id": 1})
            assert wake_ups(listener, other) == []  # not before the commit
        assert wake_ups(listener, other) == ["default"]  # once for the queue, at the commit
        publish_event("order.shipped", {"order_id": 2})  # no waiter left: no wake-up
        assert wake_ups(listener, other) == []
    assert _released(harness, first) and _released(harness, second)
