"""Durable steps, sleeps, events and deadlines (SPEC §4 STEP-*, EVT-*, §6 EXEC-*), each case
on the memory driver and the PostgreSQL driver through the ``harness`` fixture."""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from datetime import datetime, timedelta

import pytest
from django.db import connections
from django.utils import timezone

from django_xjobs.clock import FrozenClock
from django_xjobs.declarations.job import job
from django_xjobs.declarations.registry import get_job
from django_xjobs.errors import (
    InvariantError,
    JobAbortedError,
    JobCancelledError,
    JobInterrupt,
    JobTimeoutError,
    StepSuspension,
)
from django_xjobs.run.execute import execute
from django_xjobs.run.execution import Outcome
from django_xjobs.run.settle import settle
from django_xjobs.run.stop import StopSignal
from django_xjobs.steps import Steps
from django_xjobs.steps.events import publish_event
from django_xjobs.testing import age_events, run_to_completion, run_until_idle
from tests import jobs
from tests.models import Ledger
from tests.support.process import wait_for


@pytest.fixture
def clock():
    return FrozenClock(timezone.now())


def ledger(token, phase=None):
    rows = Ledger.objects.filter(token=token)
    return rows.filter(phase=phase).count() if phase else [r.phase for r in rows]


def steps_of(harness, job_id):
    return {r.name: r for r in harness.driver.steps().list(harness.row(job_id).run_id)}


def claimed_steps(harness, clock, handle, **inputs):
    """A claimed run of ``handle`` and a step runner for it, for tests that drive steps by hand."""
    handle.enqueue(**inputs)
    [job] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id="w"
    )
    return steps_for(harness, job)


def steps_for(harness, job):
    """A step runner for ``job`` over its recorded steps, as a new pass (a replay) builds it."""
    signal = StopSignal()
    steps = Steps(
        job=job,
        records=harness.driver.steps().list(job.run_id),
        store=harness.driver.steps(),
        events=harness.driver.events(),
        signal=signal,
    )
    return job, steps, signal


# --- replay -----------------------------------------------------------------------------------


def test_step_01_02_03_a_failed_step_reruns_alone_and_earlier_steps_replay(harness, clock):
    token = f"t-{uuid.uuid4()}"
    job_id = jobs.fails_at_b.enqueue(token=token).id
    runs = run_to_completion(job_id, clock=clock)
    assert [r.outcome for r in runs] == [Outcome.RETRIED, Outcome.COMPLETED]
    assert runs[-1].replayed == ("a",)  # SPEC STEP-01
    assert ledger(token) == ["a", "b", "b", "c"]  # a once, b twice, c once
    records = steps_of(harness, job_id)
    assert (records["a"].status, records["a"].attempts, records["a"].output) == ("completed", 1, 1)
    assert (records["b"].status, records["b"].attempts, records["b"].output) == ("completed", 2, 2)
    assert records["b"].error is None
    assert harness.row(job_id).result == [1, 2, 2]


def test_step_03_a_failing_step_writes_a_failed_record_and_the_error_propagates(harness, clock):
    token = f"t-{uuid.uuid4()}"
    job_id = jobs.fails_at_b.enqueue(token=token).id
    [run] = run_until_idle(clock=clock)
    assert run.outcome == Outcome.RETRIED and run.error == "ConnectionError: b failed"
    b = steps_of(harness, job_id)["b"]
    assert (b.status, b.error, b.attempts) == ("failed", "ConnectionError: b failed", 1)


def test_step_06_one_read_of_the_step_records_per_attempt(harness, clock):
    """SPEC SE-46."""
    job_id = jobs.five_steps.enqueue(token=f"t-{uuid.uuid4()}").id
    reads = []
    real_list = harness.driver.steps().list

    def counting_list(run_id):
        reads.append(run_id)
        return real_list(run_id)

    harness.driver.steps().list = counting_list
    try:
        [run] = run_until_idle(clock=clock)
    finally:
        del harness.driver.steps().list
    assert run.outcome == Outcome.COMPLETED
    assert reads == [harness.row(job_id).run_id]


