"""The driver contract, versions of a job's code (issue 44): a run's version stamped at its first
claim, kept after it, and the claims a worker of another version makes. Every case runs on the
memory driver AND the PostgreSQL driver through the ``harness`` fixture (SPEC VER-02, VER-05)."""

from __future__ import annotations

import pytest

from django_xjobs.drivers.contract import DeclaredVersions, RetryAt, VersionCount
from django_xjobs.limits.claims import ClaimLimits
from django_xjobs.limits.worker import declared_limits
from tests import jobs
from tests.drivers.contract.support import claim

OK = "tests.jobs.ok"


def versions(version: int, park: bool = False, name: str = OK) -> DeclaredVersions:
    return DeclaredVersions({name: (version, park)})


def claim_as(harness, declared, **kwargs):
    limits = kwargs.pop("limits", None)
    more = {} if limits is None else {"limits": limits}
    return harness.driver.runs().claim(
        queues=["default"],
        limit=kwargs.pop("limit", 10),
        visibility_timeout=kwargs.pop("vis", 30.0),
        worker_id=kwargs.pop("worker", "w1"),
        lapsed=kwargs.pop("lapsed", True),
        versions=declared,
        **more,
    )


def hand_back(harness, job, delay=0.0):
    assert harness.driver.runs().retry(
        RetryAt(job.id, job.lease_token, delay=delay, error="x", counts_as_attempt=False)
    )


def test_ver_02_the_first_claim_stamps_the_version_the_worker_declares(harness):
    job_id = jobs.ok.enqueue(n=1).id
    assert harness.row(job_id).version is None  # never claimed: nothing recorded yet
    [job] = claim_as(harness, versions(3))
    assert job.version == 3
    assert harness.row(job_id).version == 3


def test_ver_02_a_later_claim_keeps_the_version_the_run_started_under(harness):
    job_id = jobs.ok.enqueue(n=1).id
    [job] = claim_as(harness, versions(2))
    hand_back(harness, job)
    [again] = claim_as(harness, versions(2), worker="w2")
    assert (again.version, harness.row(job_id).version) == (2, 2)


def test_ver_02_a_run_claimed_before_runs_recorded_a_version_reads_as_1(harness):
    """A claim told nothing (as before migration 0029) leaves the row unstamped; a run started
    so is version 1 at its next claim, whatever that worker declares."""
    job_id = jobs.ok.enqueue(n=1).id
    [job] = claim(harness.driver)
    assert (job.version, harness.row(job_id).version) == (1, None)
    hand_back(harness, job)
    [again] = claim_as(harness, versions(2))
    assert (again.version, harness.row(job_id).version) == (1, 1)


def test_ver_02_a_job_the_worker_does_not_declare_is_claimed_unstamped(harness):
    job_id = jobs.ok.enqueue(n=1).id
    [job] = claim_as(harness, versions(4, name="tests.jobs.other"))
    assert (job.version, harness.row(job_id).version) == (1, None)


#: the claims a worker makes: plain, and with declared limits its keyless runs' two walks
CLAIMS = {
    "plain": None,
    "limited-plain": {"plain_queues": ("default",)},
    "limited-stray": {"stray_queues": ("default",)},
}


@pytest.mark.parametrize("limited", CLAIMS.values(), ids=CLAIMS.keys())
def test_ver_05_a_worker_never_claims_a_run_of_a_newer_version(harness, limited):
    job_id = jobs.ok.enqueue(n=1).id
    [job] = claim_as(harness, versions(2))
    hand_back(harness, job)
    limits = None if limited is None else ClaimLimits(jobs=declared_limits()[0], **limited)
    more = {} if limits is None else {"limits": limits}
    assert claim_as(harness, versions(1), worker="old", **more) == []
    assert harness.row(job_id).state == "ready"
    [again] = claim_as(harness, versions(2), worker="new", **more)
    assert (again.id, again.version) == (job_id, 2)


def test_ver_05_a_lapsed_run_of_a_newer_version_is_left_to_a_worker_of_it(harness):
    job_id = jobs.ok.enqueue(n=1).id
    claim_as(harness, versions(2), vis=5)
    harness.advance(5)
    assert claim_as(harness, versions(1), worker="old") == []
    assert harness.row(job_id).state == "running"
    [again] = claim_as(harness, versions(3), worker="newer")
    assert (again.id, again.attempt, again.version) == (job_id, 2, 2)


def test_ver_05_an_older_run_is_claimed_by_a_newer_worker_that_replays(harness):
    job_id = jobs.ok.enqueue(n=1).id
    [job] = claim_as(harness, versions(1))
    hand_back(harness, job)
    [again] = claim_as(harness, versions(2), worker="new")
    assert (again.id, again.version) == (job_id, 1)  # it keeps the version it started under


def test_ver_04_live_versions_counts_the_live_runs_per_job_and_version(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim_as(harness, versions(1), limit=1)
    hand_back(harness, job, delay=60)  # a v1 run, waiting again
    second = jobs.ok.enqueue(n=2).id
    [running] = claim_as(harness, versions(2))  # first claimed by a worker of version 2
    assert (running.id, running.version) == (second, 2)
    jobs.ok.enqueue(n=3)  # not claimed yet
    done = jobs.ok.enqueue(n=4).id
    harness.driver.jobs().cancel(done, None)  # not live: not counted
    assert harness.driver.reads().live_versions() == [
        VersionCount(OK, None, running=0, waiting=1, parked=0),
        VersionCount(OK, 1, running=0, waiting=1, parked=0),
        VersionCount(OK, 2, running=1, waiting=0, parked=0),
    ]
