"""What a job declares events do to it (issue 43, SPEC EVT-12): ``on_event`` and ``cancel_on``
are checked when the job is declared, each mistake a coded one-line ``JobDefinitionError`` with
a hint, and the registry answers which declarations an event name starts or cancels."""

from __future__ import annotations

import pytest

from django_xjobs import JobDefinitionError, job
from django_xjobs.declarations.registry import event_declarations
from tests import jobs
from tests.declarations.test_job import handler, job_names  # noqa: F401 (a fixture)


def takes_any(ctx, **inputs):
    return inputs


@pytest.mark.parametrize(
    ("on_event", "fragment"),
    [
        ("", "not an event name"),
        ("   ", "not an event name"),
        (5, "must be an event name"),
        ([], "must be an event name"),
        (["user.created", ""], "on_event[1]"),
        (["user.created", None], "on_event[1]"),
        ({"user.created"}, "must be an event name"),
        ("bad\x00name", "NUL"),
    ],
)
def test_evt_12_a_bad_on_event_is_refused_at_declaration(on_event, fragment, job_names):  # noqa: F811
    job_names.append("test_triggers.bad")
    with pytest.raises(JobDefinitionError) as caught:
        job(name="test_triggers.bad", idempotency_key="k:{order_id}", on_event=on_event)(handler)
    error = caught.value
    assert (error.code, "\n" in str(error)) == ("X_INVARIANT", False)
    assert fragment in error.message and error.hint


@pytest.mark.parametrize(
    ("cancel_on", "fragment"),
    [
        ({}, "non-empty dict"),
        (["order.cancelled"], "non-empty dict"),
        ({"order.cancelled": []}, "non-empty list"),
        ({"order.cancelled": "order_id"}, "non-empty list"),
        ({"order.cancelled": [""]}, "not an input field name"),
        ({"order.cancelled": [7]}, "not an input field name"),
        ({"order.cancelled": ["customer_id"]}, "'customer_id' is not an input of the handler"),
        ({"": ["order_id"]}, "not an event name"),
        ({5: ["order_id"]}, "not an event name"),
    ],
)
def test_evt_12_a_bad_cancel_on_is_refused_at_declaration(cancel_on, fragment, job_names):  # noqa: F811
    job_names.append("test_triggers.bad")
    with pytest.raises(JobDefinitionError) as caught:
        job(name="test_triggers.bad", idempotency_key="k:{order_id}", cancel_on=cancel_on)(handler)
    error = caught.value
    assert (error.code, "\n" in str(error)) == ("X_INVARIANT", False)
    assert fragment in error.message and error.hint


def test_evt_12_declarations_are_kept_and_indexed_by_event_name(job_names):  # noqa: F811
    job_names.extend(["test_triggers.one", "test_triggers.any"])
    one = job(
        name="test_triggers.one",
        idempotency_key="k:{order_id}",
        on_event=["order.placed", "order.placed", "order.paid"],
        cancel_on={"order.voided": ("order_id", "order_id")},
    )(handler)
    anything = job(
        name="test_triggers.any",
        idempotency_key="any",
        cancel_on={"order.voided": ["whatever"]},  # a **inputs handler takes any field
    )(takes_any)
    assert one.on_event == ("order.placed", "order.paid")
    assert dict(one.cancel_on) == {"order.voided": ("order_id",)}
    assert event_declarations("order.placed").starts == (one,)
    assert event_declarations("order.voided").cancels == (
        (anything, ("whatever",)),
        (one, ("order_id",)),
    )
    assert not event_declarations("order.nothing")
    assert event_declarations("user.created").starts == (jobs.start_plan, jobs.welcome)
    assert one.using(queue="default").on_event == one.on_event  # a copy keeps them
    described = one.describe()
    assert (described["on_event"], described["cancel_on"]) == (
        ["order.placed", "order.paid"],
        {"order.voided": ["order_id"]},
    )