def test_step_02_a_step_result_is_stored_before_the_next_step_starts(harness, clock):
    job, steps, _ = claimed_steps(harness, clock, jobs.ok, n=1)
    seen = []
    steps.run("first", lambda: 41)
    steps.run("second", lambda: seen.append(len(harness.driver.steps().list(job.run_id))))
    assert seen == [1]


def test_step_19_run_id_is_stable_across_retries_and_suspensions(harness, clock):
    job_id = jobs.sleeper.enqueue(n=1).id
    run_id = harness.row(job_id).run_id
    run_to_completion(job_id, clock=clock)
    row = harness.row(job_id)
    assert row.run_id == run_id
    assert set(steps_of(harness, job_id)) == {"before", "nap", "after"}


# --- names ------------------------------------------------------------------------------------


def test_step_04_a_duplicate_step_name_dead_letters_on_the_first_attempt(harness, clock):
    job_id = jobs.dup_steps.enqueue(n=1).id
    [run] = run_until_idle(clock=clock)
    assert run.outcome == Outcome.DEAD_LETTERED
    row = harness.row(job_id)
    assert (row.state, row.attempt, row.stop_reason) == ("dead", 1, "terminal")
    assert row.last_error.startswith("X_STEP_DUPLICATE")


def test_step_05_the_name_window_keeps_200_and_old_names_stay_refused(harness, clock):
    """SPEC SE-47."""
    _, steps, _ = claimed_steps(harness, clock, jobs.ok, n=1)
    for i in range(205):
        steps.run(f"s{i}", lambda i=i: i)
    assert len(steps.used_names) == 200 and steps.used_names[0] == "s5"
    with pytest.raises(Exception) as caught:
        steps.run("s0", lambda: 0)
    assert caught.value.code == "X_STEP_DUPLICATE"


def test_step_09_se_45_repeated_anonymous_sleeps_get_ordinal_names(harness, clock):
    job_id = jobs.sleep_loop.enqueue(n=3).id
    run_to_completion(job_id, clock=clock)
    assert harness.row(job_id).result == ["sleep:1h", "sleep:1h#2", "sleep:1h#3"]


@pytest.mark.parametrize("name", ["", None, 7, b"x"])
def test_a_step_name_must_be_a_non_empty_string(harness, clock, name):
    job, steps, _ = claimed_steps(harness, clock, jobs.ok, n=1)
    with pytest.raises(InvariantError):
        steps.run(name, lambda: 1)
    assert harness.driver.steps().list(job.run_id) == []


# --- sleeps -----------------------------------------------------------------------------------


def test_step_07_08_10_a_sleep_parks_the_run_without_burning_an_attempt(harness, clock):
    token = f"t-{uuid.uuid4()}"
    job_id = jobs.sleeper.enqueue(n=1, token=token).id
    [run] = run_until_idle(clock=clock)
    assert run.outcome == Outcome.SUSPENDED
    row = harness.row(job_id)
    assert (row.state, row.attempt, row.last_error) == ("suspended", 0, None)
    nap = steps_of(harness, job_id)["nap"]
    assert nap.status == "sleeping" and nap.wake_at - nap.started_at == timedelta(days=3)
    assert abs((row.run_at - row.updated_at).total_seconds() - 3 * 86400) < 5
    assert run_until_idle(clock=clock) == []  # not due before its wake time
    runs = run_to_completion(job_id, clock=clock)
    assert [r.outcome for r in runs] == [Outcome.COMPLETED]
    assert ledger(token) == ["before", "after"]
    assert steps_of(harness, job_id)["nap"].status == "completed"
    assert harness.row(job_id).attempt == 1


