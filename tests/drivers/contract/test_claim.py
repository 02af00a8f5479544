"""The driver contract, claim (SPEC DRV-04 table, DRV-05 gaps closed): the predicate, the order,
the re-claim of a lapsed lease and the attempt times. Every case runs on the memory driver AND the PostgreSQL driver through the ``harness``
fixture, asserting the same answers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_xjobs.drivers.contract import (
    Complete,
    Finish,
    RetryAt,
    SuspendUntil,
)
from django_xjobs.drivers.rules import check_claim_args
from django_xjobs.durations import MAX_SECONDS
from django_xjobs.errors import InvariantError
from tests import jobs
from tests.drivers.contract.support import VIS, claim

# --- (c) claim: predicate, order, re-claim, attempt + 1 -------------------------------------


def test_state_04_claim_takes_due_rows_in_order_up_to_the_limit(harness):
    ids = [jobs.ok.enqueue(n=i).id for i in range(5)]
    jobs.ok.using(delay="1h").enqueue(n=99)
    first = claim(harness.driver, limit=3)
    assert [j.id for j in first] == ids[:3]
    assert all(j.attempt == 1 for j in first)
    assert [j.id for j in claim(harness.driver, limit=10)] == ids[3:]
    assert claim(harness.driver) == []


def test_claim_prefers_higher_priority(harness):
    low = jobs.ok.enqueue(n=1).id
    high = jobs.important.enqueue(n=1).id
    assert [j.id for j in claim(harness.driver, limit=2)] == [high, low]


def test_claim_only_takes_the_named_queues(harness):
    jobs.on_other_queue.enqueue(n=1)
    assert claim(harness.driver, queues=("default",)) == []
    [job] = claim(harness.driver, queues=("default", "other"))
    assert job.queue == "other"


def test_drv_05_an_empty_queue_list_is_refused_by_both(harness):
    jobs.ok.enqueue(n=1)
    with pytest.raises(InvariantError):
        claim(harness.driver, queues=())


#: claims both drivers refuse, by the argument each gets wrong
BAD_CLAIMS = {
    "no-queue": {"queues": []},
    "queues-a-string": {"queues": "default"},
    "limit-zero": {"limit": 0},
    "limit-negative": {"limit": -3},
    "limit-a-bool": {"limit": True},
    "limit-a-float": {"limit": 2.0},
    "lease-zero": {"visibility_timeout": 0},
    "lease-negative": {"visibility_timeout": -1.0},
    "lease-too-long": {"visibility_timeout": MAX_SECONDS + 1},
}


@pytest.mark.parametrize("limited", [False, True], ids=["plain", "limited"])
@pytest.mark.parametrize("bad", BAD_CLAIMS.values(), ids=BAD_CLAIMS.keys())
def test_drv_05_both_drivers_refuse_a_bad_claim_alike_before_they_read_a_row(harness, bad, limited):
    """One preamble (``rules.check_claim_args``) decides every claim's arguments on both
    drivers, with or without declared limits: the same class, code and words for the same bad
    input, raised before a statement runs, and the due row is still there to claim."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from django_xjobs.limits.claims import ClaimLimits
    from django_xjobs.limits.worker import declared_limits

    due = jobs.ok.enqueue(n=1)
    args = {"queues": ["default"], "limit": 10, "visibility_timeout": VIS, **bad}
    with pytest.raises(InvariantError) as expected:
        check_claim_args(args["queues"], args["limit"], args["visibility_timeout"])
    more = {"limits": ClaimLimits(jobs=declared_limits()[0])} if limited else {}
    with CaptureQueriesContext(connection) as ran, pytest.raises(InvariantError) as refused:
        harness.driver.runs().claim(**args, worker_id="w1", **more)
    assert (type(refused.value), refused.value.code, str(refused.value)) == (
        InvariantError,
        "X_INVARIANT",
        str(expected.value),
    )
    assert len(ran) == 0
    assert [j.id for j in claim(harness.driver)] == [due.id]


def test_a_delayed_row_is_claimable_once_due(harness):
    """SPEC STATE-05."""
    jobs.ok.using(delay="10s").enqueue(n=1)
    assert claim(harness.driver) == []
    harness.advance(10)
    assert len(claim(harness.driver)) == 1


def test_claim_marks_the_row_running_with_a_fresh_token(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver, worker="w-7")
    row = harness.row(job.id)
    assert (row.state, row.claimed_by, row.lease_token) == ("running", "w-7", job.lease_token)
    assert row.visible_at is not None


def test_lease_01_t4_a_lapsed_running_row_is_claimed_again_with_a_new_token(harness):
    jobs.ok.enqueue(n=1)
    [first] = claim(harness.driver, vis=5)
    assert claim(harness.driver, worker="w2") == []  # the lease holds
    harness.advance(5)
    [second] = claim(harness.driver, worker="w2")
    assert second.id == first.id
    assert second.attempt == 2
    assert second.lease_token != first.lease_token


