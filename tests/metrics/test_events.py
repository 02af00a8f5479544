"""The events' series (issue 43 item 4, SPEC EVT-16): ``xjobs_events_published_total{event}``
counts each committed publish by a bounded set of event names, and
``xjobs_event_wait_seconds{queue}`` observes publish to received for each parked waiter that
resumes, on the store's clock; both exported by the collector."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from django.db import transaction
from prometheus_client.parser import text_string_to_metric_families

from django_xjobs import metrics, publish_event
from django_xjobs.metrics import events as event_metrics
from django_xjobs.testing import age_events, age_steps, run_until_idle
from tests import jobs

PUBLISHED = "xjobs_events_published_total"
WAIT = "xjobs_event_wait_seconds"


@pytest.fixture(autouse=True)
def fresh_labels() -> Iterator[None]:
    """Which names got a label of their own is per process: each test starts with none."""
    event_metrics.forget_labels()
    yield
    event_metrics.forget_labels()


def _published(event: str) -> float:
    return metrics.value(PUBLISHED, event=event)


def _waits(queue: str = "default") -> tuple[float, float]:
    """How many waits the histogram of ``queue`` holds, and their sum."""
    buckets, total = metrics.histogram(WAIT, queue)
    return buckets[-1][1], total


def test_evt_16_each_publish_outside_a_transaction_is_counted_by_its_name(live_harness):
    before = _published("order.shipped"), _published("user.created")
    publish_event("order.shipped", {"order_id": 1})
    publish_event("order.shipped", {"order_id": 2})
    publish_event("user.created", {"user_id": 3})
    after = _published("order.shipped"), _published("user.created")
    assert (after[0] - before[0], after[1] - before[1]) == (2, 1)


def test_evt_16_a_publish_inside_atomic_counts_at_commit_and_never_on_rollback(
    db, django_capture_on_commit_callbacks
):
    before = _published("order.paid")
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        publish_event("order.paid", {"order_id": 1})
        assert _published("order.paid") == before  # not stored for good yet
    assert _published("order.paid") == before + 1
    with (
        django_capture_on_commit_callbacks(execute=True),
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        publish_event("order.paid", {"order_id": 2})
        raise RuntimeError("the caller's transaction rolls back")
    assert _published("order.paid") == before + 1


def test_evt_16_names_past_the_bound_are_counted_together_and_said_once(
    harness, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(event_metrics, "MAX_EVENT_LABELS", 2)
    before = _published("first"), _published("second"), _published(event_metrics.OTHER)
    with (
        caplog.at_level(logging.WARNING, logger="django_xjobs"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        for name in ("first", "second", "order.1.shipped", "order.2.shipped", "first"):
            publish_event(name)
    after = _published("first"), _published("second"), _published(event_metrics.OTHER)
    assert [b - a for a, b in zip(before, after, strict=True)] == [2, 1, 2]
    assert _published("order.1.shipped") == 0
    full = [
        r for r in caplog.records if getattr(r, "event", "") == "xjobs.metrics.event_labels_full"
    ]
    assert len(full) == 1 and full[0].fields["limit"] == 2


def test_evt_16_a_parked_waiter_that_resumes_observes_publish_to_received_once(harness):
    job_id = jobs.waiter.enqueue(order_id=16).id
    run_until_idle()
    assert harness.row(job_id).state == "suspended"
    count, total = _waits()
    # the step began waiting a minute ago, the event was published 30 s ago (the store's clock)
    age_steps(harness.driver, 60)
    publish_event("order.shipped", {"order_id": 16})
    age_events(harness.driver, 30)
    run_until_idle()
    assert harness.row(job_id).state == "done"
    new_count, new_total = _waits()
    assert new_count == count + 1
    assert 29.999 <= new_total - total < 40  # 30 s, and what the run took to claim
    buckets = dict(metrics.histogram(WAIT, "default")[0])
    assert buckets["60.0"] - buckets["10.0"] >= 1  # 30 s on the store's clock: (10 s, 60 s]


def test_evt_16_a_first_look_that_finds_its_event_observes_nothing(harness):
    """A wait that finds its event when first reached parked nobody: no wake-up to measure. On
    PostgreSQL the test's one transaction gives the event and the step the same now(), so the
    first look finds it; in memory the step begins after the publish and waits (SPEC EVT-03)."""
    count, _ = _waits()
    job_id = jobs.waiter.enqueue(order_id=17).id
    publish_event("order.shipped", {"order_id": 17})  # before the run reaches its wait
    run_until_idle()
    assert harness.row(job_id).state in ("done", "suspended")
    assert _waits()[0] == count


def test_evt_16_the_collector_exports_both_series(harness, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        publish_event("order.exported", {"order_id": 1})
    text = _scrape()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    published = families["xjobs_events_published"]  # the parser drops the _total suffix
    assert published.type == "counter"
    assert any(s.labels == {"event": "order.exported"} and s.value >= 1 for s in published.samples)
    assert families[WAIT].type == "histogram"


def _scrape() -> str:
    from prometheus_client import generate_latest

    metrics.clear_cache()
    return generate_latest(metrics.registry()).decode()
