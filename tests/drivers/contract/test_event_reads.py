"""The driver contract, the operator's reads of events (issue 43 item 4, SPEC EVT-13): the live
events newest first with what each publish did, and one event with its data. Every case runs on
the memory driver AND the PostgreSQL driver through the ``harness`` fixture."""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from datetime import timedelta

from django_xjobs import publish_event
from django_xjobs.ids import uuid7
from django_xjobs.models import JobEvent
from django_xjobs.testing import age_events

REFUSED = {"job": "tests.jobs.ok", "code": "X_INPUT_INVALID", "message": "no n in the data"}


def record_outcomes(driver, event_id, **outcomes) -> None:
    """What a publish did, written on the event as the publish writes it (issue 43 items 2-3):
    through the ORM on PostgreSQL, on the stored record in memory."""
    store = driver.events()
    stored = getattr(store, "_events", None)
    if stored is None:
        assert JobEvent.objects.filter(id=event_id).update(**outcomes) == 1
        return
    if "refused" in outcomes:
        outcomes["refused"] = tuple(outcomes["refused"])
    store._events = deque(
        (replace(e, **outcomes) if e.id == event_id else e for e in stored), maxlen=stored.maxlen
    )


def _ids(records) -> list:
    return [r.id for r in records]


def test_evt_13_recent_lists_live_events_newest_first_narrowed_by_name_tenant_and_time(harness):
    driver = harness.driver
    oldest = publish_event("order.shipped", {"order_id": 1}, tenant_id="acme").id
    age_events(driver, 60)
    middle = publish_event("order.shipped", {"order_id": 2}).id
    age_events(driver, 30)
    newest = publish_event("user.created", {"user_id": 3}, tenant_id="acme").id
    store = driver.events()
    assert _ids(store.recent()) == [newest, middle, oldest]
    assert _ids(store.recent(name="order.shipped")) == [middle, oldest]
    assert _ids(store.recent(tenant_id="acme")) == [newest, oldest]
    assert _ids(store.recent(name="order.shipped", tenant_id="acme")) == [oldest]
    assert _ids(store.recent(limit=2)) == [newest, middle]
    since = driver.steps().now() - timedelta(seconds=45)
    assert _ids(store.recent(since=since)) == [newest, middle]
    assert store.recent(name="nothing.of.the.kind") == []
    # a list reads what each publish did, never the data
    assert {r.payload for r in store.recent()} == {None}


def test_evt_13_events_published_at_one_time_list_newest_id_first(harness):
    """PostgreSQL's now() is the transaction's: events published in one transaction share it,
    and the later id comes first, as the memory driver lists them."""
    first = publish_event("tick", {"n": 1}).id
    second = publish_event("tick", {"n": 2}).id
    assert _ids(harness.driver.events().recent(name="tick")) == [second, first]


def test_evt_13_get_reads_the_data_and_what_the_publish_did(harness):
    driver = harness.driver
    event = publish_event("order.shipped", {"order_id": 7, "carrier": "ups"}, correlation_key="o-7")
    record_outcomes(driver, event.id, released=2, started=1, cancelled=3, refused=[REFUSED])
    found = driver.events().get(event.id)
    assert found is not None
    assert (found.name, found.payload, found.correlation_key) == (
        "order.shipped",
        {"order_id": 7, "carrier": "ups"},
        "o-7",
    )
    assert (found.released, found.started, found.cancelled) == (2, 1, 3)
    assert [dict(r) for r in found.refused] == [REFUSED]
    assert found.published_at == event.published_at and found.expires_at == event.expires_at
    [listed] = driver.events().recent()
    assert (listed.released, listed.started, listed.cancelled) == (2, 1, 3)
    assert [dict(r) for r in listed.refused] == [REFUSED]


def test_evt_13_an_event_that_did_nothing_reads_zero_and_no_refusals(harness):
    event = publish_event("nobody.listens")
    found = harness.driver.events().get(event.id)
    assert found is not None and found.payload is None
    assert (found.released, found.started, found.cancelled, found.refused) == (0, 0, 0, ())


def test_evt_13_an_expired_event_is_neither_listed_nor_found(harness):
    driver = harness.driver
    gone = publish_event("short.lived", {"n": 1}, ttl="1m").id
    kept = publish_event("long.lived", {"n": 2}, ttl="1h").id
    age_events(driver, 61)
    assert _ids(driver.events().recent()) == [kept]
    assert driver.events().get(gone) is None
    assert driver.events().get(kept) is not None
    assert driver.events().get(uuid7()) is None


def test_evt_13_what_a_read_answers_is_the_callers_to_keep(harness):
    """Changing a payload or a refusal read from the store changes nothing stored."""
    event = publish_event("order.shipped", {"order_id": 7})
    record_outcomes(harness.driver, event.id, refused=[REFUSED])
    found = harness.driver.events().get(event.id)
    found.payload["order_id"] = 8
    found.refused[0]["job"] = "changed"
    again = harness.driver.events().get(event.id)
    assert again.payload == {"order_id": 7} and dict(again.refused[0]) == REFUSED
