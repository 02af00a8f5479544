"""``ctx.step.patched(name)`` (issue 44, SPEC VER-10/11): True for a run that reaches the patch
fresh, and again at every replay of it, even one after a crash; False for a run started under
the code without the patch that had gone past that point, at every replay too. Each case runs
on the memory driver and the PostgreSQL driver (``harness``), through the worker's executor;
``tests.versioned.patched`` writes its steps to the ledger."""

from __future__ import annotations

import logging
import uuid

import pytest
from django.utils import timezone

from django_xjobs.errors import JobAbortedError, StepDuplicateError, StepPatchError
from django_xjobs.run.execution import Outcome
from django_xjobs.testing import FrozenClock, run_until_idle
from tests import versioned
from tests.models import Ledger
from tests.steps.test_steps import claimed_steps

HOUR = 3600.0


@pytest.fixture
def clock():
    return FrozenClock(timezone.now())


@pytest.fixture
def before_the_patch(monkeypatch):
    """The code from before the patch is deployed until ``deploy()`` is called."""
    monkeypatch.setitem(versioned.DEPLOYED, "patch", False)
    return lambda: monkeypatch.setitem(versioned.DEPLOYED, "patch", True)


def ledger(token: str) -> list[str]:
    return list(Ledger.objects.filter(token=token).values_list("phase", flat=True))


def steps_of(harness, job_id) -> dict[str, object]:
    run_id = harness.row(job_id).run_id
    return {s.name: s.output for s in harness.driver.steps().list(run_id)}


def wake(harness) -> None:
    harness.driver.jobs().age(HOUR + 1)


def test_ver_10_a_new_run_takes_the_patch_and_its_replays_answer_the_same(harness, clock):
    token = f"t-{uuid.uuid4()}"
    job_id = versioned.patched.enqueue(token=token).id
    [first] = run_until_idle(clock=clock)
    assert first.outcome == Outcome.SUSPENDED
    assert steps_of(harness, job_id)["patch:fraud-check"] is True  # the marker, recorded
    wake(harness)
    [done] = run_until_idle(clock=clock)  # a replay: the marker is stored before later steps
    assert done.outcome == Outcome.COMPLETED
    assert done.replayed == ("before", "patch:fraud-check", "fraud-check")
    assert harness.row(job_id).result == {"checked": True}
    assert ledger(token) == ["before", "fraud-check", "after"]


def test_ver_10_an_old_run_past_the_patch_never_takes_it(harness, clock, before_the_patch, caplog):
    token = f"t-{uuid.uuid4()}"
    job_id = versioned.patched.enqueue(token=token).id
    run_until_idle(clock=clock)  # the old code: its first step, then the nap
    assert ledger(token) == ["before"]
    before_the_patch()  # the deploy that adds the fraud check
    wake(harness)
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        [done] = run_until_idle(clock=clock)
    assert done.outcome == Outcome.COMPLETED
    assert harness.row(job_id).result == {"checked": False}
    assert ledger(token) == ["before", "after"]  # the new branch never ran
    assert "patch:fraud-check" not in steps_of(harness, job_id)  # nothing recorded
    # an old run keeps its positions: the patch takes no place in its history
    assert "xjobs.step.reordered" not in caplog.text


@pytest.mark.parametrize("old", [False, True], ids=["new-run", "old-run"])
def test_ver_11_a_replay_after_a_crash_answers_as_the_run_first_did(
    harness, clock, monkeypatch, old
):
    """The run's last step fails once (the attempt crashes), so its second attempt replays
    every step before it: a new run replays its marker as True, an old one asks again and is
    told False again."""
    monkeypatch.setitem(versioned.DEPLOYED, "patch", not old)
    token = f"t-{uuid.uuid4()}"
    job_id = versioned.patched.enqueue(token=token, fail_after=True).id
    run_until_idle(clock=clock)
    monkeypatch.setitem(versioned.DEPLOYED, "patch", True)
    wake(harness)
    [crashed] = run_until_idle(clock=clock)
    assert crashed.outcome == Outcome.RETRIED
    harness.driver.jobs().age(60)  # past its retry's backoff
    [done] = run_until_idle(clock=clock)
    assert done.outcome == Outcome.COMPLETED
    assert harness.row(job_id).result == {"checked": not old}
    expected = ["before", "after"] if old else ["before", "fraud-check", "after"]
    assert ledger(token) == expected


def test_ver_10_an_async_handler_awaits_patched(harness, clock, before_the_patch):
    old = f"t-{uuid.uuid4()}"
    old_id = versioned.patched_async.enqueue(token=old).id
    run_until_idle(clock=clock)
    before_the_patch()
    new = f"t-{uuid.uuid4()}"
    new_id = versioned.patched_async.enqueue(token=new).id
    run_until_idle(clock=clock)
    wake(harness)
    run_until_idle(clock=clock)
    assert harness.row(old_id).result == {"checked": False}
    assert harness.row(new_id).result == {"checked": True}
    assert (ledger(old), ledger(new)) == ([], ["fraud"])


def test_ver_12_a_patch_asked_twice_in_one_run_is_refused(harness, clock):
    _, steps, _ = claimed_steps(harness, clock, versioned.patched, token="twice")
    assert steps.patched("fraud-check") is True
    with pytest.raises(StepPatchError) as caught:
        steps.patched("fraud-check")
    assert caught.value.code == "X_STEP_PATCH" and "twice" in caught.value.message
    assert not isinstance(caught.value, StepDuplicateError)
    assert steps.patched("other-change") is True  # another name is another patch


@pytest.mark.parametrize("bad", ["", None, 7])
def test_ver_12_a_patch_needs_a_name(harness, clock, bad):
    _, steps, _ = claimed_steps(harness, clock, versioned.patched, token="unnamed")
    with pytest.raises(StepPatchError):
        steps.patched(bad)


def test_ver_12_a_patch_asked_once_the_attempt_ended_is_outside_a_running_job(harness, clock):
    _, steps, signal = claimed_steps(harness, clock, versioned.patched, token="late")
    steps.ended = True
    signal.abort(JobAbortedError("the attempt has ended"))
    with pytest.raises(StepPatchError) as caught:
        steps.patched("fraud-check")
    assert "outside a running job" in caught.value.message


def test_ver_12_a_patch_asked_by_a_stopped_run_writes_nothing(harness, clock):
    job, steps, signal = claimed_steps(harness, clock, versioned.patched, token="stopped")
    signal.abort(JobAbortedError("cancelled"))
    with pytest.raises(JobAbortedError):
        steps.patched("fraud-check")
    assert harness.driver.steps().list(job.run_id) == []
