"""The operators' pauses of a job name or a limit key (issue 45, SPEC PAUSE-04/05), on both
drivers: ``pause_job``, ``resume_job`` and ``job_pauses``, and the claims told of them (the plain
claim, the sweep and the claim within declared limits) stepping over the runs they hold back."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_xjobs.drivers.contract import JobPause
from django_xjobs.limits.claims import ClaimLimits
from django_xjobs.limits.keys import SEPARATOR
from django_xjobs.limits.worker import declared_limits
from django_xjobs.worker.paused import PausedQueues
from tests import jobs
from tests.drivers.contract.support import VIS


def _claim(driver, queues, paused=frozenset(), limits=None, lapsed=False):
    more = {} if limits is None else {"limits": limits}
    return driver.runs().claim(
        queues=list(queues),
        limit=50,
        visibility_timeout=VIS,
        worker_id="w-pause",
        lapsed=lapsed,
        paused=paused,
        **more,
    )


def _targets(driver):
    return frozenset(p.target for p in driver.limits().job_pauses())


def test_pause_04_a_paused_job_name_is_stepped_over_by_every_claim(harness):
    """SPEC PAUSE-04: a job that declares no limit key is paused by name, until resumed."""
    limits = harness.driver.limits()
    held = jobs.ok.enqueue(n=1).id
    free = jobs.fails.enqueue(n=1).id
    pause = limits.pause_job("tests.jobs.ok", None, "ops:a")
    assert (pause.name, pause.key, pause.paused_by, pause.paused_until) == (
        "tests.jobs.ok",
        None,
        "ops:a",
        None,
    )
    assert _targets(harness.driver) == {"tests.jobs.ok"}
    # the sweep's claim (lapsed=True) and the cheaper one alike
    assert [c.id for c in _claim(harness.driver, ["default"], _targets(harness.driver))] == [free]
    assert [
        c.id for c in _claim(harness.driver, ["default"], _targets(harness.driver), lapsed=True)
    ] == []
    assert harness.row(held).state == "ready"
    harness.advance(10 * 365 * 86400)  # no end: still paused years later
    assert _targets(harness.driver) == {"tests.jobs.ok"}
    assert limits.resume_job("tests.jobs.ok", None) is True
    assert limits.job_pauses() == []
    assert limits.resume_job("tests.jobs.ok", None) is False  # nothing left to lift
    assert [c.id for c in _claim(harness.driver, ["default"], _targets(harness.driver))] == [held]


def test_pause_04_a_claim_told_nothing_takes_the_paused_jobs_runs(harness):
    """SPEC PAUSE-04: the claim steps over what it is told, so a fleet with nothing paused
    runs the claim it ran before."""
    held = jobs.ok.enqueue(n=1).id
    harness.driver.limits().pause_job("tests.jobs.ok", None, None)
    assert [c.id for c in _claim(harness.driver, ["default"])] == [held]


def test_pause_04_a_paused_limited_job_is_stepped_over_within_its_limits(harness):
    """SPEC PAUSE-04: a whole job paused, whatever it declares: the limited claim steps over
    each of its keys."""
    jobs.backs_off.enqueue(partner="acme", n=1)
    jobs.backs_off.enqueue(partner="globex", n=1)
    other = jobs.per_account.enqueue(account="a1", n=1).id
    harness.driver.limits().pause_job("tests.jobs.backs_off", None, "ops:a")
    plan = ClaimLimits(jobs=declared_limits()[0], plain_queues=())
    taken = _claim(harness.driver, ["limited"], _targets(harness.driver), limits=plan)
    assert [c.id for c in taken] == [other]


def test_pause_05_a_key_paused_until_resumed_holds_only_that_key(harness):
    """SPEC PAUSE-05: a limit key paused with no end, in the job's pause table, holds that
    key's runs until resumed; resuming the key lifts its RateLimited pause too."""
    limits = harness.driver.limits()
    held = jobs.backs_off.enqueue(partner="acme", n=1).id
    free = jobs.backs_off.enqueue(partner="globex", n=1).id
    pause = limits.pause_job("tests.jobs.backs_off", "acme", "ops:a")
    assert pause.target == f"tests.jobs.backs_off{SEPARATOR}acme"
    plan = ClaimLimits(jobs=declared_limits()[0], plain_queues=())
    paused = _targets(harness.driver)
    assert [c.id for c in _claim(harness.driver, ["limited"], paused, limits=plan)] == [free]
    # the plain claim (a worker with no limits for the queue) steps over the key as well
    assert _claim(harness.driver, ["limited"], paused) == []
    assert harness.row(held).state == "ready"
    limits.pause_key(pause.target, 600)  # a RateLimited pause besides
    assert limits.resume_job("tests.jobs.backs_off", "acme") is True
    [(_, until, _, _)] = [u for u in limits.key_usage() if u[0] == pause.target]
    assert until is None
    assert [
        c.id for c in _claim(harness.driver, ["limited"], _targets(harness.driver), limits=plan)
    ] == [held]


def test_pause_05_a_pause_given_an_end_ends_by_itself(harness):
    """SPEC PAUSE-05: pausing a paused job keeps its first pause and takes the new end; past
    it the pause is over, with no one resuming it, and the next starts afresh."""
    limits = harness.driver.limits()
    first = limits.pause_job("tests.jobs.ok", None, "ops:a")
    now = harness.driver.steps().now()
    again = limits.pause_job("tests.jobs.ok", None, "ops:b", now + timedelta(minutes=10))
    assert (again.paused_at, again.paused_by) == (first.paused_at, "ops:a")
    assert again.paused_until is not None
    worker = PausedQueues(harness.driver, ("default",), interval=0, worker_id="w")
    worker.refresh()
    assert worker.jobs == {"tests.jobs.ok"}
    harness.advance(601)
    assert limits.job_pauses() == []
    worker.refresh()
    assert worker.jobs == frozenset()
    later = limits.pause_job("tests.jobs.ok", None, "ops:c")
    assert later.paused_by == "ops:c" and later.paused_until is None
    assert isinstance(later, JobPause)


@pytest.mark.parametrize("limited", [False, True], ids=["claim_lapsed", "reclaim_lapsed"])
@pytest.mark.parametrize("by", ["name", "key"])
def test_pause_10_a_paused_jobs_lapsed_run_waits_until_resumed(harness, limited, by):
    """SPEC PAUSE-10: a run whose worker died while its job (or its key) is paused is not taken
    again by the sweep, plain or within declared limits, until the pause is lifted; a lapsed
    run of another job is taken as ever."""
    driver = harness.driver
    more = {"limits": ClaimLimits(jobs=declared_limits()[0], plain_queues=())} if limited else {}
    held = jobs.per_account.enqueue(account="a1", n=0).id
    free = jobs.backs_off.enqueue(partner="acme", n=0).id
    assert {c.id for c in _claim(driver, ["limited"], **more)} == {held, free}
    driver.limits().pause_job("tests.jobs.per_account", "a1" if by == "key" else None, "ops:a")
    harness.advance(VIS + 1)  # their worker died: both leases lapse
    paused = _targets(driver)
    again = _claim(driver, ["limited"], paused, lapsed=True, **more)
    assert [(c.id, c.attempt) for c in again] == [(free, 2)]
    row = harness.row(held)
    assert (row.state, row.attempt, row.claimed_by) == ("running", 1, "w-pause")
    driver.limits().resume_job("tests.jobs.per_account", "a1" if by == "key" else None)
    again = _claim(driver, ["limited"], _targets(driver), lapsed=True, **more)
    assert [(c.id, c.attempt) for c in again] == [(held, 2)]
