"""``ctx.step.atomic(name)``: exactly-once database effects (issue 17 section 1), each case on
the memory driver and the PostgreSQL driver. The process test with killed and frozen workers
is tests/steps/test_atomic_fleet.py."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connections, transaction
from django.test import override_settings
from django.utils import timezone

from django_xjobs import cancel_job
from django_xjobs.clock import FrozenClock
from django_xjobs.errors import (
    JobAbortedError,
    JobCancelledError,
    LeaseLostError,
    StepAtomicAliasError,
    StepAtomicNestedError,
    StepOutputInvalidError,
)
from django_xjobs.models import OutboxEntry
from django_xjobs.run.execution import Outcome
from django_xjobs.run.stop import StopSignal
from django_xjobs.steps import Steps
from django_xjobs.steps.atomic import AtomicStep
from django_xjobs.testing import run_to_completion, run_until_idle
from tests import jobs
from tests.models import Effect, Ledger

OUTBOX_ON = {"QUEUES": ["other"], "OUTBOX": "auto"}


@pytest.fixture
def clock():
    return FrozenClock(timezone.now())


def claimed(harness, **inputs):
    """A claimed run of ``atomic_effects`` and a step runner for it, driven by hand."""
    jobs.atomic_effects.enqueue(token=f"t-{uuid.uuid4()}", **inputs)
    [job] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id="w"
    )
    return job, runner(harness, job)


def runner(harness, job, signal=None):
    return Steps(
        job=job,
        records=harness.driver.steps().list(job.run_id),
        store=harness.driver.steps(),
        events=harness.driver.events(),
        signal=signal or StopSignal(),
    )


def effects(job):
    return list(Effect.objects.filter(job_id=job.id).values_list("step", flat=True))


def record(harness, job, name):
    return {r.name: r for r in harness.driver.steps().list(job.run_id)}.get(name)


def write(job, step="reserve"):
    Effect.objects.create(job_id=job.id, step=step, attempt=job.attempt, pid=0)


def take_lease(harness):
    """Another worker claims the job once its lease has lapsed."""
    harness.advance(60)
    [again] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id="x"
    )
    return again


# --- commit, rollback -------------------------------------------------------------------------


def test_the_blocks_writes_the_record_and_the_result_commit_together(harness):
    job, steps = claimed(harness)
    with steps.atomic("reserve") as step:
        assert isinstance(step, AtomicStep)
        assert (step.name, step.done, step.result) == ("reserve", False, None)
        write(job)
        assert record(harness, job, "reserve") is None  # the record is the block's last write
        step.result = {"reserved": 1}
    assert effects(job) == ["reserve"]
    stored = record(harness, job, "reserve")
    assert (stored.status, stored.output, stored.attempts) == ("completed", {"reserved": 1}, 1)


def test_an_exception_in_the_block_rolls_its_writes_back_and_records_the_failure(harness):
    job, steps = claimed(harness)
    with pytest.raises(RuntimeError, match="out of stock"), steps.atomic("reserve") as step:
        write(job)
        step.result = {"reserved": 1}
        raise RuntimeError("out of stock")
    assert effects(job) == []
    failed = record(harness, job, "reserve")
    assert (failed.status, failed.attempts) == ("failed", 1)
    assert "out of stock" in failed.error


def test_a_result_that_is_not_json_rolls_the_block_back(harness):
    job, steps = claimed(harness)
    with pytest.raises(StepOutputInvalidError), steps.atomic("reserve") as step:
        write(job)
        step.result = {"at": timezone.now()}
    assert effects(job) == []
    assert record(harness, job, "reserve").status == "failed"


# --- replay -----------------------------------------------------------------------------------


def test_a_replayed_step_stops_at_its_first_statement_and_gives_the_stored_result(harness):
    job, steps = claimed(harness)
    with steps.atomic("reserve") as step:
        write(job)
        step.result = {"reserved": 1}
    reached = []
    again = runner(harness, job)  # the next attempt of the same run
    with again.atomic("reserve") as step:
        assert step.done
        reached.append("before")
        try:
            write(job)
        except Exception:  # a handler's catch-all does not keep a replayed block going
            reached.append("caught")
        reached.append("after")
        step.result = {"reserved": 2}
    assert reached == ["before"]
    assert step.result == {"reserved": 1}
    assert effects(job) == ["reserve"]
    assert again.replayed_names == ["reserve"]


def test_the_users_own_transaction_inside_the_block_nests_and_replays(harness):
    job, steps = claimed(harness)
    with pytest.raises(RuntimeError), steps.atomic("reserve"):
        with transaction.atomic():  # a savepoint of the block's transaction
            write(job, "inner")
        raise RuntimeError("the whole block rolls back, the inner block with it")
    assert effects(job) == []
    with runner(harness, job).atomic("reserve-again") as step:
        with transaction.atomic():
            write(job, "inner")
        step.result = 1
    # replayed: the block stops at the inner block's savepoint, or at its first statement
    with runner(harness, job).atomic("reserve-again") as step, transaction.atomic():
        write(job, "inner")
    assert (step.done, step.result) == (True, 1)
    assert effects(job) == ["inner"]


def test_the_callable_form_is_skipped_entirely_on_replay(harness):
    job, steps = claimed(harness)
    calls = []

    def reserve():
        calls.append(1)
        write(job)
        return {"reserved": len(calls)}

    assert steps.atomic("reserve", reserve) == {"reserved": 1}
    assert runner(harness, job).atomic("reserve", reserve) == {"reserved": 1}
    assert calls == [1]
    assert effects(job) == ["reserve"]


@pytest.mark.parametrize("harness", ["postgres"], indirect=True)  # memory stages in memory
def test_an_enqueue_in_the_block_is_staged_in_its_transaction(harness):
    _, steps = claimed(harness)
    with override_settings(XJOBS=OUTBOX_ON):
        with pytest.raises(RuntimeError), steps.atomic("follow-up"):
            jobs.ok.enqueue(n=1)
            raise RuntimeError("rolled back")
        assert not OutboxEntry.objects.filter(job=jobs.ok.name).exists()
        with steps.atomic("follow-up-again"):
            jobs.ok.enqueue(n=2)
    [staged] = OutboxEntry.objects.filter(job=jobs.ok.name)
    assert staged.input == {"n": 2}


def test_a_job_that_fails_after_its_atomic_step_writes_once_over_two_attempts(harness, clock):
    job_id = jobs.atomic_effects.enqueue(token=f"t-{uuid.uuid4()}", fail_after=1).id
    runs = run_to_completion(job_id, clock=clock)
    assert [r.outcome for r in runs] == [Outcome.RETRIED, Outcome.COMPLETED]
    assert runs[-1].replayed == ("effect:0",)
    rows = Effect.objects.filter(job_id=job_id)
    assert sorted(rows.values_list("step", "attempt")) == [("effect:0", 1), ("effect:1", 2)]
    assert harness.row(job_id).result == [{"n": 0, "attempt": 1}, {"n": 1, "attempt": 2}]


def test_the_async_forms_commit_once_and_replay(harness, clock):
    job_id = jobs.atomic_effects_async.enqueue(token=f"t-{uuid.uuid4()}", fail_after=True).id
    runs = run_to_completion(job_id, clock=clock)
    assert [r.outcome for r in runs] == [Outcome.RETRIED, Outcome.COMPLETED]
    assert runs[-1].replayed == ("effect:0", "effect:1")
    rows = Effect.objects.filter(job_id=job_id)
    assert sorted(rows.values_list("step", "attempt")) == [("effect:0", 1), ("effect:1", 1)]
    assert harness.row(job_id).result == [{"attempt": 1}, 1]


def test_the_async_block_rolls_back_its_async_orm_writes(harness, clock):
    job_id = jobs.atomic_effects_async.enqueue(token=f"t-{uuid.uuid4()}", fail_in_block=True).id
    runs = run_to_completion(job_id, clock=clock)
    assert [r.outcome for r in runs] == [Outcome.RETRIED, Outcome.COMPLETED]
    rows = Effect.objects.filter(job_id=job_id)
    assert sorted(rows.values_list("step", "attempt")) == [("effect:0", 2), ("effect:1", 2)]


# --- the fence --------------------------------------------------------------------------------


def test_a_lease_lost_before_the_commit_rolls_everything_back(harness):
    job, steps = claimed(harness)
    with pytest.raises(LeaseLostError, match="rolled back"), steps.atomic("reserve") as step:
        write(job)
        again = take_lease(harness)
        step.result = {"reserved": 1}
    assert effects(job) == []
    assert record(harness, job, "reserve") is None
    assert again.lease_token != job.lease_token
    assert isinstance(steps.signal.reason, LeaseLostError)


def test_a_cancel_during_the_block_rolls_everything_back(harness):
    job, steps = claimed(harness)
    with pytest.raises(LeaseLostError), steps.atomic("reserve") as step:
        write(job)
        cancel_job(job.id, reason="operator")
        step.result = {"reserved": 1}
    assert effects(job) == []
    assert record(harness, job, "reserve") is None


def test_a_run_already_told_to_stop_commits_nothing(harness):
    job, steps = claimed(harness)
    with pytest.raises(JobAbortedError, match="X_JOB_CANCELLED"), steps.atomic("reserve"):
        write(job)
        steps.signal.abort(JobCancelledError("cancelled while the block ran"))
    assert effects(job) == []
    assert record(harness, job, "reserve") is None


def test_a_lease_taken_by_another_connection_mid_block_rolls_the_block_back(live_harness):
    """The re-claim commits on a connection of its own while the block is open: the real race,
    with the block's rows uncommitted and no lock held on the job row yet."""
    harness = live_harness
    job, steps = claimed(harness)
    taken = {}

    def other_worker():
        try:
            taken["job"] = take_lease(harness)
        finally:
            connections.close_all()

    with pytest.raises(LeaseLostError), steps.atomic("reserve") as step:
        write(job)
        thread = threading.Thread(target=other_worker)
        thread.start()
        thread.join(30)
        step.result = {"reserved": 1}
    assert taken["job"].id == job.id
    assert effects(job) == []
    assert record(harness, job, "reserve") is None
    assert harness.row(job.id).lease_token == taken["job"].lease_token


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.django_db(databases=["default", "orders"])
def test_a_write_to_another_database_is_refused_and_rolls_the_block_back(harness):
    job, steps = claimed(harness)
    with pytest.raises(StepAtomicAliasError, match="'orders'") as caught, steps.atomic("reserve"):
        write(job)
        assert Ledger.objects.using("orders").count() == 0  # reads pass
        with connections["orders"].cursor() as cursor:  # (the ORM would also break the test's
            cursor.execute("DELETE FROM tests_ledger")  # own transaction on "orders")
    assert caught.value.code == "X_STEP_ATOMIC_ALIAS"
    assert caught.value.retry == "terminal"
    assert effects(job) == []
    assert Ledger.objects.using("orders").count() == 0
    with connections["orders"].cursor() as cursor:  # the guard went with the block
        cursor.execute("SELECT 1")