def test_step_08_a_sleep_not_yet_due_suspends_again_and_writes_nothing(harness, clock):
    job, steps, _ = claimed_steps(harness, clock, jobs.ok, n=1)
    with pytest.raises(StepSuspension) as first:
        steps.sleep("nap", "1h")
    before = harness.driver.steps().list(job.run_id)
    again = Steps(
        job=job,
        records=before,
        store=harness.driver.steps(),
        events=harness.driver.events(),
        signal=StopSignal(),
    )
    with pytest.raises(StepSuspension) as second:
        again.sleep("nap", "1h")
    assert second.value.resume_at == first.value.resume_at
    assert harness.driver.steps().list(job.run_id) == before


def test_sleep_until_a_past_instant_completes_at_once(harness, clock):
    job, steps, _ = claimed_steps(harness, clock, jobs.ok, n=1)
    steps.sleep_until("past", harness.driver.steps().now() - timedelta(minutes=1))
    assert harness.driver.steps().list(job.run_id)[0].status == "completed"


@pytest.mark.parametrize("duration", [-1, 0, math.inf, math.nan, "-5m", "soon"])
def test_a_bad_sleep_is_refused_and_nothing_is_written(harness, clock, duration):
    job, steps, _ = claimed_steps(harness, clock, jobs.ok, n=1)
    with pytest.raises(Exception) as caught:
        steps.sleep("nap", duration)
    assert caught.value.code in ("X_INVARIANT", "X_DURATION_INVALID")
    assert harness.driver.steps().list(job.run_id) == []


def test_sleep_until_a_naive_datetime_is_refused(harness, clock):
    job, steps, _ = claimed_steps(harness, clock, jobs.ok, n=1)
    with pytest.raises(InvariantError):
        steps.sleep_until("nap", datetime(2030, 1, 1))
    assert harness.driver.steps().list(job.run_id) == []


# --- events -----------------------------------------------------------------------------------


def test_evt_01_publish_returns_the_stored_event(harness, clock):
    event = publish_event("order.shipped", {"order_id": 1}, correlation_key="o1", ttl="1h")
    assert event.name == "order.shipped" and event.payload == {"order_id": 1}
    assert event.expires_at - event.published_at == timedelta(hours=1)


def test_step_11_12_14_a_wait_parks_until_a_matching_event_arrives(harness, clock):
    """SPEC SE-22: the job's declared ``event_poll`` applies."""
    job_id = jobs.waiter.enqueue(order_id=7).id
    [run] = run_until_idle(clock=clock)
    assert run.outcome == Outcome.SUSPENDED
    shipped = steps_of(harness, job_id)["shipped"]
    assert (shipped.status, shipped.event) == ("waiting", "order.shipped")
    assert shipped.wake_at - shipped.started_at == timedelta(seconds=5)  # event_poll (STEP-14)
    row = harness.row(job_id)
    assert 4 <= (row.run_at - row.updated_at).total_seconds() <= 6
    publish_event("order.shipped", {"order_id": 8})  # another order: not a match
    runs = run_to_completion(
        job_id, clock=clock, events={"order.shipped": {"order_id": 7, "via": "ups"}}
    )
    assert runs[-1].outcome == Outcome.COMPLETED
    assert harness.row(job_id).result == {"got": {"order_id": 7, "via": "ups"}}
    assert harness.row(job_id).attempt == 1


def test_step_12_the_default_event_poll_is_30_seconds(harness, clock):
    job_id = jobs.waiter_default_poll.enqueue(order_id=1).id
    run_until_idle(clock=clock)
    shipped = steps_of(harness, job_id)["shipped"]
    assert shipped.wake_at - shipped.started_at == timedelta(seconds=30)


def test_evt_03_an_event_older_than_the_wait_is_never_matched(harness, clock):
    publish_event("order.shipped", {"order_id": 3})
    age_events(harness.driver, 1)  # published a second before the wait begins
    job_id = jobs.waiter.enqueue(order_id=3).id
    assert [r.outcome for r in run_until_idle(clock=clock)] == [Outcome.SUSPENDED]
    assert steps_of(harness, job_id)["shipped"].status == "waiting"


