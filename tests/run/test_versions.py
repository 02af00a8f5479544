"""What a worker of version 2 of a job does with a run suspended under version 1 (issue 44):
each ``old_runs`` policy on both drivers, through the worker's own claim and executor
(``run_until_idle``). Version 1 is a deploy of the same handler with ``version=1`` declared;
the ledger the handlers write says which steps ran, and how many times (SPEC VER-06..09)."""

from __future__ import annotations

import uuid
from contextlib import contextmanager

import pytest
from django.utils import timezone

from django_xjobs import operations, why_job
from django_xjobs.declarations import registry
from django_xjobs.drivers.contract import DeclaredVersions
from django_xjobs.errors import JobNotRetryableError
from django_xjobs.run.execution import Outcome
from django_xjobs.testing import FrozenClock, run_until_idle
from tests import versioned
from tests.models import Ledger

HOUR = 3600.0


@pytest.fixture
def clock():
    return FrozenClock(timezone.now())


@contextmanager
def deployed(monkeypatch, handle, version: int):
    """Workers run ``handle`` declared at ``version`` (its claims are told so too)."""
    with monkeypatch.context() as patch:
        patch.setattr(handle, "version", version)
        declared = DeclaredVersions({handle.name: (version, handle.old_runs == "park")})
        patch.setattr(registry, "declared_versions", lambda: declared)
        yield


def ledger(token: str) -> list[str]:
    return list(Ledger.objects.filter(token=token).values_list("phase", flat=True))


def suspended_under_v1(harness, monkeypatch, clock, handle) -> tuple[str, uuid.UUID]:
    """A run of ``handle`` that did its first step under version 1 and sleeps in its second;
    its nap is over, so it is due for whichever worker claims it next."""
    token = f"t-{uuid.uuid4()}"
    job_id = handle.enqueue(token=token).id
    with deployed(monkeypatch, handle, 1):
        [run] = run_until_idle(clock=clock)
    assert run.outcome == Outcome.SUSPENDED
    row = harness.row(job_id)
    assert (row.state, row.version, ledger(token)) == ("suspended", 1, ["before"])
    harness.driver.jobs().age(HOUR + 1)
    return token, job_id


def test_ver_06_replay_a_worker_of_version_2_replays_the_old_run_by_name(
    harness, monkeypatch, clock
):
    token, job_id = suspended_under_v1(harness, monkeypatch, clock, versioned.replays)
    [run] = run_until_idle(clock=clock)
    assert run.outcome == Outcome.COMPLETED
    assert run.replayed == ("before",)  # steps kept, found by name
    assert ledger(token) == ["before", "after@v2"]
    row = harness.row(job_id)
    assert (row.state, row.version) == ("done", 1)  # it keeps the version it started under


def test_ver_07_restart_a_worker_of_version_2_discards_the_steps_and_starts_again(
    harness, monkeypatch, clock
):
    token, job_id = suspended_under_v1(harness, monkeypatch, clock, versioned.restarts)
    [run] = run_until_idle(clock=clock)
    assert run.outcome == Outcome.SUSPENDED  # its first step again, then the nap again
    assert ledger(token) == ["before", "before"]
    row = harness.row(job_id)
    assert (row.state, row.version, row.attempt) == ("suspended", 2, 0)
    [restarted] = row.errors  # the restart is in its history, not counted as a failure
    assert (restarted.outcome, restarted.code) == ("restarted", "X_JOB_VERSION")
    assert "version 2" in restarted.message and "version 1" in restarted.message
    steps = {s.name: s.status for s in harness.driver.steps().list(row.run_id)}
    assert steps == {"before": "completed", "nap": "sleeping"}  # the new run's own
    harness.driver.jobs().age(HOUR + 1)
    [done] = run_until_idle(clock=clock)
    assert done.outcome == Outcome.COMPLETED and done.replayed == ("before",)
    assert ledger(token) == ["before", "before", "after@v2"]


def test_ver_08_park_a_worker_of_version_2_parks_the_old_run_and_never_spins_on_it(
    harness, monkeypatch, clock
):
    token, job_id = suspended_under_v1(harness, monkeypatch, clock, versioned.parks)
    [run] = run_until_idle(clock=clock)
    assert run.outcome == Outcome.SUSPENDED
    row = harness.row(job_id)
    assert (row.state, row.parked, row.version, row.attempt) == ("suspended", True, 1, 0)
    assert row.last_error.startswith("X_JOB_VERSION: ")
    assert "xjobs retry" in row.last_error and "--restart" in row.last_error  # the hint
    assert [(e.outcome, e.code) for e in row.errors] == [("parked", "X_JOB_VERSION")]
    assert ledger(token) == ["before"]  # nothing of it ran
    claimed_before = harness.row(job_id).last_attempted_at
    assert run_until_idle(clock=clock) == []  # due, yet passed by: no claim, no hand-back
    assert harness.row(job_id).last_attempted_at == claimed_before
    trace = operations.inspect_job(job_id)
    assert (trace.version, trace.parked) == (1, True)
    [why] = [r for r in why_job(job_id).reasons if r.code == "version_parked"]
    assert why.detail == {"version": 1, "declared": 2}
    # a worker of its version takes it, replays its first step and finishes it
    with deployed(monkeypatch, versioned.parks, 1):
        [done] = run_until_idle(clock=clock)
    assert done.outcome == Outcome.COMPLETED and done.replayed == ("before",)
    row = harness.row(job_id)
    assert (row.state, row.parked, row.version) == ("done", False, 1)


def test_ver_09_retry_restart_starts_a_parked_run_again_under_this_code(
    harness, monkeypatch, clock
):
    token, job_id = suspended_under_v1(harness, monkeypatch, clock, versioned.parks)
    run_until_idle(clock=clock)
    assert harness.row(job_id).parked
    trace = operations.retry_job(job_id, restart=True)
    assert (trace.state, trace.version, trace.parked, trace.steps) == ("ready", None, False, [])
    [run] = run_until_idle(clock=clock)  # a first claim again: stamped version 2
    assert run.outcome == Outcome.SUSPENDED
    row = harness.row(job_id)
    assert (row.version, row.parked) == (2, False)
    assert ledger(token) == ["before", "before"]


def test_ver_09_retry_restart_refuses_a_live_run_that_is_not_parked(harness, monkeypatch, clock):
    _, job_id = suspended_under_v1(harness, monkeypatch, clock, versioned.replays)
    with pytest.raises(JobNotRetryableError):
        operations.retry_job(job_id, restart=True)
    assert harness.row(job_id).state == "suspended"


def test_ver_09_retry_restart_of_a_dead_run_deletes_every_step(harness, clock):
    token = f"t-{uuid.uuid4()}"
    job_id = versioned.replays.enqueue(token=token).id
    run_until_idle(clock=clock)
    held = harness.row(job_id)
    operations.cancel_job(job_id)
    trace = operations.retry_job(job_id, restart=True, force=True)
    assert (trace.state, trace.steps, trace.version) == ("ready", [], None)
    assert harness.driver.steps().list(held.run_id) == []


def test_ver_09_restart_and_from_step_are_refused_together(db):
    from django_xjobs.errors import InvariantError

    with pytest.raises(InvariantError):
        operations.retry_job(uuid.uuid4(), from_step="a", restart=True)