def test_an_atomic_step_inside_the_callers_transaction_is_refused(harness):
    _, steps = claimed(harness)
    with pytest.raises(StepAtomicNestedError) as caught, transaction.atomic():
        steps.atomic("reserve").__enter__()
    assert caught.value.code == "X_STEP_ATOMIC_NESTED"
    with pytest.raises(StepAtomicNestedError), steps.atomic("outer"):
        steps.atomic("inner").__enter__()


def test_no_other_step_starts_inside_an_atomic_block(harness):
    job, steps = claimed(harness)
    refused = pytest.raises(StepAtomicNestedError, match="inside atomic step 'outer'")
    with refused, steps.atomic("outer"):
        write(job)
        steps.run("inner", lambda: 1)
    assert effects(job) == []
    assert steps.run("after", lambda: 2) == 2  # the block is closed: steps start again


@pytest.mark.django_db(databases=["default", "orders"])
def test_a_job_whose_block_writes_elsewhere_dead_letters_at_once(harness, clock):
    job_id = jobs.atomic_elsewhere.enqueue(n=1).id
    [run] = run_until_idle(clock=clock)
    assert run.outcome == Outcome.DEAD_LETTERED
    assert harness.row(job_id).last_error.startswith("X_STEP_ATOMIC_ALIAS")