def test_evt_03_two_waiting_runs_both_receive_one_event(harness, clock):
    a = jobs.waiter.enqueue(order_id=5, tag="a").id
    b = jobs.waiter.enqueue(order_id=5, tag="b").id
    run_until_idle(clock=clock)
    publish_event("order.shipped", {"order_id": 5})
    for job_id in (a, b):
        run_to_completion(job_id, clock=clock)
        assert harness.row(job_id).result == {"got": {"order_id": 5}}


def test_evt_02_correlation_keys_and_expiry(harness, clock):
    store = harness.driver.events()
    start = harness.driver.steps().now() - timedelta(days=1)
    publish_event("ping", {"n": 1}, correlation_key="k1", ttl="1m")
    age_events(harness.driver, 1)
    publish_event("ping", {"n": 2}, correlation_key="k2")
    assert store.find("ping", after=start).payload == {"n": 1}  # earliest wins
    assert store.find("ping", after=start, correlation_key="k2").payload == {"n": 2}
    assert store.find("ping", after=start, correlation_key="k3") is None
    assert store.find("ping", after=start, match={"n": 2}).payload == {"n": 2}
    age_events(harness.driver, 120)
    assert store.find("ping", after=start).payload == {"n": 2}  # the first expired
    assert store.purge() == 1


def test_step_13_an_optional_wait_times_out_to_none(harness, clock, caplog):
    job_id = jobs.waiter.enqueue(order_id=9, timeout="1m").id
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        runs = run_to_completion(job_id, clock=clock)
    assert runs[-1].outcome == Outcome.COMPLETED
    assert harness.row(job_id).result == {"got": None}
    assert "xjobs.step.wait_timeout" in caplog.text


def test_step_13_a_required_wait_times_out_with_x_job_timeout(harness, clock):
    job_id = jobs.waiter.enqueue(order_id=9, required=True, timeout="1m").id
    runs = run_to_completion(job_id, clock=clock)
    assert runs[-1].outcome == Outcome.DEAD_LETTERED
    row = harness.row(job_id)
    assert row.last_error.startswith("X_JOB_TIMEOUT")
    assert row.stop_reason == "timeout"


@pytest.mark.parametrize(
    "match", [["order_id"], {"order_id": [1]}, {"order_id": {"a": 1}}, {1: 2}, {"x": math.nan}]
)
def test_a_wait_with_an_unknown_match_shape_is_refused(harness, clock, match):
    job, steps, _ = claimed_steps(harness, clock, jobs.ok, n=1)
    with pytest.raises(InvariantError):
        steps.wait_for_event("w", "order.shipped", match=match)
    assert harness.driver.steps().list(job.run_id) == []


# --- output, deadlines, the write fence -------------------------------------------------------


def test_a_non_json_step_output_fails_the_step_and_the_job_stays_retryable(harness, clock):
    job_id = jobs.bad_step_output.enqueue(n=1).id
    # its 10 ms retry may fall due before the loop looks again: the first run is the one asked
    # about, and any later one failed the same way
    first, *later = run_until_idle(clock=clock)
    assert first.outcome == Outcome.RETRIED
    assert all(run.error.startswith("X_STEP_OUTPUT_INVALID") for run in (first, *later))
    assert steps_of(harness, job_id)["x"].status == "failed"


def test_step_15_a_step_deadline_fails_the_attempt_naming_the_step(harness, clock):
    """SPEC SE-22: the job's declared ``step_timeout`` applies."""
    job_id = jobs.slow_step.enqueue(n=1).id
    started = time.monotonic()
    [run] = run_until_idle(clock=clock)
    assert time.monotonic() - started < 5  # the step did not run its 10 s
    assert run.outcome == Outcome.RETRIED
    assert run.error.startswith("X_JOB_TIMEOUT") and "'slow'" in run.error
    assert steps_of(harness, job_id)["slow"].status == "failed"


