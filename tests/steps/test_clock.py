"""One clock for events and steps, and steps that keep their order (issue 11 items 1 and 7),
each case on the memory driver and the PostgreSQL driver through the ``harness`` fixture.

SPEC EVT-02/03 compare an event's ``published_at`` with a wait's first ``started_at``; both now
come from the store's clock, so a publisher or a worker whose own clock is off changes nothing.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta

import pytest

from django_xjobs import clock as clock_module
from django_xjobs.clock import SystemClock
from django_xjobs.run.execution import Outcome
from django_xjobs.steps import events as events_module
from django_xjobs.steps.events import publish_event
from django_xjobs.testing import age_steps, run_to_completion, run_until_idle
from tests import jobs
from tests.models import Ledger


class SkewedClock:
    """A machine's clock that is ``seconds`` off the true time."""

    def __init__(self, seconds: float) -> None:
        self.offset = timedelta(seconds=seconds)

    def now(self) -> datetime:
        return SystemClock().now() + self.offset


@pytest.fixture
def publisher_behind(monkeypatch):
    """Publish as a host whose clock is 30 s behind: every clock publish_event could read."""
    behind = SkewedClock(-30)
    monkeypatch.setattr(clock_module, "system_clock", behind)
    # the name publish_event read its clock through before its times moved to the store
    monkeypatch.setattr(events_module, "system_clock", behind, raising=False)
    return behind


def step(harness, job_id, name):
    [record] = [
        r for r in harness.driver.steps().list(harness.row(job_id).run_id) if r.name == name
    ]
    return record


def reorders_warnings(caplog):
    return [r for r in caplog.records if getattr(r, "event", None) == "xjobs.step.reordered"]


# --- item 1: one clock ------------------------------------------------------------------------


def test_evt_02_03_a_publisher_whose_clock_is_30s_behind_still_wakes_the_wait(
    harness, publisher_behind, caplog
):
    job_id = jobs.waiter.enqueue(order_id=31, timeout="1m").id
    assert [r.outcome for r in run_until_idle()] == [Outcome.SUSPENDED]
    started = step(harness, job_id, "shipped").started_at
    event = publish_event("order.shipped", {"order_id": 31})
    assert event.published_at >= started  # stamped on the store's clock, not the publisher's
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        runs = run_to_completion(job_id)
    assert [r.outcome for r in runs] == [Outcome.COMPLETED]
    assert harness.row(job_id).result == {"got": {"order_id": 31}}
    assert "xjobs.step.wait_timeout" not in caplog.text  # SPEC STEP-13 did not fire


def test_step_11_13_workers_whose_clocks_disagree_neither_hide_the_event_nor_time_out(
    harness, publisher_behind, caplog
):
    job_id = jobs.waiter.enqueue(order_id=32, timeout="1m").id
    # the first worker runs 30 s ahead: its clock must not become the wait's started_at
    assert [r.outcome for r in run_until_idle(clock=SkewedClock(30))] == [Outcome.SUSPENDED]
    # the next poll lands on a worker 2 min ahead, past the 1 min timeout on its own clock
    harness.advance(5)
    age_steps(harness.driver, 5)
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        assert [r.outcome for r in run_until_idle(clock=SkewedClock(120))] == [Outcome.SUSPENDED]
    assert "xjobs.step.wait_timeout" not in caplog.text
    assert step(harness, job_id, "shipped").status == "waiting"
    publish_event("order.shipped", {"order_id": 32})
    runs = run_to_completion(job_id, clock=SkewedClock(-30))
    assert runs[-1].outcome == Outcome.COMPLETED
    assert harness.row(job_id).result == {"got": {"order_id": 32}}


def test_step_07_10_a_sleep_parks_for_its_length_on_the_store_clock_whatever_the_worker_says(
    harness,
):
    job_id = jobs.sleeper.enqueue(n=33).id
    [run] = run_until_idle(clock=SkewedClock(-3600))  # a worker an hour behind
    assert run.outcome == Outcome.SUSPENDED
    nap = step(harness, job_id, "nap")
    row = harness.row(job_id)
    ahead = (row.run_at - harness.driver.steps().now()).total_seconds()
    assert abs(ahead - 3 * 86400) < 5  # the row wakes in 3 days on the store's clock (STEP-10)
    assert nap.wake_at - nap.started_at == timedelta(days=3)


# --- item 7: steps keep their order -----------------------------------------------------------


def test_step_positions_are_stored_in_the_order_the_run_first_reaches_them(harness):
    job_id = jobs.fails_at_b.enqueue(token=f"t-{uuid.uuid4()}").id
    run_to_completion(job_id)
    records = harness.driver.steps().list(harness.row(job_id).run_id)
    assert [(r.name, r.position) for r in records] == [("a", 0), ("b", 1), ("c", 2)]


def test_reordered_steps_warn_once_naming_both_positions_and_replay_by_name(harness, caplog):
    token = f"t-{uuid.uuid4()}"
    job_id = jobs.reorders.enqueue(token=token).id
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        runs = run_to_completion(job_id)
    assert [r.outcome for r in runs] == [Outcome.RETRIED, Outcome.COMPLETED]
    [warning] = reorders_warnings(caplog)
    assert warning.fields["step"] == "b"
    assert (warning.fields["recorded"], warning.fields["current"]) == (1, 0)
    assert "step=b recorded=1 current=0" in warning.getMessage()
    assert runs[-1].replayed == ("b", "a")  # replayed by name, not by place
    assert harness.row(job_id).result == [1, 1]  # each step's stored result, from attempt 1
    assert list(Ledger.objects.filter(token=token).values_list("phase", flat=True)) == ["a", "b"]
    records = harness.driver.steps().list(harness.row(job_id).run_id)
    assert [(r.name, r.position) for r in records] == [("a", 0), ("b", 1)]  # the first order


def test_steps_in_the_same_order_replay_without_a_warning(harness, caplog):
    job_id = jobs.reorders.enqueue(token=f"t-{uuid.uuid4()}", swap=False).id
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        runs = run_to_completion(job_id)
    assert [r.outcome for r in runs] == [Outcome.RETRIED, Outcome.COMPLETED]
    assert runs[-1].replayed == ("a", "b")
    assert reorders_warnings(caplog) == []
