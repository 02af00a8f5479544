"""``manage.py xjobs events`` (issue 43 item 4, SPEC EVT-14): the recent events with what each
publish did, one event with its data and refusals, ``--json`` as the operator API answers, and
each bad argument refused with one coded line."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from django_xjobs import inspect_event, list_events, publish_event
from django_xjobs.drivers import get_driver
from django_xjobs.testing import age_events
from tests.drivers.contract.test_event_reads import REFUSED, record_outcomes


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


def test_evt_14_events_prints_a_table_newest_first_with_what_each_publish_did(db):
    older = publish_event("order.shipped", {"order_id": 1}, tenant_id="acme").id
    age_events(get_driver(), 125)
    newer = publish_event("user.created", {"user_id": 2}).id
    record_outcomes(get_driver(), older, released=4, started=2, cancelled=1, refused=[REFUSED])
    lines = xjobs("events").splitlines()
    assert lines[0].split() == [
        "id", "name", "tenant", "age", "released", "started", "cancelled", "refused"
    ]  # fmt: skip
    assert [line.split()[0] for line in lines[1:]] == [str(newer), str(older)]
    assert lines[2].split()[1:] == ["order.shipped", "acme", "2m", "5s", "4", "2", "1", "1"]
    assert lines[1].split()[1:3] == ["user.created", "-"]
    named = xjobs("events", "--name", "order.shipped").splitlines()
    assert [line.split()[0] for line in named[1:]] == [str(older)]
    tenant = xjobs("events", "--tenant", "acme", "--limit", "1").splitlines()
    assert [line.split()[0] for line in tenant[1:]] == [str(older)]
    assert xjobs("events", "--limit", "1").splitlines()[1].startswith(str(newer))


def test_evt_14_events_json_is_the_operator_apis_answer(db):
    publish_event("order.shipped", {"order_id": 1}, tenant_id="acme")
    publish_event("user.created", {"user_id": 2})
    printed = json.loads(xjobs("events", "--json"))
    assert printed == [e.to_json() for e in list_events()]
    assert [e["name"] for e in printed] == ["user.created", "order.shipped"]
    assert set(printed[0]) >= {"id", "name", "tenant_id", "age_seconds", "released", "refused"}
    assert json.loads(xjobs("events", "--json", "--name", "nothing")) == []


def test_evt_14_one_event_shows_its_data_masked_and_each_refusal(db):
    event = publish_event("user.created", {"user_id": 7, "api_token": "s3cr3t-value"})
    record_outcomes(get_driver(), event.id, started=1, refused=[REFUSED])
    text = xjobs("events", str(event.id))
    assert text.startswith(f"user.created  {event.id}")
    assert "s3cr3t-value" not in text and '"api_token": "[redacted]"' in text
    assert "started    1 job(s)" in text
    assert f"    {REFUSED['job']}  {REFUSED['code']}: {REFUSED['message']}" in text
    shown = json.loads(xjobs("events", str(event.id), "--json"))
    assert shown == inspect_event(event.id).to_json() and shown["refusals"] == [REFUSED]
    revealed = json.loads(xjobs("events", str(event.id), "--json", "--reveal"))
    assert revealed["payload"]["api_token"] == "s3cr3t-value"
    assert "refused: none" in xjobs("events", str(publish_event("quiet").id))


def test_evt_14_no_events_says_so(db):
    assert xjobs("events").strip() == "no live events"
    publish_event("order.shipped")
    said = xjobs("events", "--name", "user.created").strip()
    assert said == "no live events of that name or tenant"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("--limit", "0"), "X_INVARIANT"),
        (("--limit", "-3"), "X_INVARIANT"),
        (("--limit", "ten"), "X_INVARIANT"),
        (("--limit", "1001"), "X_INVARIANT"),
        (("--tenant", ""), "X_INVARIANT"),
        (("--name", ""), "X_INVARIANT"),
        (("not-an-event-id",), "X_EVENT_NOT_FOUND"),
        (("0197a3c2-5b1e-7c4d-9f00-1a2b3c4d5e6f",), "X_EVENT_NOT_FOUND"),
        (("0197a3c2-5b1e-7c4d-9f00-1a2b3c4d5e6f", "--name", "x"), "X_INVARIANT"),
    ],
)
def test_evt_14_a_bad_argument_is_one_coded_line(db, args, code):
    with pytest.raises(CommandError) as caught:
        xjobs("events", *args)
    message = str(caught.value)
    assert message.startswith(code) and "\n" not in message and " — " in message