def test_step_15_se_20_the_step_signal_is_aborted_before_the_step_raises(harness, clock):
    _, steps, run_signal = claimed_steps(harness, clock, jobs.ok, n=1)
    steps.step_timeout = 0.2
    seen: list[StopSignal] = []
    release = threading.Event()

    def ignores_its_signal(signal):
        seen.append(signal)
        release.wait(10)  # overruns its ceiling without looking at the signal

    try:
        with pytest.raises(JobTimeoutError) as raised:
            steps.run("slow", ignores_its_signal)
        # read the moment step.run raised: the step's signal already carries the timeout
        assert seen[0].is_set() and seen[0].reason is raised.value
        assert not run_signal.is_set()  # the run's own signal is left to the executor
    finally:
        release.set()


@pytest.mark.parametrize("step_timeout", [None, 10.0], ids=["no-ceiling", "with-ceiling"])
def test_step_16_the_signal_fn_gets_fires_when_the_run_is_cancelled(harness, clock, step_timeout):
    _, steps, run_signal = claimed_steps(harness, clock, jobs.ok, n=1)
    steps.step_timeout = step_timeout
    started, woke = threading.Event(), []

    def waits(signal):
        started.set()
        woke.append(signal.wait(3))  # True as soon as the cancel reaches this signal

    def cancel():
        started.wait(5)
        run_signal.abort(JobCancelledError("cancelled by the operator"))

    canceller = threading.Thread(target=cancel)
    canceller.start()
    with pytest.raises(JobInterrupt):  # the aborted run's step write is refused (STEP-17)
        steps.run("waits", waits)
    canceller.join(5)
    assert woke == [True]


def test_step_17_exec_07_after_the_signal_aborts_step_functions_run_but_nothing_lands(
    harness, clock
):
    job, steps, signal = claimed_steps(harness, clock, jobs.ok, n=1)
    calls = []
    signal.abort(JobAbortedError("stopped"))
    with pytest.raises(JobAbortedError) as caught:
        steps.run("x", lambda: calls.append(1))
    assert calls == [1]
    assert caught.value.code == "X_ABORTED"
    with pytest.raises(JobAbortedError):
        steps.sleep("nap", "1h")
    assert harness.driver.steps().list(job.run_id) == []


def test_step_17_q_01_a_run_whose_lease_moved_on_cannot_write_a_step(harness, clock):
    job, steps, signal = claimed_steps(harness, clock, jobs.ok, n=1)
    harness.advance(30)
    [again] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id="w2"
    )
    assert again.id == job.id
    with pytest.raises(JobAbortedError):
        steps.run("x", lambda: 1)
    assert signal.is_set() and signal.reason.code == "X_JOB_LEASE_LOST"
    assert harness.driver.steps().list(job.run_id) == []


def test_step_18_a_suspension_inside_a_step_leaves_no_failed_record(harness, clock):
    job, steps, _ = claimed_steps(harness, clock, jobs.ok, n=1)

    def parks():
        raise StepSuspension("inner", clock.now() + timedelta(hours=1), "sleep")

    with pytest.raises(StepSuspension):
        steps.run("outer", parks)
    assert harness.driver.steps().list(job.run_id) == []


def test_exec_04_a_job_timeout_fails_on_time_and_the_late_step_is_refused(harness, clock):
    token = f"t-{uuid.uuid4()}"
    job_id = jobs.overruns.enqueue(token=token).id
    started = time.monotonic()
    [run] = run_until_idle(clock=clock)
    assert time.monotonic() - started < 0.9  # failed at its 300 ms deadline, not at 1 s
    assert run.outcome == Outcome.DEAD_LETTERED
    row = harness.row(job_id)
    assert row.last_error.startswith("X_JOB_TIMEOUT") and row.stop_reason == "timeout"
    deadline = time.monotonic() + 10
    while not ledger(token, "late") and time.monotonic() < deadline:
        time.sleep(0.02)  # the abandoned body runs on in its own thread; poll for its last act
    assert ledger(token, "late") == 1  # the step function ran, after the deadline ...
    assert "late" not in steps_of(harness, job_id)  # ... and its write was refused (EXEC-06)


