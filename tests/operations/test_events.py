"""The operator API's events (issue 43 item 4): ``list_events`` and ``inspect_event`` answer the
same on both drivers (SPEC EVT-13), and refuse bad arguments with one coded line."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.test import override_settings

from django_xjobs import inspect_event, list_events, publish_event
from django_xjobs.errors import XJobsError
from django_xjobs.operations.answers import EventReport, EventSummary, json_default
from django_xjobs.testing import age_events
from tests.drivers.contract.test_event_reads import REFUSED, record_outcomes


def test_evt_13_list_events_answers_each_event_with_its_age_and_what_it_did(harness):
    first = publish_event("order.shipped", {"order_id": 1}, tenant_id="acme").id
    age_events(harness.driver, 90)
    second = publish_event("order.shipped", {"order_id": 2}, correlation_key="o-2").id
    record_outcomes(harness.driver, first, released=1, started=2, cancelled=3, refused=[REFUSED])
    rows = list_events()
    assert [r.id for r in rows] == [str(second), str(first)]
    assert all(isinstance(r, EventSummary) for r in rows)
    older = rows[1]
    assert (older.name, older.tenant_id, older.correlation_key) == ("order.shipped", "acme", None)
    assert (older.released, older.started, older.cancelled, older.refused) == (1, 2, 3, 1)
    assert 90 <= older.age_seconds < 120  # on the store's clock, as published_at is
    assert 0 <= rows[0].age_seconds < 30 and rows[0].correlation_key == "o-2"
    assert datetime.fromisoformat(older.published_at) < datetime.fromisoformat(older.expires_at)
    document = json.loads(json.dumps(rows, default=json_default))
    assert document[1] == older.to_json() and document[1]["refused"] == 1
    assert "payload" not in document[1]


def test_evt_13_list_events_narrows_by_name_tenant_since_and_limit(harness):
    acme = publish_event("user.created", {"user_id": 1}, tenant_id="acme").id
    age_events(harness.driver, 600)
    other = publish_event("user.created", {"user_id": 2}, tenant_id="globex").id
    shipped = publish_event("order.shipped", {"order_id": 3}).id
    assert [r.id for r in list_events(name="user.created")] == [str(other), str(acme)]
    assert [r.id for r in list_events(tenant_id="acme")] == [str(acme)]
    assert [r.id for r in list_events(limit=1)] == [str(shipped)]
    recent = harness.driver.steps().now() - timedelta(minutes=5)
    assert {r.id for r in list_events(since=recent)} == {str(other), str(shipped)}
    assert list_events(name="nothing.published") == []


def test_evt_13_inspect_event_shows_the_data_masked_and_each_refusal(harness):
    event = publish_event("user.created", {"user_id": 7, "api_token": "s3cr3t-value"})
    record_outcomes(harness.driver, event.id, started=1, refused=[REFUSED])
    report = inspect_event(str(event.id))
    assert isinstance(report, EventReport)
    assert report.payload == {"user_id": 7, "api_token": "[redacted]"}
    assert (report.started, report.refused) == (1, 1)
    assert [r.to_json() for r in report.refusals] == [REFUSED]
    assert inspect_event(event.id, reveal=True).payload["api_token"] == "s3cr3t-value"
    assert report.to_json()["refusals"] == [REFUSED]
    with override_settings(XJOBS={**settings.XJOBS, "REDACT_KEYS": ["user_id"]}):
        shown = inspect_event(event.id).payload
    assert shown == {"user_id": "[redacted]", "api_token": "s3cr3t-value"}


@pytest.mark.parametrize("wanted", ["not-an-id", "", "01a24e8c-44c9-7349-bc1c-fdc929f3ecfa"])
def test_evt_13_inspect_event_of_no_live_event_is_one_coded_error(harness, wanted):
    with pytest.raises(XJobsError) as caught:
        inspect_event(wanted)
    assert caught.value.code == "X_EVENT_NOT_FOUND" and caught.value.hint


def test_evt_13_an_expired_event_is_not_found(harness):
    event = publish_event("short.lived", ttl="1m")
    age_events(harness.driver, 61)
    assert list_events() == []
    with pytest.raises(XJobsError, match="X_EVENT_NOT_FOUND"):
        inspect_event(event.id)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"limit": 0},
        {"limit": -1},
        {"limit": "5"},
        {"limit": True},
        {"name": ""},
        {"name": 7},
        {"name": "a\x00b"},
        {"tenant_id": ""},
        {"since": datetime(2026, 1, 1)},  # naive: which zone is it?
        {"since": "1h"},
    ],
)
def test_evt_13_list_events_refuses_a_bad_argument_before_reading(kwargs):
    with pytest.raises(XJobsError) as caught:
        list_events(**kwargs)
    assert caught.value.code == "X_INVARIANT"
