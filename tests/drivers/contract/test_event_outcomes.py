"""The driver contract, what a publish does beyond storing its event (issue 43): the event row
counts the runs its statement released and keeps what the publish did before it (SPEC EVT-11),
and the event store cancels the live runs a ``cancel_on`` declaration names (SPEC EVT-09),
fenced against a settle (SPEC EVT-10). Every case runs on the memory driver AND the PostgreSQL
driver through the ``harness`` fixture, with the same answers."""

from __future__ import annotations

import itertools
import uuid
from datetime import timedelta

import pytest

from django_xjobs.drivers.contract import Complete, StepRecord, SuspendUntil
from tests import jobs
from tests.drivers.contract.support import claim

_n = itertools.count(1)
HOUR = 3600.0
LIVE = ("ready", "delayed", "running", "suspended")


def _publish(harness, name="order.shipped", payload=None, **outcome):
    return harness.driver.events().publish(
        id=uuid.uuid4(),
        name=name,
        payload={"order_id": 7} if payload is None else payload,
        correlation_key=None,
        ttl=HOUR,
        **outcome,
    )


def _waiting(harness, *, park: bool):
    """A run whose waiting step for ``order.shipped`` is written: parked, or still running."""
    job_id = jobs.ok.enqueue(n=next(_n)).id
    [job] = [j for j in claim(harness.driver) if j.id == job_id]
    record = StepRecord(
        run_id=job.run_id,
        name="shipped",
        status="waiting",
        started_at=harness.driver.steps().now() - timedelta(seconds=1),
        event="order.shipped",
        position=0,
    )
    assert harness.driver.steps().put(record, job_id=job.id, lease_token=job.lease_token)
    if park:
        harness.driver.runs().suspend(SuspendUntil(job.id, job.lease_token, delay=HOUR))
    return job


def test_evt_11_the_event_counts_the_runs_it_released_parked_or_parking(harness):
    _waiting(harness, park=True)
    _waiting(harness, park=True)
    _waiting(harness, park=False)  # marked: its park is due at once
    record = _publish(harness)
    assert (record.released, record.started, record.cancelled, record.refused) == (3, 0, 0, ())
    # the parked ones are ready now; the one still parking is marked again
    assert _publish(harness).released == 1


def test_evt_11_the_event_keeps_what_its_publish_did(harness):
    refused = [{"job": "shop.jobs.x", "code": "X_INPUT_INVALID", "message": "no plan"}]
    record = _publish(harness, started=2, cancelled=3, refused=refused)
    assert (record.started, record.cancelled, [dict(r) for r in record.refused]) == (
        2,
        3,
        refused,
    )
    found = harness.driver.events().find("order.shipped", after=record.published_at)
    assert found is not None and found.id == record.id
    assert (found.released, found.started, found.cancelled) == (0, 2, 3)
    assert [dict(r) for r in found.refused] == refused


def _run_in(harness, state: str, order_id: object, tenant: str | None = None, **more):
    """A run of ``order_id`` in ``state`` (a ``takes_kwargs`` job: two runs may share an order),
    made before any other is ready; its id, and its claim when it has one."""
    handle = jobs.takes_kwargs if tenant is None else jobs.takes_kwargs.using(tenant_id=tenant)
    if state == "delayed":
        handle = handle.using(delay=HOUR)
    job_id = handle.enqueue(order_id=order_id, **more).id
    job = None
    if state in ("running", "suspended", "done"):
        [job] = claim(harness.driver)
    if state == "suspended":
        assert harness.driver.runs().suspend(SuspendUntil(job.id, job.lease_token, delay=HOUR))
    if state == "done":
        harness.driver.runs().complete([Complete(job.id, job.lease_token)])
    assert harness.row(job_id).state == state
    return job_id, job


def _cancel(harness, match, tenant=None, reason="cancelled by event 'order.cancelled' (e1)"):
    events = harness.driver.events()
    count, _ = events.cancel(jobs.takes_kwargs.name, tenant_id=tenant, match=match, reason=reason)
    return count