def test_exec_04_a_timed_body_whose_step_fails_fails_its_attempt_on_both_drivers(harness):
    """A body with a timeout runs on a thread of its own; inside a test's transaction it borrows
    the test's connection (SPEC WORK-06), so its step's failure is recorded and ends the attempt
    as on memory. On its own connection it saw no row to fence its step on: the run was lost,
    claimed again as a second attempt of one, and dead-lettered as a crash loop."""
    job_id = jobs.timed_step_fails.enqueue(n=4).id
    assert [run.outcome for run in run_until_idle()] == [Outcome.DEAD_LETTERED]
    row = harness.row(job_id)
    assert (row.state, row.attempt, row.stop_reason) == ("dead", 1, "attempts-exhausted")
    assert row.last_error.startswith("ValueError: step 4 fails")
    steps = harness.driver.steps().list(row.run_id)
    assert [(step.name, step.status) for step in steps] == [("fails", "failed")]
    assert steps[0].error.startswith("ValueError: step 4 fails")


#: each run's ctx.signal and what its background step met, by token, for the EXEC-04/06 cases
SIGNALS: dict[str, StopSignal] = {}
LATE: dict[str, BaseException | None] = {}


@job(name="test_steps.heeds_timeout", idempotency_key="heeds:{token}", timeout="200ms")
def heeds_timeout(ctx, token: str):
    SIGNALS[token] = ctx.signal
    ctx.signal.wait(5)  # obeys: wakes when the deadline aborts the signal


@job(name="test_steps.leaves_a_step_behind", idempotency_key="behind:{token}")
def leaves_a_step_behind(ctx, token: str):
    """Returns at once, leaving a thread that runs a step once the test opens ``GATES[token]``."""
    SIGNALS[token] = ctx.signal

    def later():
        GATES[token].wait(10)
        refused = None
        try:
            ctx.step.run("late", lambda: _mark(token))
        except BaseException as error:
            refused = error
        finally:
            connections.close_all()  # this thread's own, before the test database is dropped
        LATE[token] = refused

    threading.Thread(target=later, daemon=True).start()
    return "returned"


GATES: dict[str, threading.Event] = {}


def _mark(token: str) -> str:
    Ledger.objects.create(token=token, phase="late", attempt=0, pid=0)
    return "late"


def test_exec_04_se_20_the_signal_carries_the_timeout_when_the_retry_is_written(harness, clock):
    token = f"t-{uuid.uuid4()}"
    at_retry: list[BaseException | None] = []
    retry = harness.driver.runs().retry

    def seen_at_retry(value):
        at_retry.append(SIGNALS[token].reason)
        return retry(value)

    harness.driver.runs().retry = seen_at_retry
    job_id = heeds_timeout.enqueue(token=token).id
    [run] = run_until_idle(clock=clock)
    assert run.outcome == Outcome.RETRIED and "X_JOB_TIMEOUT" in run.error
    [reason] = at_retry  # aborted before the retry, by the timeout, not by the attempt's end
    assert isinstance(reason, JobTimeoutError) and reason.code == "X_JOB_TIMEOUT"
    assert harness.row(job_id).last_error.startswith("X_JOB_TIMEOUT")


def test_exec_06_se_21_a_step_left_running_after_the_attempt_is_refused(live_harness, clock):
    token = f"t-{uuid.uuid4()}"
    GATES[token] = threading.Event()
    job_id = leaves_a_step_behind.enqueue(token=token).id
    [held] = live_harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id="w"
    )
    run = execute(
        held, StopSignal(), driver=live_harness.driver, clock=clock, handle=get_job(held.name)
    )
    assert run.outcome == Outcome.COMPLETED
    reason = SIGNALS[token].reason  # the attempt has ended: its signal says so
    assert isinstance(reason, JobAbortedError) and reason.code == "X_ABORTED"
    # the window SE-21 closes: the attempt is over but not yet settled, so the lease still holds
    GATES[token].set()
    # the background thread is the handler's, not ours: poll for its end
    wait_for(lambda: token in LATE, timeout=10, what="the late step to be refused")
    refused = LATE[token]
    assert isinstance(refused, JobAbortedError) and refused.code == "X_ABORTED"
    assert "late" not in steps_of(live_harness, job_id)  # ... and nothing landed
    assert ledger(token, "late") == 1  # the step function itself ran (STEP-17)
    assert settle(live_harness.driver, [run.settle]) == {held.lease_token}


