"""Event data encrypted at rest (issue 46, SPEC CRYPT-08, CRYPT-09, CRYPT-11): under
``XJOBS["ENCRYPTION_KEYS"]`` an event's stored data is sealed, while a publish still releases
exactly the waiters its data matches (matched on the data as given) and ``cancel_on`` still
cancels by it; a waiter that looks after the event opens the candidates of its name in the
process. Every case runs on the memory driver AND the PostgreSQL driver (``harness``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_xjobs import crypt, publish_event
from django_xjobs.drivers.postgres import steps as postgres_steps
from django_xjobs.errors import EncryptionKeyMissingError, InputInvalidError
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.drivers.contract.test_events import _park, _released
from tests.test_crypt import EMAIL, NEW, OLD, keys

SHIPPED = {"order_id": 7, "email": EMAIL}


def test_crypt_08_the_data_is_stored_sealed_and_a_publish_matches_its_waiters_in_clear(harness):
    with keys(NEW):
        matched = _park(harness, match={"order_id": 7})
        other = _park(harness, match={"order_id": 8})
        anything = _park(harness)
        record = publish_event("order.shipped", SHIPPED)
        assert record.payload == SHIPPED and record.released == 2  # what it was given, clear
        stored = harness.driver.events().get(record.id).payload
        assert crypt.is_sealed(stored) and EMAIL not in str(stored)
        assert crypt.unseal(stored) == SHIPPED
        assert [_released(harness, j) for j in (matched, other, anything)] == [True, False, True]
        # data of no fields stays as it is: there is nothing in it to hide
        assert harness.driver.events().get(publish_event("order.shipped").id).payload is None


def test_crypt_08_cancel_on_compares_the_events_data_in_clear(harness):
    with keys(NEW):
        closed = jobs.unsubscribe.enqueue(account_id=1).id
        kept = jobs.unsubscribe.enqueue(account_id=2).id
        record = publish_event("account.closed", {"account_id": 1, "email": EMAIL})
        assert record.cancelled == 1
        assert crypt.is_sealed(harness.driver.events().get(record.id).payload)
    assert [harness.row(j).state for j in (closed, kept)] == ["cancelled", "ready"]


def test_crypt_08_data_in_the_shape_of_a_sealed_payload_is_refused():
    with pytest.raises(InputInvalidError, match=crypt.MARK):
        publish_event("order.shipped", {crypt.MARK: "not a token"})


def test_crypt_09_a_later_look_opens_the_candidates_and_takes_the_earliest_match(
    harness, monkeypatch
):
    monkeypatch.setattr(postgres_steps, "CANDIDATES", 2)  # pages of two candidates
    store = harness.driver.events()
    start = harness.driver.steps().now() - timedelta(days=1)
    with keys(NEW):
        for n in (1, 2, 3):
            publish_event("ping", {"n": n, "email": EMAIL})
        first = publish_event("ping", {"n": 4}).id
        publish_event("ping", {"n": 4, "second": True})
        found = store.find("ping", after=start, match={"n": 4})
        assert (found.id, found.payload) == (first, {"n": 4})
        assert store.find("ping", after=start, match={"n": 9}) is None
        assert store.find("ping", after=start, match={"n": "4"}) is None  # equal as JSON is
        assert store.find("ping", after=start).payload == {"n": 1, "email": EMAIL}
        assert store.find("ping", after=start, correlation_key="k") is None


def test_crypt_09_rotation_keeps_matching_and_a_missing_key_is_the_coded_error(harness):
    store = harness.driver.events()
    start = harness.driver.steps().now() - timedelta(days=1)
    with keys(OLD):
        publish_event("ping", {"n": 1})
    with keys(NEW, OLD):  # rotated: the old key still opens
        assert store.find("ping", after=start, match={"n": 1}).payload == {"n": 1}
    with keys(NEW), pytest.raises(EncryptionKeyMissingError):
        store.find("ping", after=start, match={"n": 1})
    with pytest.raises(EncryptionKeyMissingError):  # no keys: received, it cannot be opened
        store.find("ping", after=start)
    # no keys: the database cannot match inside it, and neither does the memory driver
    assert store.find("ping", after=start, match={"n": 1}) is None


def test_crypt_09_a_waiting_run_receives_the_encrypted_event_its_match_names(harness):
    with keys(NEW):
        waiting = jobs.waiter.enqueue(order_id=7).id
        other = jobs.waiter.enqueue(order_id=8).id
        run_until_idle()
        assert [harness.row(j).state for j in (waiting, other)] == ["suspended", "suspended"]
        record = publish_event("order.shipped", SHIPPED)
        assert record.released == 1
        run_until_idle()  # the released run looks again and opens the event's data
        row = harness.row(waiting)
        assert row.state == "done" and crypt.unseal(row.result) == {"got": SHIPPED}
        assert harness.row(other).state == "suspended"
        [step] = harness.driver.steps().list(row.run_id)
        assert crypt.is_sealed(step.output) and crypt.unseal(step.output) == SHIPPED


def test_crypt_11_an_event_published_between_the_look_and_the_park_is_received(
    harness, monkeypatch
):
    """The park cannot match an encrypted event (jobs.sql's suspend): the waiter looks once more
    after writing its waiting record, so one that came in between is not left to event_poll."""
    store = type(harness.driver.events())
    looked = store.find
    seen: list = []

    def find(self, *args, **kwargs):
        found = looked(self, *args, **kwargs)
        if not seen:  # the event commits just after the first look, before the record
            publish_event("order.shipped", SHIPPED)
        seen.append(found)
        return found

    monkeypatch.setattr(store, "find", find)
    with keys(NEW):
        job_id = jobs.waiter.enqueue(order_id=7).id
        run_until_idle()
        row = harness.row(job_id)
        assert row.state == "done" and crypt.unseal(row.result) == {"got": SHIPPED}
    assert seen[0] is None and seen[1].payload == SHIPPED
