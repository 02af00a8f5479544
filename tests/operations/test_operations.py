"""The operator actions and the operator API (SPEC CANCEL-*, INSP-*, DRV-04 g/k, DESIGN
Q-03/Q-04/Q-09): every case runs on the memory driver AND the PostgreSQL driver."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from django_xjobs.drivers.contract import (
    Complete,
    EnqueueRequest,
    Finish,
    RetryAt,
    StepRecord,
    SuspendUntil,
)
from django_xjobs.errors import (
    InvariantError,
    JobDuplicateError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRetryableError,
)
from django_xjobs.operations import (
    cancel_job,
    inspect_dead_letters,
    inspect_job,
    inspect_queues,
    retry_job,
)
from tests import jobs

BASE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def claim(driver, worker="w"):
    return driver.runs().claim(queues=["default"], limit=1, visibility_timeout=30, worker_id=worker)


def make(harness, state, n=1, error="boom"):
    """A ``tests.jobs.ok`` row in ``state``; the ClaimedJob when it went through a claim."""
    if state == "delayed":
        return None, jobs.ok.using(delay="1h").enqueue(n=n).id
    enqueued = jobs.ok.enqueue(n=n)
    if state == "ready":
        return None, enqueued.id
    [held] = claim(harness.driver)
    driver = harness.driver
    if state == "suspended":
        assert driver.runs().suspend(SuspendUntil(held.id, held.lease_token, delay=60, error=error))
    elif state in ("dead", "failed"):
        assert driver.runs().finish(Finish(held.id, held.lease_token, state, error=error))
    elif state == "done":
        assert driver.runs().complete([Complete(held.id, held.lease_token, '{"ok": true}')]) == {
            held.id
        }
    elif state == "cancelled":
        driver.jobs().cancel(held.id, "stop")
    return held, held.id


def put_steps(harness, held, *names, status="completed"):
    """Record ``names`` on the held run, each started one second after the previous one."""
    for i, name in enumerate(names):
        started = BASE + timedelta(seconds=i)
        record = StepRecord(
            run_id=held.run_id,
            name=name,
            status=status,
            started_at=started,
            output={"step": name},
            completed_at=started + timedelta(milliseconds=250),
        )
        assert harness.driver.steps().put(record, job_id=held.id, lease_token=held.lease_token)


def step_names(harness, run_id):
    return [s.name for s in harness.driver.steps().list(run_id)]


# --- cancel ----------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["ready", "delayed", "running", "suspended"])
def test_cancel_02_drv_04_g_a_live_job_is_cancelled_and_its_claim_cleared(harness, state):
    """SPEC CANCEL-01: both drivers cancel a job in every live state; neither refuses the call
    for want of support."""
    _, job_id = make(harness, state)
    trace = cancel_job(job_id, reason="customer asked")
    row = harness.row(job_id)
    assert (row.state, row.stop_reason, row.last_error) == (
        "cancelled",
        "cancelled",
        "customer asked",
    )
    assert (row.visible_at, row.claimed_by, row.lease_token) == (None, None, None)
    assert (trace["id"], trace["state"], trace["last_error"]) == (
        str(job_id),
        "cancelled",
        "customer asked",
    )


def test_cancel_02_without_a_reason_the_previous_error_stays(harness):
    _, job_id = make(harness, "suspended", error="ValueError: first")
    assert cancel_job(job_id)["last_error"] == "ValueError: first"
    _, other = make(harness, "ready", n=2)
    assert cancel_job(other)["last_error"] is None
    assert harness.row(other).stop_reason == "cancelled"


def test_cancel_02_the_driver_returns_the_cancelled_snapshot(harness):
    _, job_id = make(harness, "ready")
    snapshot = harness.driver.jobs().cancel(job_id, "why")
    assert snapshot == harness.row(job_id)
    assert (snapshot.state, snapshot.last_error) == ("cancelled", "why")


def test_cancel_03_a_done_job_is_not_cancellable_and_says_done(harness):
    _, job_id = make(harness, "done")
    with pytest.raises(JobNotCancellableError) as caught:
        cancel_job(job_id)
    assert caught.value.code == "X_JOB_NOT_CANCELLABLE"
    assert "'done'" in caught.value.message
    assert harness.row(job_id).state == "done"


def test_cancel_03_an_unknown_id_is_not_found(harness):
    missing = uuid.uuid4()
    with pytest.raises(JobNotFoundError) as caught:
        cancel_job(missing)
    assert caught.value.code == "X_JOB_NOT_FOUND"
    assert caught.value.message == f"no job {missing} exists"
    with pytest.raises(JobNotFoundError):
        harness.driver.jobs().cancel(missing, None)


def test_a_malformed_id_is_not_found_with_a_hint(harness):
    for call in (lambda: cancel_job("nope"), lambda: retry_job("42"), lambda: inspect_job("x")):
        with pytest.raises(JobNotFoundError) as caught:
            call()
        assert caught.value.code == "X_JOB_NOT_FOUND"
        assert "not a job id" in caught.value.hint


def test_ids_are_accepted_as_uuid_or_string(harness):
    _, job_id = make(harness, "ready")
    assert inspect_job(job_id) == inspect_job(str(job_id))
    assert cancel_job(str(job_id))["state"] == "cancelled"


@pytest.mark.parametrize("state", ["ready", "delayed", "suspended"])
def test_cancel_04_a_cancelled_job_is_never_claimed_again(harness, state):
    _, job_id = make(harness, state)
    cancel_job(job_id)
    harness.advance(7200)
    assert claim(harness.driver) == []
    assert harness.row(job_id).state == "cancelled"


def test_cancel_05_06_the_holder_of_a_cancelled_job_settles_nothing(harness):
    held, job_id = make(harness, "running")
    cancel_job(job_id, reason="operator")
    driver = harness.driver
    assert driver.runs().heartbeat(held.id, held.lease_token, 30) is False
    assert driver.runs().complete([Complete(held.id, held.lease_token, '{"late": 1}')]) == set()
    assert not driver.runs().retry(RetryAt(held.id, held.lease_token, delay=1, error="late"))
    assert not driver.runs().finish(Finish(held.id, held.lease_token, "dead", error="late"))
    late = StepRecord(run_id=held.run_id, name="late", status="completed", started_at=BASE)
    assert driver.steps().put(late, job_id=held.id, lease_token=held.lease_token) is False
    row = harness.row(job_id)
    assert (row.state, row.last_error, row.result, row.attempt) == (
        "cancelled",
        "operator",
        None,
        1,
    )
    assert step_names(harness, held.run_id) == []
    harness.advance(60)  # the lease it held would have lapsed by now
    assert claim(harness.driver) == []


def test_q_09_cancelling_a_cancelled_job_is_a_no_op(harness):
    _, job_id = make(harness, "ready")
    first = cancel_job(job_id, reason="first")
    harness.advance(5)
    before = harness.row(job_id)
    again = cancel_job(job_id, reason="second")
    assert harness.row(job_id) == before
    assert again["last_error"] == "first"
    assert again["updated_at"] == before.updated_at.isoformat()
    assert (first["state"], again["state"]) == ("cancelled", "cancelled")


@pytest.mark.parametrize("state", ["done", "dead", "failed"])
def test_q_09_drv_04_g_cancel_of_a_finished_job_is_refused(harness, state):
    _, job_id = make(harness, state)
    before = harness.row(job_id)
    with pytest.raises(JobNotCancellableError) as caught:
        harness.driver.jobs().cancel(job_id, "late")
    assert caught.value.code == "X_JOB_NOT_CANCELLABLE"
    assert f"'{state}'" in caught.value.message
    if state != "done":
        assert f"retry_job('{job_id}')" in caught.value.hint
    assert harness.row(job_id) == before


# --- requeue ---------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["dead", "failed"])
def test_insp_06_drv_04_k_q_03_requeue_makes_a_finished_job_ready_on_the_same_run(harness, state):
    held, job_id = make(harness, state, error="ValueError: x")
    harness.advance(3600)
    before = harness.row(job_id)
    trace = retry_job(job_id)
    row = harness.row(job_id)
    assert (row.state, row.attempt, row.run_id) == ("ready", 0, held.run_id)
    assert (row.stop_reason, row.last_error) == (None, "ValueError: x")
    assert (row.visible_at, row.claimed_by, row.lease_token) == (None, None, None)
    assert row.run_at == row.updated_at
    assert row.run_at - before.run_at >= timedelta(seconds=3600)
    assert (trace["state"], trace["attempt"], trace["run_id"]) == ("ready", 0, str(held.run_id))
    [again] = claim(harness.driver)
    assert (again.id, again.run_id, again.attempt) == (job_id, held.run_id, 1)


@pytest.mark.parametrize("state", ["ready", "delayed", "running", "suspended", "done"])
def test_q_03_requeue_of_a_live_or_done_job_is_refused(harness, state):
    _, job_id = make(harness, state)
    before = harness.row(job_id)
    with pytest.raises(JobNotRetryableError) as caught:
        retry_job(job_id, force=True)
    assert caught.value.code == "X_JOB_NOT_RETRYABLE"
    assert f"'{state}'" in caught.value.message
    expected = "enqueue it again" if state == "done" else "it has not finished"
    assert expected in caught.value.hint
    assert harness.row(job_id) == before


def test_q_03_a_cancelled_job_is_requeued_only_with_force(harness):
    held, job_id = make(harness, "cancelled")
    before = harness.row(job_id)
    with pytest.raises(JobNotRetryableError) as caught:
        retry_job(job_id)
    assert caught.value.code == "X_JOB_NOT_RETRYABLE"
    assert "'cancelled'" in caught.value.message
    assert "force=True" in caught.value.hint
    assert harness.row(job_id) == before
    trace = retry_job(job_id, force=True)
    assert (trace["state"], trace["attempt"], trace["stop_reason"]) == ("ready", 0, None)
    assert trace["last_error"] == "stop"
    assert trace["run_id"] == str(held.run_id)


def test_requeue_of_an_unknown_job_is_not_found(harness):
    missing = uuid.uuid4()
    with pytest.raises(JobNotFoundError) as caught:
        harness.driver.jobs().requeue(missing, from_step=None, force=False)
    assert caught.value.code == "X_JOB_NOT_FOUND"
    assert caught.value.message == f"no job {missing} exists"


def test_requeue_keeps_every_step_without_from_step(harness):
    held, job_id = make(harness, "running")
    put_steps(harness, held, "a", "b", "c")
    harness.driver.runs().finish(Finish(held.id, held.lease_token, "dead", error="x"))
    retry_job(job_id)
    assert step_names(harness, held.run_id) == ["a", "b", "c"]


def test_insp_06_q_04_drv_04_k_from_step_deletes_it_and_every_later_step(harness):
    held, job_id = make(harness, "running")
    put_steps(harness, held, "load", "charge", "email", "audit")
    harness.driver.runs().finish(Finish(held.id, held.lease_token, "dead", error="x"))
    trace = retry_job(job_id, from_step="email")
    assert [s["name"] for s in trace["steps"]] == ["load", "charge"]
    assert step_names(harness, held.run_id) == ["load", "charge"]
    assert harness.row(job_id).state == "ready"


def test_q_04_later_means_later_started_at_then_later_written(harness):
    held, job_id = make(harness, "running")
    driver, token = harness.driver, held.lease_token
    for name, offset in (("late", 9), ("first", 0), ("tie-a", 5), ("tie-b", 5)):
        record = StepRecord(
            run_id=held.run_id,
            name=name,
            status="completed",
            started_at=BASE + timedelta(seconds=offset),
        )
        assert driver.steps().put(record, job_id=held.id, lease_token=token)
    assert step_names(harness, held.run_id) == ["first", "tie-a", "tie-b", "late"]
    driver.runs().finish(Finish(held.id, token, "failed", error="x"))
    driver.jobs().requeue(job_id, from_step="tie-b", force=False)
    assert step_names(harness, held.run_id) == ["first", "tie-a"]


def test_q_04_from_the_first_step_deletes_the_whole_trace(harness):
    held, job_id = make(harness, "running")
    put_steps(harness, held, "a", "b")
    harness.driver.runs().finish(Finish(held.id, held.lease_token, "dead", error="x"))
    assert retry_job(job_id, from_step="a")["steps"] == []


def test_q_04_an_unknown_step_is_an_invariant_error_and_changes_nothing(harness):
    held, job_id = make(harness, "running")
    put_steps(harness, held, "load", "charge")
    harness.driver.runs().finish(Finish(held.id, held.lease_token, "dead", error="x"))
    before = harness.row(job_id)
    with pytest.raises(InvariantError) as caught:
        retry_job(job_id, from_step="ship")
    assert caught.value.code == "X_INVARIANT"
    assert "'ship'" in caught.value.message
    assert caught.value.hint == "its steps, oldest first: 'load', 'charge'"
    assert harness.row(job_id) == before
    assert step_names(harness, held.run_id) == ["load", "charge"]


def test_q_04_a_refused_state_wins_over_the_step_check(harness):
    held, job_id = make(harness, "running")
    put_steps(harness, held, "a")
    with pytest.raises(JobNotRetryableError):
        retry_job(job_id, from_step="a")
    assert step_names(harness, held.run_id) == ["a"]


def test_requeue_refuses_when_a_live_job_holds_the_key(harness):
    _, dead_id = make(harness, "dead")
    live = jobs.ok.enqueue(n=1)  # the dead row freed the key (ENQ-08)
    assert not live.deduped
    before = harness.row(dead_id)
    with pytest.raises(JobDuplicateError) as caught:
        retry_job(dead_id)
    assert caught.value.code == "X_JOB_DUPLICATE"
    assert str(live.id) in caught.value.message
    assert harness.row(dead_id) == before


def test_requeue_wakes_the_queues_listeners(live_harness):
    """A requeued job is ready now: idle workers hear of it (pg_notify on commit / callback)."""
    _, job_id = make(live_harness, "dead")
    woken = threading.Event()
    listener = live_harness.driver.runs().notify_on_ready(["default"], woken.set)
    try:
        if live_harness.driver.name == "postgres":
            assert woken.wait(10)  # its listener calls back once, when it starts listening
            woken.clear()
        retry_job(job_id)
        assert woken.wait(10)
    finally:
        listener.stop()


# --- inspect_job -----------------------------------------------------------------------------


def test_insp_02_an_unknown_id_is_none(harness):
    assert inspect_job(uuid.uuid4()) is None


def test_insp_02_03_the_trace_is_plain_json_with_steps_in_seconds(harness):
    """SPEC INSP-07: both drivers answer it; no operator call is refused for lack of
    introspection."""
    handle = jobs.ok.using(tenant_id="acme", enqueued_by="user:7")
    enqueued = handle.enqueue(n=4)
    [held] = claim(harness.driver)
    put_steps(harness, held, "load", "charge")
    waiting = StepRecord(
        run_id=held.run_id,
        name="nap",
        status="sleeping",
        started_at=BASE + timedelta(seconds=10),
        wake_at=BASE + timedelta(hours=1),
    )
    assert harness.driver.steps().put(waiting, job_id=held.id, lease_token=held.lease_token)
    trace = inspect_job(enqueued.id)
    assert json.loads(json.dumps(trace.to_json())) == trace.to_json() == trace
    row = harness.row(enqueued.id)
    assert {k: v for k, v in trace.items() if k not in ("steps", "retry_delays")} == {
        "id": str(enqueued.id),
        "name": "tests.jobs.ok",
        "queue": "default",
        "state": "running",
        "attempt": 1,
        "max_attempts": 3,
        "priority": 0,
        "idempotency_key": "ok:4",
        "run_id": str(enqueued.run_id),
        "run_at": row.run_at.isoformat(),
        "created_at": row.created_at.isoformat(),
        "updated_at": row.updated_at.isoformat(),
        "started_at": row.started_at.isoformat(),
        "last_attempted_at": row.last_attempted_at.isoformat(),
        "attempted_by": row.attempted_by,
        "last_error": None,
        "stop_reason": None,
        "input": {"n": 4},
        "result": None,
        "tenant_id": "acme",
        "traceparent": None,
        "enqueued_by": "user:7",
        "attempts": [],  # no attempt has failed
        "backfill": None,  # not a backfill's pass (tests/backfill/test_cli.py)
        "expires_at": None,  # the job controls (tests/run/test_controls.py)
        "snoozes": 0,
        "progress": None,
        "dependencies": None,  # it waits for no job and none waits for it (issue 32)
        "version": 1,  # tests.jobs.* declare version 1 (issue 44)
        "parked": False,
    }
    load, charge, nap = trace["steps"]
    assert load == {
        "name": "load",
        "status": "completed",
        "started_at": "2026-03-01T12:00:00+00:00",
        "completed_at": "2026-03-01T12:00:00.250000+00:00",
        "wake_at": None,
        "duration": 0.25,
        "attempts": 1,
        "error": None,
        "output": {"step": "load"},
    }
    assert charge["started_at"] == "2026-03-01T12:00:01+00:00"
    assert charge["duration"] == 0.25
    assert (nap["status"], nap["completed_at"], nap["duration"]) == ("sleeping", None, None)
    assert nap["wake_at"] == "2026-03-01T13:00:00+00:00"


def test_insp_03_retry_delays_are_the_registered_schedule_in_seconds(harness):
    _, job_id = make(harness, "ready")
    assert inspect_job(job_id)["retry_delays"] == [0.01, 0.02]  # tests.jobs.FAST, no jitter


def test_insp_03_an_unregistered_name_has_no_retry_delays(harness):
    request = EnqueueRequest(
        name="tests.jobs.gone",
        queue="default",
        input={},
        input_json="{}",
        idempotency_key="k",
        max_attempts=3,
    )
    enqueued = harness.driver.jobs().enqueue(request)
    trace = inspect_job(enqueued.id)
    assert (trace["name"], trace["retry_delays"], trace["steps"]) == ("tests.jobs.gone", [], [])


# --- dead letters and queues -----------------------------------------------------------------


def test_insp_05_dead_letters_newest_first_with_the_retry_command(harness):
    _, older = make(harness, "dead", n=1, error="E1")
    harness.advance(10)
    _, newer = make(harness, "dead", n=2, error="E2")
    make(harness, "failed", n=3)  # not a dead letter
    letters = inspect_dead_letters()
    assert [d["id"] for d in letters] == [str(newer), str(older)]
    first = letters[0]
    assert first == {
        "id": str(newer),
        "name": "tests.jobs.ok",
        "queue": "default",
        "attempt": 1,
        "last_error": "E2",
        "stop_reason": None,
        "failed_at": harness.row(newer).updated_at.isoformat(),
        "retry_command": f"python manage.py xjobs retry {newer}",
    }
    assert [d["id"] for d in inspect_dead_letters(limit=1)] == [str(newer)]
    with pytest.raises(InvariantError):
        inspect_dead_letters(limit=0)


def test_insp_01_no_queues_means_zeros(harness):
    assert inspect_queues() == {
        "driver": harness.driver.name,
        "queues": [],
        "totals": {"ready": 0, "delayed": 0, "running": 0, "suspended": 0, "dead": 0},
        "oldest_ready_seconds": 0.0,
        # where they were read: the jobs database (none for the memory driver), current
        "read_from": {
            "database": harness.driver.database,
            "replica": False,
            "standby": False,
            "lag_seconds": 0.0,
            "problem": None,
        },
    }


def test_insp_01_totals_sum_the_queues_and_oldest_is_the_max(harness):
    """SPEC INSP-07: both drivers answer it."""
    jobs.on_other_queue.enqueue(n=1)
    harness.advance(100)
    make(harness, "dead", n=1)
    make(harness, "running", n=2)
    make(harness, "suspended", n=3)
    make(harness, "delayed", n=4)
    make(harness, "ready", n=5)
    harness.advance(20)
    report = inspect_queues()
    assert [q["queue"] for q in report["queues"]] == ["default", "other"]
    assert report["totals"] == {"ready": 2, "delayed": 1, "running": 1, "suspended": 1, "dead": 1}
    other = report["queues"][1]
    assert (other["ready"], other["dead"]) == (1, 0)
    assert 120 <= other["oldest_ready_seconds"] < 150
    assert report["oldest_ready_seconds"] == other["oldest_ready_seconds"]
    assert report["queues"][0]["oldest_ready_seconds"] < other["oldest_ready_seconds"]


@pytest.mark.parametrize(
    "by", ["ops\x00alice", "ops\udc80", "ops\x1b[2Jalice", "o" * 201], ids=repr
)
def test_an_operators_by_is_checked_before_anything_is_stored(harness, by):
    """Issue 40: ``pause_queue(by=)`` with a NUL or a lone surrogate raised the driver's error
    (the memory driver stored it); ``by`` is a name stored and printed as it is, so it is
    checked as a cron's name is: every operator call that takes it, alike."""
    from django_xjobs import pause_cron, resume_cron, set_queue_limit
    from django_xjobs.errors import InvariantError
    from django_xjobs.operations import pause_queue, resume_queue

    for call in (
        lambda: pause_queue("emails", by=by),
        lambda: resume_queue("emails", by=by),
        lambda: set_queue_limit("emails", 3, by=by),
        lambda: pause_cron("tests.daily", by=by),
        lambda: resume_cron("tests.daily", by=by),
    ):
        with pytest.raises(InvariantError, match=r"^X_INVARIANT: by "):
            call()
    assert "emails" not in {q["queue"] for q in inspect_queues()["queues"]}