@pytest.mark.parametrize("state", LIVE)
def test_evt_09_the_store_cancels_a_matching_run_in_each_live_state(harness, state):
    job_id, _ = _run_in(harness, state, order_id=41)
    assert _cancel(harness, {"order_id": 41}) == 1
    row = harness.row(job_id)
    assert (row.state, row.stop_reason, row.lease_token) == ("cancelled", "cancelled", None)
    assert row.last_error == "cancelled by event 'order.cancelled' (e1)"
    assert _cancel(harness, {"order_id": 41}) == 0  # cancelled once


def test_evt_09_the_store_cancels_only_equal_inputs_of_that_job_and_tenant(harness):
    done, _ = _run_in(harness, "done", order_id=7, n=0)
    mine = [_run_in(harness, "suspended", order_id=7, n=1)[0]]
    mine.append(_run_in(harness, "ready", order_id=7, n=2)[0])
    others = [
        _run_in(harness, "ready", order_id=9)[0],
        _run_in(harness, "ready", order_id="7")[0],  # a string is not the number
        _run_in(harness, "ready", order_id=[7])[0],  # a list holding it is not equal to it
        _run_in(harness, "ready", order_id=True)[0],  # nor is a bool
        _run_in(harness, "ready", order_id=7, tenant="A")[0],
        jobs.waiter.enqueue(order_id=7).id,  # another job
    ]
    assert _cancel(harness, {"order_id": 7}) == 2
    assert [harness.row(j).state for j in mine] == ["cancelled", "cancelled"]
    assert harness.row(done).state == "done"
    assert {harness.row(j).state for j in others} == {"ready"}
    assert _cancel(harness, {"order_id": 7}, tenant="B") == 0
    assert _cancel(harness, {"order_id": 7}, tenant="A") == 1
    assert harness.row(others[-2]).state == "cancelled"
    assert _cancel(harness, {"order_id": 1.0}) == 0 and _cancel(harness, {"order_id": 9.0}) == 1
    wider = _run_in(harness, "ready", order_id=[7, 8])[0]  # contains [7]; is not equal to it
    assert _cancel(harness, {"order_id": [7]}) == 1
    assert (harness.row(others[2]).state, harness.row(wider).state) == ("cancelled", "ready")


def test_cancel_07_the_store_names_the_parked_and_running_runs_it_cancelled(harness):
    """SPEC CANCEL-07: the runs that may be parents waiting on children come back, in id
    order, for the caller to cancel their children; a waiting run never parked does not."""
    order = ("running", "suspended", "ready", "delayed")  # each claim takes the one made last
    ids = {state: _run_in(harness, state, order_id=12, n=n)[0] for n, state in enumerate(order)}
    count, parked = harness.driver.events().cancel(
        jobs.takes_kwargs.name, tenant_id=None, match={"order_id": 12}, reason="by event"
    )
    assert (count, parked) == (4, sorted([ids["running"], ids["suspended"]]))
    assert harness.driver.events().cancel(
        jobs.takes_kwargs.name, tenant_id=None, match={"order_id": 12}, reason="by event"
    ) == (0, [])


def test_evt_10_a_cancel_after_a_settle_leaves_the_settled_run(harness):
    job_id, job = _run_in(harness, "running", order_id=5)
    assert harness.driver.runs().complete([Complete(job.id, job.lease_token)]) == {job.id}
    assert _cancel(harness, {"order_id": 5}) == 0
    assert harness.row(job_id).state == "done"


def test_evt_10_a_settle_after_a_cancel_is_refused(harness):
    job_id, job = _run_in(harness, "running", order_id=6)
    assert _cancel(harness, {"order_id": 6}) == 1
    assert harness.driver.runs().complete([Complete(job.id, job.lease_token)]) == set()
    assert not harness.driver.runs().heartbeat(job.id, job.lease_token, 30)
    row = harness.row(job_id)
    assert (row.state, row.stop_reason) == ("cancelled", "cancelled")