# How the first attempt ends before the job is claimed again: the plain claim takes a retried
# or resumed row, claim_lapsed (its waiting half first, then its lapsed half) a lapsed one.
@pytest.mark.parametrize("ending", ["retried", "suspended", "lapsed"])
def test_started_at_is_the_first_claim_and_last_attempted_at_the_latest(harness, ending):
    job_id = jobs.ok.enqueue(n=1).id
    fresh = harness.row(job_id)
    assert (fresh.started_at, fresh.last_attempted_at) == (None, None)
    sweep = ending == "lapsed"
    [job] = claim(harness.driver, vis=5, lapsed=sweep)
    first = harness.row(job_id)
    assert first.started_at is not None
    assert first.last_attempted_at == first.started_at
    assert first.attempted_by == first.claimed_by is not None
    if ending == "retried":
        assert harness.driver.runs().retry(RetryAt(job.id, job.lease_token, delay=60, error="x"))
    elif ending == "suspended":
        assert harness.driver.runs().suspend(SuspendUntil(job.id, job.lease_token, delay=60))
    settled = harness.row(job_id)
    assert (settled.started_at, settled.last_attempted_at) == (first.started_at, first.started_at)
    if ending != "lapsed":  # a settled run lets go of the job, and its worker stays named
        assert (settled.claimed_by, settled.attempted_by) == (None, first.attempted_by)
    harness.advance(60)
    started = harness.row(job_id).started_at  # the first claim, 60 s further in the past
    [again] = claim(harness.driver, worker="w2", lapsed=sweep)
    assert again.id == job_id
    second = harness.row(job_id)
    assert second.started_at == started
    assert second.last_attempted_at > started
    assert second.attempted_by == "w2"


def test_an_operator_retry_clears_the_attempt_times_and_the_next_claim_starts_over(harness):
    job_id = jobs.ok.enqueue(n=1).id
    [job] = claim(harness.driver)
    assert harness.driver.runs().finish(Finish(job.id, job.lease_token, "dead", error="E"))
    harness.advance(60)
    before = harness.row(job_id)
    requeued = harness.driver.jobs().requeue(job_id, from_step=None, force=False)
    assert (requeued.started_at, requeued.last_attempted_at, requeued.attempted_by) == (
        None,
        None,
        None,
    )
    assert requeued == harness.row(job_id)
    claim(harness.driver)
    again = harness.row(job_id)
    assert again.started_at == again.last_attempted_at
    assert again.started_at > before.started_at


def test_a_cancel_keeps_the_attempt_times_and_returns_them(harness):
    job_id = jobs.ok.enqueue(n=1).id
    claim(harness.driver)
    claimed = harness.row(job_id)
    cancelled = harness.driver.jobs().cancel(job_id, "stop")
    assert cancelled == harness.row(job_id)
    assert (cancelled.started_at, cancelled.last_attempted_at) == (
        claimed.started_at,
        claimed.last_attempted_at,
    )


@pytest.mark.parametrize("final", ["done", "dead", "failed"])
def test_state_04_settled_rows_are_never_claimed(harness, final):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    if final == "done":
        harness.driver.runs().complete([Complete(job.id, job.lease_token)])
    else:
        harness.driver.runs().finish(Finish(job.id, job.lease_token, final))
    harness.advance(3600)
    assert claim(harness.driver) == []


@pytest.mark.parametrize("lapsed", [False, True], ids=["claim", "claim_lapsed"])
def test_drv_04_a_claimed_run_carries_its_rows_creation_time_to_the_microsecond(harness, lapsed):
    """The claim sends the creation time as microseconds (an integer is far cheaper for Python
    to read than a timestamp): the run's ``created_at`` is the row's own, aware, in UTC."""
    ids = {jobs.ok.enqueue(n=n).id for n in range(3)}
    stored = {r.id: r.created_at for r in harness.driver.reads().list_jobs() if r.id in ids}
    claimed = claim(harness.driver, lapsed=lapsed)
    assert {j.id: j.created_at for j in claimed} == stored
    assert all(j.created_at.utcoffset() == timedelta(0) for j in claimed)


@pytest.mark.parametrize("limited", [False, True], ids=["claim_lapsed", "reclaim_lapsed"])
def test_jctl_02_a_run_claimed_past_its_expiry_is_expired_at_every_sweep_too(harness, limited):
    """SPEC JCTL-02 on both sweeps (issue 41): a job first claimed past its expiry whose worker
    died before settling it is expired again when its lapsed lease is swept, by the plain claim
    and by a claim under declared limits (a job with a limit key and a concurrency) alike. The
    limited sweep once answered not expired, and the job ran."""
    from django_xjobs.limits.claims import ClaimLimits
    from django_xjobs.limits.worker import declared_limits

    driver = harness.driver
    more = {"limits": ClaimLimits(jobs=declared_limits()[0])} if limited else {}
    deadline = driver.steps().now() + timedelta(seconds=60)
    stale = jobs.per_account.using(expires_at=deadline).enqueue(account="late", n=0)
    harness.advance(120)
    first = claim(driver, queues=("limited",), worker="dead", lapsed=False, **more)
    assert [(c.id, c.expired) for c in first] == [(stale.id, True)]
    harness.advance(VIS + 1)  # its worker died before settling the verdict: the lease lapses
    again = claim(driver, queues=("limited",), worker="w2", lapsed=True, **more)
    assert [(c.id, c.attempt, c.expired) for c in again] == [(stale.id, 2, True)]