# --- run now (issue 42) ----------------------------------------------------------------------


def test_run_job_now_makes_a_delayed_job_due_in_its_place(harness, caplog):
    from io import StringIO

    from django.core.management import call_command

    from django_xjobs import metrics, run_job_now
    from django_xjobs.errors import JobNotWaitingError

    later = jobs.ok.using(delay="1h", priority=3).enqueue(n=1)
    before = metrics.value("xjobs_jobs_run_now_total", queue="default")
    with caplog.at_level("INFO", logger="django_xjobs"):
        trace = run_job_now(later.id, by="ops:alice")
    assert trace["state"] == "ready"
    row = harness.row(later.id)
    assert row.run_at <= harness.driver.steps().now() and (row.priority, row.attempt) == (3, 0)
    assert metrics.value("xjobs_jobs_run_now_total", queue="default") == before + 1
    assert any(
        "xjobs.job.run_now" in r.getMessage() and "ops:alice" in r.getMessage()
        for r in caplog.records
    )
    [held] = claim(harness.driver)
    assert held.id == later.id
    with pytest.raises(JobNotWaitingError, match="running"):
        run_job_now(later.id)  # running now: nothing to bring forward
    harness.driver.runs().complete([Complete(held.id, held.lease_token)])
    with pytest.raises(JobNotWaitingError, match="retry_job"):
        run_job_now(later.id)
    with pytest.raises(JobNotFoundError):
        run_job_now(uuid.UUID(int=7))
    backing_off = jobs.ok.enqueue(n=2)
    [held] = claim(harness.driver)
    harness.driver.runs().retry(RetryAt(held.id, held.lease_token, delay=600, error="boom"))
    out = StringIO()
    call_command("xjobs", "run-now", str(backing_off.id), "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["state"] == "ready" and data["attempt"] == 1  # its attempt is kept
    out = StringIO()
    due = jobs.ok.enqueue(n=3)
    call_command("xjobs", "run-now", str(due.id), stdout=out)  # due already: changes nothing
    assert "is due now" in out.getvalue()


def test_run_job_now_refuses_a_parked_job(harness):
    from django_xjobs import run_job_now
    from django_xjobs.errors import JobNotWaitingError

    first = jobs.ok.enqueue(n=1)
    waits = jobs.ok.using(after=[first.id]).enqueue(n=2)
    with pytest.raises(JobNotWaitingError, match="xjobs why"):
        run_job_now(waits.id)
    assert harness.row(waits.id).state == "suspended"
