"""Events are scoped to a tenant (issue 26, item 4): ``publish_event(..., tenant_id=...)``
wakes only waiters whose run belongs to that tenant; a run with no tenant matches events with
no tenant; ``wait_for_event(..., any_tenant=True)`` is the explicit way across. On both drivers
(the ``harness`` fixture)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_xjobs import publish_event
from django_xjobs.clock import FrozenClock
from django_xjobs.testing import run_to_completion, run_until_idle
from tests import jobs


@pytest.fixture
def clock():
    return FrozenClock(timezone.now())


def _waiting(harness, job_id) -> bool:
    row = harness.row(job_id)
    return [s.status for s in harness.driver.steps().list(row.run_id)] == ["waiting"]


def _still_waits_after_polls(harness, job_id, clock) -> bool:
    with pytest.raises(AssertionError, match="did not finish"):
        run_to_completion(job_id, clock=clock, max_rounds=3)
    return _waiting(harness, job_id)


def test_the_store_finds_only_the_waiters_tenant_unless_asked_for_any(harness):
    store = harness.driver.events()
    after = harness.driver.steps().now() - timedelta(seconds=1)
    publish_event("order.shipped", {"order_id": 42, "by": "b"}, tenant_id="B")
    publish_event("order.shipped", {"order_id": 42, "by": "none"})
    match = {"order_id": 42}
    assert store.find("order.shipped", after=after, match=match, tenant_id="A") is None
    found_b = store.find("order.shipped", after=after, match=match, tenant_id="B")
    assert found_b.payload["by"] == "b" and found_b.tenant_id == "B"
    assert store.find("order.shipped", after=after, match=match).payload["by"] == "none"
    anyone = store.find("order.shipped", after=after, match=match, any_tenant=True)
    assert anyone.payload["by"] == "b"  # the earliest of every tenant's


def test_another_tenants_event_does_not_wake_a_waiter(harness, clock):
    job_id = jobs.tenant_waiter.using(tenant_id="A").enqueue(order_id=42).id
    run_until_idle(clock=clock)
    assert _waiting(harness, job_id)
    publish_event("order.shipped", {"order_id": 42, "from": "B"}, tenant_id="B")
    publish_event("order.shipped", {"order_id": 42, "from": None})  # no tenant: not A's either
    assert _still_waits_after_polls(harness, job_id, clock)
    publish_event("order.shipped", {"order_id": 42, "from": "A"}, tenant_id="A")
    run_to_completion(job_id, clock=clock)
    assert harness.row(job_id).result == {"got": {"order_id": 42, "from": "A"}}


def test_a_run_without_a_tenant_matches_events_without_one(harness, clock):
    job_id = jobs.tenant_waiter.enqueue(order_id=7).id
    run_until_idle(clock=clock)
    publish_event("order.shipped", {"order_id": 7, "from": "B"}, tenant_id="B")
    assert _still_waits_after_polls(harness, job_id, clock)
    publish_event("order.shipped", {"order_id": 7, "from": None})
    run_to_completion(job_id, clock=clock)
    assert harness.row(job_id).result == {"got": {"order_id": 7, "from": None}}


def test_any_tenant_is_the_explicit_way_across(harness, clock):
    job_id = jobs.tenant_waiter.using(tenant_id="A").enqueue(order_id=9, any_tenant=True).id
    run_until_idle(clock=clock)
    publish_event("order.shipped", {"order_id": 9, "from": "B"}, tenant_id="B")
    run_to_completion(job_id, clock=clock)
    assert harness.row(job_id).result == {"got": {"order_id": 9, "from": "B"}}


def test_an_event_published_inside_a_run_takes_the_runs_tenant(harness, clock):
    waiter = jobs.tenant_waiter.using(tenant_id="A").enqueue(order_id=5).id
    run_until_idle(clock=clock)
    jobs.publisher.using(tenant_id="B").enqueue(order_id=5)
    assert _still_waits_after_polls(harness, waiter, clock)
    jobs.publisher.using(tenant_id="A").enqueue(order_id=6)  # another order: no match either
    jobs.publisher.using(tenant_id="A").enqueue(order_id=5)
    run_to_completion(waiter, clock=clock)
    assert harness.row(waiter).result == {"got": {"order_id": 5, "from": "A"}}


def test_a_bad_tenant_id_is_refused(harness):
    from django_xjobs.errors import InvariantError

    for bad in ("", 3):
        with pytest.raises(InvariantError):
            publish_event("order.shipped", {}, tenant_id=bad)


def test_run_to_completion_publishes_its_events_for_the_waiting_runs_tenant(harness, clock):
    job_id = jobs.tenant_waiter.using(tenant_id="A").enqueue(order_id=11).id
    run_to_completion(job_id, clock=clock, events={"order.shipped": {"order_id": 11}})
    assert harness.row(job_id).result == {"got": {"order_id": 11}}


@pytest.mark.parametrize("tenant", ["acme\x00", "acme\udc80"])
def test_a_tenant_id_a_store_cannot_hold_is_refused_with_a_code(harness, tenant):
    """Issue 40: ``publish_event(tenant_id=)`` with a NUL or a lone surrogate raised the
    driver's own error (on PostgreSQL; memory stored it) instead of a coded one."""
    from django_xjobs.errors import InvariantError

    with pytest.raises(InvariantError, match="tenant_id contains a"):
        publish_event("order.shipped", {"order_id": 1}, tenant_id=tenant)
    epoch = timezone.now() - timedelta(days=1)
    assert harness.driver.events().find("order.shipped", after=epoch, any_tenant=True) is None
