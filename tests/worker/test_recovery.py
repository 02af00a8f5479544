"""The pieces that make a fleet recover by itself (issue 25), on injected clocks: the claim
window under refused connections, the claim backoff cut short when the database answers, the
recycle of a worker whose threads hung bodies hold, and the bound's setting."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from django_xjobs import conf
from django_xjobs.errors import ConfigInvalidError
from django_xjobs.management import checks
from django_xjobs.worker import recycle
from django_xjobs.worker.breaker import Breaker
from django_xjobs.worker.presence import WorkerPresence
from django_xjobs.worker.recycle import EXIT_CODES, ChildLimits, Recycler
from django_xjobs.worker.supervisor import exit_reason
from django_xjobs.worker.window import ClaimWindow
from django_xjobs.worker.worker import WorkerStats


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# --- the claim window (item 2) ----------------------------------------------------------------


def test_the_window_does_not_limit_until_a_connection_is_refused():
    window = ClaimWindow(8, base=0.1, cap=10, worker_id="w", clock=Clock())
    assert window.room(held=100) is None and not window.wary


def test_each_refusal_halves_what_the_worker_may_hold_down_to_one():
    window = ClaimWindow(8, base=0.1, cap=10, worker_id="w", clock=Clock())
    window.refused(held=7)  # eight were in flight: one went back
    assert window.limit == 4 and window.room(held=3) == 1 and window.wary
    window.refused(held=3)
    window.refused(held=2)
    assert window.limit == 1.0 and window.room(held=0) == 1


def test_refused_at_one_the_next_single_claim_waits_a_doubling_pause():
    clock = Clock()
    window = ClaimWindow(8, base=0.5, cap=2, worker_id="w", clock=clock)
    window.limit = 1.0
    pauses = []
    for _ in range(4):
        window.refused(held=0)
        assert window.room(held=0) == 0
        start = clock.now
        while window.room(held=0) == 0:
            clock.now += 0.25
        pauses.append(clock.now - start)
    assert pauses == [0.5, 1.0, 2.0, 2.0]


def test_runs_that_get_a_connection_widen_the_window_until_it_stops_limiting():
    clock = Clock()
    window = ClaimWindow(4, base=0.5, cap=2, worker_id="w", clock=clock)
    window.refused(held=0)
    window.refused(held=0)  # at one: a pause
    window.ran()  # a success ends the pause and widens by 1/limit
    assert window.limit == 2.0 and window.room(held=0) == 2
    runs = 0
    while window.limit is not None:
        window.ran()
        runs += 1
    assert runs == 6  # 2 -> 2.5 -> 2.9 -> 3.24 -> 3.55 -> 3.83 -> 4.1: one more per window
    assert window.room(held=50) is None
    assert window.wary  # a minute after the last refusal, runs still connect first
    clock.now += 61
    assert not window.wary


def test_lease_20_the_window_opens_at_once_when_the_claims_answer_again_after_an_outage():
    """Issue 39 item 1: job connections were refused because the server was away, not full;
    once the worker's own claims answer again the window stops limiting at once, so the runs
    the outage cut short start again together instead of one a pause."""
    clock = Clock()
    window = ClaimWindow(8, base=0.5, cap=2, worker_id="w", clock=clock)
    for _ in range(5):
        window.refused(held=0)
    assert window.limit == 1.0 and window.room(held=0) == 0  # one at a time, and a pause
    window.reopen()
    assert window.room(held=50) is None and window.limit is None
    window.reopen()  # not limiting: nothing to do
    assert window.room(held=50) is None


# --- the claim backoff ends when the database answers (item 1) ---------------------------------


def test_retry_now_turns_an_open_backoff_into_the_half_open_trial():
    clock = Clock()
    breaker = Breaker(base=1, cap=10, clock=clock, jitter=lambda: 0.0)
    for _ in range(5):
        breaker.failure()
    assert breaker.wait() == 10.0
    breaker.retry_now()
    assert breaker.wait() == 0.0 and breaker.state == "half-open"
    breaker.retry_now()  # not open: nothing to cut short
    assert breaker.state == "half-open"


class FlakyDriver:
    def __init__(self) -> None:
        self.fail = True

    def runs(self):
        return self

    def renew_presence(self, presence, ttl):
        if self.fail:
            raise ConnectionError("refused")


def test_a_presence_renewal_that_lands_after_failing_says_the_database_answers():
    answered: list[bool] = []
    driver = FlakyDriver()
    presence = WorkerPresence(
        driver,  # type: ignore[arg-type]
        worker_id="w",
        queues=("default",),
        ttl=3,
        in_flight=lambda: 0,
        answered=lambda: answered.append(True),
    )
    presence.renew()
    presence.renew()
    assert answered == []
    driver.fail = False
    presence.renew()
    presence.renew()  # only the first after an outage
    assert answered == [True]


# --- the recycle of a worker held by hung bodies (item 3) ----------------------------------------


class HeldWorker:
    worker_id = "w"
    draining = False

    def __init__(self) -> None:
        self.held = False
        self.stopped = False

    def held_by_abandoned(self) -> bool:
        return self.held

    def stats(self) -> WorkerStats:
        return WorkerStats("w", ("default",), "running", 0)

    def stop(self) -> None:
        self.stopped = True


def test_a_worker_held_past_the_bound_is_recycled_and_a_release_resets_the_bound(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(recycle.time, "monotonic", clock)
    worker = HeldWorker()
    recycler = Recycler(worker, ChildLimits(abandoned_held_for=10))  # type: ignore[arg-type]
    assert recycler._verdict() is None
    worker.held = True
    assert recycler._verdict() is None  # the bound starts now
    clock.now += 9
    assert recycler._verdict() is None
    worker.held = False  # a body returned: under half held, the worker makes way again
    assert recycler._verdict() is None
    worker.held = True
    recycler._verdict()
    clock.now += 10
    assert recycler._verdict() == ("abandoned_held", 10, 10)
    assert exit_reason(EXIT_CODES["abandoned_held"]) == "abandoned_held"
    assert ChildLimits(abandoned_held_for=10).any


@pytest.mark.parametrize("value", [0, -1, "soon", True])
def test_the_recycle_bound_is_a_positive_duration_or_none(value):
    with pytest.raises(ConfigInvalidError, match="ABANDONED_RECYCLE_AFTER"):
        conf.validate({"ABANDONED_RECYCLE_AFTER": value})
    assert conf.validate({}).abandoned_recycle_after == 10
    assert conf.validate({"ABANDONED_RECYCLE_AFTER": None}).abandoned_recycle_after is None
    assert conf.validate({"ABANDONED_RECYCLE_AFTER": "2m"}).abandoned_recycle_after == 120


def test_manage_py_check_reports_a_bad_recycle_bound():
    with override_settings(XJOBS={"ABANDONED_RECYCLE_AFTER": 0}):
        [error] = checks.check_settings()
    assert error.id == "django_xjobs.E001" and "ABANDONED_RECYCLE_AFTER" in error.msg


def test_a_bad_recycle_flag_is_refused_before_anything_starts():
    with pytest.raises(CommandError, match="--recycle-abandoned-after"):
        call_command("xjobs_worker", "--recycle-abandoned-after", "0")