def test_exec_05_a_body_that_ends_after_its_deadline_is_logged_as_abandoned(harness, clock, caplog):
    job_id = jobs.overruns.enqueue(token=f"t-{uuid.uuid4()}", late_step=False).id
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        [run] = run_until_idle(clock=clock)
        deadline = time.monotonic() + 10
        while "xjobs.timeout.abandoned" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.02)  # the abandoned body ends on its own thread; poll for its log
    assert run.outcome == Outcome.DEAD_LETTERED
    assert "xjobs.timeout.abandoned" in caplog.text and "ended=resolved" in caplog.text
    assert harness.row(job_id).result is None


def test_async_handlers_await_their_steps(harness, clock):
    job_id = jobs.async_steps.enqueue(n=4).id
    runs = run_to_completion(job_id, clock=clock)
    assert [r.outcome for r in runs] == [Outcome.SUSPENDED, Outcome.COMPLETED]
    assert harness.row(job_id).result == {"first": 5}
    assert runs[-1].replayed == ("first",)  # the sleep completes on this attempt, not replayed


def test_signal_raise_if_set_raises_an_interrupt_even_for_a_timeout():
    signal = StopSignal()
    signal.abort(JobTimeoutError("late"))
    with pytest.raises(JobAbortedError):
        signal.raise_if_set()
    child = signal.child()
    assert child.is_set() and isinstance(child.reason, JobTimeoutError)


@pytest.mark.django_db(transaction=True)
def test_publish_event_inside_atomic_commits_or_rolls_back_with_the_caller():
    from django.db import transaction

    from django_xjobs.models import JobEvent

    with pytest.raises(RuntimeError), transaction.atomic():
        publish_event("invoice.paid", {"id": 1})
        raise RuntimeError("the business transaction failed")
    assert not JobEvent.objects.filter(name="invoice.paid").exists()
    with transaction.atomic():
        publish_event("invoice.paid", {"id": 2})
    assert list(JobEvent.objects.filter(name="invoice.paid").values_list("payload", flat=True)) == [
        {"id": 2}
    ]


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"event": ""}, "X_INVARIANT"),
        ({"event": "e", "data": {"x": math.inf}}, "X_INPUT_INVALID"),
        ({"event": "e", "data": {"when": datetime(2030, 1, 1)}}, "X_INPUT_INVALID"),
        ({"event": "e", "ttl": -1}, "X_INVARIANT"),
        ({"event": "e", "correlation_key": 5}, "X_INVARIANT"),
    ],
)
def test_publish_event_refuses_bad_input_and_writes_nothing(harness, kwargs, code):
    from django_xjobs.errors import XJobsError

    with pytest.raises(XJobsError) as caught:
        publish_event(**kwargs)
    assert caught.value.code == code
    assert (
        harness.driver.events().find("e", after=harness.driver.steps().now() - timedelta(days=1))
        is None
    )


def test_evt_04_the_memory_event_store_is_bounded_and_purges_expired_events():
    from django_xjobs.drivers.memory import MemoryDriver
    from django_xjobs.drivers.memory.steps import MAX_EVENTS
    from django_xjobs.ids import uuid7

    clock = FrozenClock(timezone.now())
    store = MemoryDriver(clock).events()
    start = clock.now()
    for n in range(MAX_EVENTS + 1):
        store.publish(id=uuid7(), name="tick", payload={"n": n}, correlation_key=None, ttl=86400)
    assert len(store._events) == MAX_EVENTS
    assert store.find("tick", after=start).payload == {"n": 1}  # the oldest went
    clock.advance(2 * 86400)
    store.publish(id=uuid7(), name="tock", payload={}, correlation_key=None, ttl=3600)
    assert [e.name for e in store._events] == ["tock"]  # expired ones purged on publish
