"""Why a job is not running (issues 30, 42): every gate that can hold a job has a cause, built
here and read back on both drivers, on the API, the CLI and the job page (SPEC WHY-01..06).

``GATES`` builds each cause's gate; ``test_every_cause_has_a_gate_built_here`` fails for a cause
with no builder, and the ``test_every_*_is_a_known_gate`` tests fail for a gate found in the code
(a job option, a claim limit, a queue control, a worker cap, a hand-back, a parked step) that
names no cause: a gate added later without its cause fails here (STYLE: "every gate explains
itself")."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import override_settings
from freezegun import freeze_time

import django_xjobs
from django_xjobs import operations, set_queue_limit, why_job
from django_xjobs.conf.limits import Limits
from django_xjobs.drivers.contract import (
    DeclaredVersions,
    Finish,
    Presence,
    QueueState,
    RetryAt,
    Shed,
    SuspendUntil,
)
from django_xjobs.errors import JobNotFoundError
from django_xjobs.history import Failure
from django_xjobs.limits.claims import ClaimLimits, JobLimit
from django_xjobs.limits.worker import declared_limits
from django_xjobs.models import JobState
from django_xjobs.operations.why import CAUSES
from django_xjobs.testing import run_until_idle
from django_xjobs.worker.worker import Worker
from tests import jobs, versioned
from tests.drivers.contract.support import VIS, claim, request

PACKAGE = Path(django_xjobs.__file__).parent
DOCS = Path(__file__).resolve().parents[2] / "docs"


def codes(job_id) -> list[str]:
    return [r.code for r in why_job(job_id).reasons]


def reason(job_id, code: str):
    found = [r for r in why_job(job_id).reasons if r.code == code]
    assert found, (code, why_job(job_id).reasons)
    return found[0]


def watched(driver, *queues: str, worker: str = "w-live") -> None:
    """A live worker watches ``queues`` (its presence row, as a heartbeat writes it)."""
    driver.runs().renew_presence(Presence(worker, "host", 1, tuple(queues), 0), ttl=600)


def run_one(queue: str = "default") -> None:
    """One pass of a one-thread worker: the first due job of ``queue`` runs, nothing else."""
    worker = Worker(queues=[queue], concurrency=1, worker_id="test-worker")
    worker.tick(limit=1, bounded=False, wait=False)


def limited_claim(driver, queues, worker="w-live", limit=50):
    """A worker's claim within the declared limits (limits/claims.py)."""
    limits = ClaimLimits(jobs=declared_limits()[0], plain_queues=())
    return driver.runs().claim(
        queues=list(queues),
        limit=limit,
        visibility_timeout=VIS,
        worker_id=worker,
        lapsed=False,
        limits=limits,
    )


def suspect_held_by(harness, worker: str) -> Any:
    """A job whose last run died with its worker (its lease lapsed, its holder gone), claimed
    again by ``worker``, which runs it in a child process beside its other runs
    (worker/isolation.py): the death is not counted, its holder is kept as ``lapsed_holder``."""
    suspect = jobs.ok.enqueue(n=900)
    claim(harness.driver, worker="w-gone")  # no presence: its lapse is a death with its worker
    harness.advance(VIS + 1)
    watched(harness.driver, "default", worker=worker)
    [again] = claim(harness.driver, worker=worker)
    assert again.id == suspect.id and harness.row(suspect.id).lapsed_holder == "w-gone"
    return suspect


# --- one builder per cause: each makes its gate hold a job and returns the job's id ----------


def _running(harness):
    job = jobs.ok.enqueue(n=1)
    claim(harness.driver)
    return job.id


def _finished(harness):
    job = jobs.ok.enqueue(n=1)
    [held] = claim(harness.driver)
    harness.driver.runs().finish(Finish(held.id, held.lease_token, "dead", stop_reason="terminal"))
    return job.id


def _scheduled(harness):
    return jobs.ok.using(delay="1h").enqueue(n=1).id


def _backing_off(harness):
    job = jobs.ok.enqueue(n=1)
    [held] = claim(harness.driver)
    assert harness.driver.runs().retry(RetryAt(held.id, held.lease_token, delay=420, error="boom"))
    return job.id


def _snoozed(harness):
    job = jobs.ok.enqueue(n=55)
    held = next(h for h in claim(harness.driver) if h.id == job.id)
    entry = Failure(None, "snoozed for 5m", "", "", "snoozed")
    value = SuspendUntil(held.id, held.lease_token, delay=300, snoozed=True, failure=entry)
    assert harness.driver.runs().suspend(value)
    return job.id


def _sleeping(harness):
    job = jobs.sleeper.enqueue(n=1)
    run_until_idle()
    return job.id


def _waiting_for_event(harness):
    job = jobs.waiter.enqueue(order_id=7)
    run_until_idle()
    return job.id


def _waiting_for_children(harness):
    parent = jobs.parent_calls.enqueue(tag="why", ns=[1, 2, 3])
    run_one()  # the parent only: it enqueues its children and parks
    return parent.id


def _waiting_for_jobs(harness):
    first = jobs.ok.enqueue(n=1)
    return jobs.ok.using(after=[first.id]).enqueue(n=2).id


def _dependency_failed(harness):
    first = jobs.ok.enqueue(n=1)
    [held] = claim(harness.driver)
    harness.driver.runs().finish(Finish(held.id, held.lease_token, "dead"))
    return jobs.ok.using(after=[first.id]).enqueue(n=2).id


def _unknown_job(harness):
    result = harness.driver.jobs().enqueue(request(name="tests.jobs.gone", key="g"))
    [held] = claim(harness.driver)
    parked = SuspendUntil(held.id, held.lease_token, delay=30, error="X_JOB_UNKNOWN: no job")
    assert harness.driver.runs().suspend(parked)
    return result.id


def _key_missing(harness):
    result = jobs.ok.enqueue(n=77)
    [held] = claim(harness.driver)
    parked = SuspendUntil(held.id, held.lease_token, delay=30, error="X_ENCRYPTION_KEY_MISSING: x")
    assert harness.driver.runs().suspend(parked)
    return result.id


def _expiry(harness):
    return jobs.expiring.enqueue(token="why").id


def _queue_paused(harness):
    job = jobs.ok.enqueue(n=1)
    operations.pause_queue("default", by="ops:alice")
    return job.id


def _job_paused(harness):
    job = jobs.ok.enqueue(n=1)
    django_xjobs.pause_jobs(name="tests.jobs.ok", by="ops:alice")
    return job.id


def _queue_at_cap(harness):
    watched(harness.driver, "capped")
    set_queue_limit("capped", 1)
    jobs.capped.enqueue(n=1)
    claim(harness.driver, queues=("capped",), limit=1)
    return jobs.capped.enqueue(n=2).id


def _job_at_limit(harness):
    jobs.exclusive.enqueue(token="a")
    [held] = claim(harness.driver)
    holder = f"w1:{held.id}"  # the slot a worker takes for this run (SPEC SLOT-02)
    assert harness.driver.limits().acquire_slot("job:tests.jobs.exclusive", 1, 30, holder) == 0
    return jobs.exclusive.enqueue(token="b").id


def _key_at_limit(harness):
    watched(harness.driver, "limited")
    jobs.per_account.enqueue(account="acme", n=0)
    assert len(limited_claim(harness.driver, ["limited"])) == 1
    return jobs.per_account.enqueue(account="acme", n=1).id


def _rate_limited(harness):
    watched(harness.driver, "rated")
    for n in range(3):
        jobs.rated_slowly.enqueue(partner="acme", n=n)
    assert len(limited_claim(harness.driver, ["rated"])) == 2  # 2 a minute: the third waits
    return next(r.id for r in harness.driver.reads().list_jobs(queue="rated", state="ready"))


def _key_paused(harness):
    watched(harness.driver, "limited")
    job = jobs.backs_off.enqueue(partner="acme", n=1, retry_after="10m")
    run_until_idle(queues=["limited"])  # its run raises RateLimited: the key pauses 10 minutes
    return job.id


def _fair_share(harness):
    with override_settings(XJOBS={"QUEUES": ["other"], "OUTBOX": "off", "FAIR_SHARE": "tenant"}):
        for n in range(3):
            jobs.ok.using(tenant_id="big").enqueue(n=n)
        jobs.ok.using(tenant_id="small").enqueue(n=9)
    return jobs.ok.using(tenant_id="big").enqueue(n=3).id


def _behind(harness):
    jobs.ok.enqueue(n=1)
    jobs.important.enqueue(n=1)
    return jobs.ok.enqueue(n=2).id


def _worker_limits(harness):
    jobs.ok.enqueue(n=1)
    claim(harness.driver, worker="w-live")  # its one run of queue default, per its cap
    return jobs.ok.enqueue(n=2).id


def _suspect(harness):
    suspect = suspect_held_by(harness, "w-live")
    [held] = [r for r in harness.driver.reads().list_jobs(state="running") if r.id == suspect.id]
    assert harness.driver.runs().shed(Shed(held.id, held.lease_token, keep_place=True))
    return suspect.id


def _no_worker(harness):
    harness.driver.runs().release_presence("w-live")
    return jobs.ok.enqueue(n=1).id


def _under(harness, handle, version: int):
    """A run of ``handle`` first claimed by a worker declaring ``version`` (issue 44)."""
    result = handle.enqueue(**({"token": "t"} if handle is versioned.parks else {"n": 1}))
    [held] = harness.driver.runs().claim(
        queues=["default"],
        limit=1,
        visibility_timeout=VIS,
        worker_id="w-other",
        versions=DeclaredVersions({handle.name: (version, False)}),
    )
    assert held.id == result.id and held.version == version
    return held


def _version_parked(harness):
    held = _under(harness, versioned.parks, 1)
    parked = SuspendUntil(held.id, held.lease_token, error="X_JOB_VERSION: parked", parked=True)
    assert harness.driver.runs().suspend(parked)
    return held.id


def _newer_version(harness):
    held = _under(harness, jobs.ok, 2)  # this process declares tests.jobs.ok at version 1
    assert harness.driver.runs().suspend(SuspendUntil(held.id, held.lease_token))
    return held.id


def _not_registered_here(harness):
    return harness.driver.jobs().enqueue(request(name="tests.jobs.gone", key="g")).id


#: each cause, the gate that makes it hold, and the settings it is built and read under
GATES: dict[str, tuple[Callable[[Any], Any], dict[str, Any]]] = {
    "running": (_running, {}),
    "finished": (_finished, {}),
    "scheduled": (_scheduled, {}),
    "backing_off": (_backing_off, {}),
    "snoozed": (_snoozed, {}),
    "sleeping": (_sleeping, {}),
    "waiting_for_event": (_waiting_for_event, {}),
    "waiting_for_children": (_waiting_for_children, {}),
    "waiting_for_jobs": (_waiting_for_jobs, {}),
    "dependency_failed": (_dependency_failed, {}),
    "unknown_job": (_unknown_job, {}),
    "key_missing": (_key_missing, {}),
    "expiry": (_expiry, {}),
    "version_parked": (_version_parked, {}),
    "newer_version": (_newer_version, {}),
    "queue_paused": (_queue_paused, {}),
    "job_paused": (_job_paused, {}),
    "queue_at_cap": (_queue_at_cap, {}),
    "job_at_limit": (_job_at_limit, {}),
    "key_at_limit": (_key_at_limit, {}),
    "rate_limited": (_rate_limited, {}),
    "key_paused": (_key_paused, {}),
    "fair_share": (_fair_share, {"FAIR_SHARE": "tenant"}),
    "behind": (_behind, {}),
    "worker_limits": (_worker_limits, {"LIMITS": {"per_queue": {"default": 1}}}),
    "suspect": (_suspect, {}),
    "no_worker": (_no_worker, {}),
    "not_registered_here": (_not_registered_here, {}),
}


def test_every_cause_has_a_gate_built_here():
    """SPEC WHY-01: a cause this file cannot build is a cause no test reads back."""
    assert sorted(GATES) == sorted(c.code for c in CAUSES)


@pytest.fixture
def viewer(client, db):
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


@pytest.mark.parametrize("code", sorted(GATES))
def test_why_01_each_gate_explains_itself_on_the_api_the_cli_and_the_page(harness, viewer, code):
    """SPEC WHY-01: built, each gate is named by its cause, with a sentence and every field of
    its cause, by ``why_job``, ``xjobs why --json``, ``xjobs why`` and the job page. The
    builders make each gate as the code makes it: a worker parks a name it does not know (SPEC
    EXEC-10), a run holds the slot a worker takes for it (SPEC SLOT-02)."""
    build, settings = GATES[code]
    with override_settings(XJOBS={"QUEUES": ["other"], "OUTBOX": "off", **settings}):
        watched(harness.driver, "default")
        job_id = build(harness)
        # the three answers are read at one instant: a gate's text counts down ("in 1m 0s",
        # then "in 59s"), and a loaded machine can let a second pass between two reads
        with freeze_time(datetime.now(UTC)):
            found = why_job(job_id)
            [mine] = [r for r in found.reasons if r.code == code]
            cause = next(c for c in CAUSES if c.code == code)
            assert tuple(mine.detail) == cause.fields and mine.text
            out = StringIO()
            call_command("xjobs", "why", str(job_id), "--json", stdout=out)
            data = json.loads(out.getvalue())
            [shown] = [r for r in data["reasons"] if r["code"] == code]
            assert set(shown["detail"]) == set(cause.fields) and shown["text"] == mine.text
            out = StringIO()
            call_command("xjobs", "why", str(job_id), stdout=out)
            assert mine.text in out.getvalue()
        if harness.driver.name == "postgres":  # the admin reads the rows of the database
            page = viewer.get(f"/admin/django_xjobs/job/{job_id}/change/")
            assert page.status_code == 200
            assert f'data-code="{code}"' in page.content.decode()


# --- the figures each cause gives (the cases first) -----------------------------------


def test_why_02_a_key_at_its_concurrency_names_the_runs_that_hold_it(harness):
    """SPEC WHY-02: per-key concurrency=1 with the same key running, not "it is due"."""
    watched(harness.driver, "limited")
    first = jobs.per_account.enqueue(account="acme", n=0)
    limited_claim(harness.driver, ["limited"])
    other = jobs.per_account.enqueue(account="other", n=0)
    second = jobs.per_account.enqueue(account="acme", n=1)
    held = reason(second.id, "key_at_limit")
    assert held.detail["key"] == "tests.jobs.per_account[acme]"
    assert held.detail["holders"] == [{"id": str(first.id), "worker": "w-live"}]
    assert (held.detail["running"], held.detail["limit"]) == (1, 1)
    assert str(first.id) in held.text
    assert "key_at_limit" not in codes(other.id)  # another key has its own slot


def test_why_02_a_spent_rate_budget_says_when_the_next_slot_opens(harness):
    """SPEC WHY-02: a spent ``rate_limit="2/m"`` budget, and when its next start may be. The
    answer is read at the last start the store recorded (under load seconds pass between the
    claim and the answer; the starts are on the database's clock): the first slot then opens a
    window after the first start."""
    watched(harness.driver, "rated")
    for n in range(3):
        jobs.rated_slowly.enqueue(partner="acme", n=n)
    limited_claim(harness.driver, ["rated"])
    [waiting] = harness.driver.reads().list_jobs(queue="rated", state="ready")
    [(_, _, _, starts)] = harness.driver.limits().key_usage()
    with freeze_time(max(starts)):
        spent = reason(waiting.id, "rate_limited")
    assert spent.detail["starts_in_window"] == 2 and spent.detail["rate"] == "2/60s"
    expected = 60 - (max(starts) - min(starts)).total_seconds()
    assert abs(spent.detail["in_seconds"] - expected) <= 0.1  # the answer's rounding
    assert "next slot opens at" in spent.text
    assert "behind" not in codes(waiting.id)  # its sibling is not "behind 1 due jobs"


def test_why_02_a_key_paused_by_rate_limited_says_until_when(harness):
    """SPEC WHY-02: ``RateLimited(retry_after="10m")`` pauses the key: that, not a schedule."""
    watched(harness.driver, "limited")
    job = jobs.backs_off.enqueue(partner="acme", n=1, retry_after="10m")
    run_until_idle(queues=["limited"])
    sibling = jobs.backs_off.enqueue(partner="acme", n=2)
    paused = reason(job.id, "key_paused")
    assert paused.detail["key"] == "tests.jobs.backs_off[acme]"
    assert 590 <= (paused.detail["until"] - harness.driver.steps().now()).total_seconds() <= 610
    assert "scheduled" not in codes(job.id)
    assert "key_paused" in codes(sibling.id)  # due, and held all the same


def test_why_03_a_parent_names_its_children_and_their_states(harness):
    """SPEC WHY-03: a parent in ``call_many`` waits for its children, never "event None"."""
    watched(harness.driver, "default")
    parent = jobs.parent_calls.enqueue(tag="kids", ns=[1, 2, 3])
    run_one()
    run_one()  # the first child runs and is done
    waits = reason(parent.id, "waiting_for_children")
    assert waits.detail["children"] == 3 and waits.detail["pending"] == 2
    assert waits.detail["states"] == {"done": 1, "ready": 2}
    assert waits.detail["job"] == "tests.jobs.child_square"
    assert all(i in waits.text for i in waits.detail["ids"])
    assert "event" not in waits.text and "waiting_for_event" not in codes(parent.id)


def test_why_03_an_event_wait_names_its_match_and_its_real_timeout(harness):
    """SPEC WHY-03: the match, and the deadline of the timeout — not the next event_poll."""
    watched(harness.driver, "default")
    job = jobs.waiter.enqueue(order_id=7, timeout="2h")
    run_until_idle()
    waits = reason(job.id, "waiting_for_event")
    assert waits.detail["event"] == "order.shipped"
    assert waits.detail["match"] == {"order_id": 7}
    assert 7100 <= waits.detail["in_seconds"] <= 7200  # the timeout, where event_poll is 5s
    assert harness.row(job.id).run_at < waits.detail["until"]
    assert "order_id=7" in waits.text and "times out at" in waits.text
    assert waits.detail["required"] is False


def test_why_04_a_suspect_holds_no_other_job_and_names_itself(harness):
    """SPEC WHY-04: a worker running a suspect keeps claiming (it runs in a child process), so
    no other job is held by it, even on the only worker watching the queue; handed back, the
    suspect itself says it is one, and who it died with."""
    suspect = suspect_held_by(harness, "w-live")
    job = jobs.ok.enqueue(n=1)
    assert "suspect" not in codes(job.id)
    assert codes(job.id) == []  # due, watched, nothing ahead: nothing holds it
    [held] = [r for r in harness.driver.reads().list_jobs(state="running") if r.id == suspect.id]
    assert harness.driver.runs().shed(Shed(held.id, held.lease_token, keep_place=True))
    mine = reason(suspect.id, "suspect")
    assert (mine.detail["died_with"], mine.detail["crashes"]) == ("w-gone", 0)
    assert "suspect" not in codes(job.id)


def test_why_05_fair_share_names_the_turn_and_the_groups_ahead(harness):
    """SPEC WHY-05: under FAIR_SHARE a due job waits for its turn, not "behind N"."""
    settings = {"QUEUES": ["other"], "OUTBOX": "off", "FAIR_SHARE": "tenant"}
    with override_settings(XJOBS=settings):
        watched(harness.driver, "default")
        big = [jobs.ok.using(tenant_id="big").enqueue(n=n).id for n in range(3)]
        small = [jobs.ok.using(tenant_id="small").enqueue(n=9 + n).id for n in range(2)]
        turns = reason(big[2], "fair_share")
        assert turns.detail == {"group": "big", "turn": 3, "groups_waiting": 1, "ahead": 4}
        assert reason(small[0], "fair_share").detail["ahead"] == 1  # big's first turn only
        assert "behind" not in codes(big[2])


def test_why_05_a_queue_cap_and_the_workers_own_caps(harness):
    """SPEC WHY-05: the operator's cap on the queue, and every watcher's XJOBS["LIMITS"]."""
    watched(harness.driver, "capped")
    set_queue_limit("capped", 1)
    jobs.capped.enqueue(n=1)
    claim(harness.driver, queues=("capped",), limit=1, worker="w-live")
    job = jobs.capped.enqueue(n=2)
    capped = reason(job.id, "queue_at_cap")
    assert capped.detail == {"queue": "capped", "limit": 1, "running": 1}
    settings = {"QUEUES": ["other"], "OUTBOX": "off", "LIMITS": {"per_queue": {"capped": 1}}}
    with override_settings(XJOBS=settings):
        full = reason(job.id, "worker_limits")
        assert full.detail["workers"] == [{"worker": "w-live", "caps": ["per_queue 1/1"]}]
        watched(harness.driver, "capped", worker="w-idle")
        assert "worker_limits" not in codes(job.id)  # one watcher has room


def test_why_06_an_expiry_says_when_and_once_past_that_it_never_runs(harness):
    """SPEC WHY-06: a job with an expiry says by when it must start, then that it expired."""
    watched(harness.driver, "default")
    job = jobs.expiring.using(delay="20m").enqueue(token="late")
    before = reason(job.id, "expiry")
    assert before.detail["expired"] is False and "never runs" in before.text
    harness.advance(31 * 60)
    after = reason(job.id, "expiry")
    assert after.detail["expired"] is True and "expired at" in after.text


def test_why_06_dependencies_and_a_failed_one(harness):
    watched(harness.driver, "default")
    first = jobs.ok.enqueue(n=1)
    waits = jobs.ok.using(after=[first.id]).enqueue(n=2)
    held = reason(waits.id, "waiting_for_jobs")
    assert held.detail["after"] == {str(first.id): "ready"} and held.detail["waiting_on"] == 1
    assert "runs after its dependencies" in held.text
    [running] = claim(harness.driver)
    harness.driver.runs().finish(Finish(running.id, running.lease_token, "dead"))
    late = jobs.ok.using(after=[first.id]).enqueue(n=3)
    failed = reason(late.id, "dependency_failed")
    assert failed.detail == {"after_failed": str(first.id), "state": "dead"}
    assert "expiry" not in codes(late.id)


def test_scheduled_backing_off_and_snoozed_are_told_apart(harness):
    watched(harness.driver, "default")
    later = jobs.ok.using(delay="1h").enqueue(n=1)
    assert reason(later.id, "scheduled").detail["in_seconds"] > 3500
    failed = jobs.ok.enqueue(n=2)
    [held] = claim(harness.driver)
    assert harness.driver.runs().retry(RetryAt(held.id, held.lease_token, delay=420, error="boom"))
    backoff = reason(failed.id, "backing_off")
    assert (backoff.detail["attempt"], backoff.detail["error"]) == (1, "boom")
    assert "after attempt 1 of 3 failed" in backoff.text
    snoozed = reason(_snoozed(harness), "snoozed")
    assert snoozed.detail["snoozes"] == 1 and "no attempt spent" in snoozed.text
    assert codes(later.id) == ["scheduled"] and codes(failed.id) == ["backing_off"]


def test_a_due_job_on_a_watched_queue_has_nothing_in_its_way(harness):
    watched(harness.driver, "default")
    job = jobs.ok.enqueue(n=1)
    assert codes(job.id) == []


def test_the_state_is_the_one_the_badge_shows(harness):
    """One state word: a retry backing off is stored ``ready`` with a later run_at, and shown
    ``delayed`` here as in the list (the header said ``ready``)."""
    watched(harness.driver, "default")
    later = jobs.ok.enqueue(n=1)
    [held] = claim(harness.driver)
    assert harness.driver.runs().retry(RetryAt(held.id, held.lease_token, delay=600, error="boom"))
    assert harness.row(later.id).state == "ready"  # as stored
    assert why_job(later.id).state == "delayed"
    out = StringIO()
    call_command("xjobs", "why", str(later.id), stdout=out)
    assert out.getvalue().splitlines()[0].split()[2] == "delayed"


def test_behind_older_and_higher_priority_jobs(harness):
    watched(harness.driver, "default")
    older = [jobs.ok.enqueue(n=n) for n in range(2)]
    mine = jobs.ok.enqueue(n=9)
    first = jobs.important.enqueue(n=1)  # priority 5, enqueued after: still ahead
    [behind] = why_job(mine.id).reasons
    assert behind.code == "behind"
    assert behind.detail == {"ahead": 3, "higher_priority": 1, "at_least": False}
    assert why_job(older[0].id).reasons[0].detail["ahead"] == 1
    assert codes(first.id) == []


def test_a_name_no_process_registers(harness):
    watched(harness.driver, "default")
    result = harness.driver.jobs().enqueue(request(name="tests.jobs.gone", key="g"))
    assert codes(result.id) == ["not_registered_here"]  # not claimed yet: this process's view
    assert reason(_unknown_job(harness), "unknown_job").detail["name"] == "tests.jobs.gone"


def test_no_live_worker_on_its_queue(harness):
    job = jobs.ok.enqueue(n=1)
    assert codes(job.id) == ["no_worker"]
    watched(harness.driver, "other")
    assert why_job(job.id).reasons[0].detail == {"queue": "default", "live_workers": 1}
    watched(harness.driver, "other", "default")
    assert codes(job.id) == []


def test_pause_10_a_lapsed_run_of_a_paused_job_or_queue_says_the_pause_holds_it(harness):
    """SPEC PAUSE-10: the sweep leaves a paused job's lapsed run, and ``why`` says so: the
    pause beside the lapsed lease, none while the lease holds or once it is lifted."""
    watched(harness.driver, "default")
    job = jobs.ok.enqueue(n=1)
    claim(harness.driver)
    django_xjobs.pause_jobs(name="tests.jobs.ok", by="ops:a")
    assert codes(job.id) == ["running"]  # its lease holds: the pause is for the next start
    harness.advance(VIS + 1)
    assert codes(job.id) == ["running", "job_paused"]
    assert "once the pause is lifted" in reason(job.id, "running").text
    django_xjobs.pause_queue("default")
    assert codes(job.id) == ["running", "queue_paused", "job_paused"]
    django_xjobs.resume_queue("default")
    django_xjobs.resume_jobs(name="tests.jobs.ok")
    assert codes(job.id) == ["running"]
    assert reason(job.id, "running").text.endswith("the next claim's sweep takes it back")


def test_a_running_job_says_where_and_an_unknown_id_is_refused(harness):
    watched(harness.driver, "default")
    job = jobs.ok.enqueue(n=1)
    claim(harness.driver)
    running = reason(job.id, "running")
    assert running.detail["worker"] == "w1" and running.detail["lapsed"] is False
    harness.advance(VIS + 1)
    assert reason(job.id, "running").detail["lapsed"] is True
    with pytest.raises(JobNotFoundError):
        why_job("00000000-0000-0000-0000-000000000000")


def test_the_why_verb_prints_each_reason_and_its_json(harness):
    job = jobs.ok.using(delay="1h").enqueue(n=1)
    out = StringIO()
    call_command("xjobs", "why", str(job.id), "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert [r["code"] for r in data["reasons"]] == ["scheduled", "no_worker"]
    out = StringIO()
    call_command("xjobs", "why", str(job.id), stdout=out)
    assert "scheduled for" in out.getvalue() and "no live worker" in out.getvalue()


def test_lease_19_a_job_whose_last_run_died_with_its_worker_is_named_a_suspect(harness):
    """Issue 39 item 2: the operator sees why a job runs apart. Its last run died with its
    worker (a presence that was never renewed after its lease ran out): nothing holds it back,
    but the next worker runs it alone in a child process (``suspect``, ``--json`` included)."""
    watched(harness.driver, "default")
    job = jobs.ok.enqueue(n=1)
    [held] = claim(harness.driver, worker="doomed")
    harness.advance(31)  # its lease runs out; "doomed" never renewed its presence
    watched(harness.driver, "default")
    [again] = claim(harness.driver, worker="w-live")
    assert harness.driver.runs().shed(Shed(again.id, again.lease_token, keep_place=True))
    [reason] = why_job(job.id).reasons
    assert reason.code == "suspect"
    assert "died with worker doomed" in reason.text and "child process" in reason.text
    assert (reason.detail["died_with"], reason.detail["crashes"], reason.detail["isolated"]) == (
        "doomed",
        0,
        True,
    )
    out = StringIO()
    call_command("xjobs", "why", str(job.id), "--json", stdout=out)
    [shown] = json.loads(out.getvalue())["reasons"]
    assert (shown["code"], shown["detail"]["died_with"]) == ("suspect", "doomed")
    assert held.id == job.id


def test_lease_19_a_job_counted_crashes_is_named_a_suspect_with_its_count(harness):
    watched(harness.driver, "default")
    job = jobs.ok.enqueue(n=1)
    [held] = claim(harness.driver)
    assert harness.driver.runs().retry(RetryAt(held.id, held.lease_token, crashed=True))
    [reason] = why_job(job.id).reasons
    assert reason.code == "suspect"
    assert (reason.detail["crashes"], reason.detail["died_with"]) == (1, None)
    assert "1 of its runs in a row died alone" in reason.text


def test_why_job_is_public():
    assert django_xjobs.why_job is why_job and "why_job" in django_xjobs.__all__


# --- every gate in the code names a cause ------------------------------------------------------

#: each option of ``job()`` and ``using()``: the causes of the gates it sets, or None when it
#: holds no job back
JOB_OPTIONS: dict[str, tuple[str, ...] | None] = {
    "fn": None,
    "idempotency_key": None,
    "name": ("not_registered_here", "unknown_job"),
    "queue": ("queue_paused", "queue_at_cap", "no_worker", "worker_limits"),
    "retry": ("backing_off",),
    "timeout": None,
    "step_timeout": None,
    "event_poll": None,  # when a parked step looks again; the wait itself is its own cause
    "concurrency": ("job_at_limit", "key_at_limit"),
    "priority": ("behind",),
    "tenant": ("fair_share", "worker_limits"),
    "expires_in": ("expiry",),
    "debounce": ("scheduled",),
    "limit_key": ("key_at_limit", "rate_limited", "key_paused"),
    "rate_limit": ("rate_limited",),
    "version": ("newer_version",),
    "old_runs": ("version_parked",),
    # an event starts a run or ends it; neither holds one back
    "on_event": None,
    "cancel_on": None,
    # a run whose input no worker's key opens is parked unrun (SPEC CRYPT-05)
    "encrypt": ("key_missing",),
}
USING_OPTIONS: dict[str, tuple[str, ...] | None] = {
    "self": None,
    "queue": ("queue_paused", "queue_at_cap", "no_worker"),
    "run_at": ("scheduled",),
    "delay": ("scheduled",),
    "priority": ("behind",),
    "on_conflict": None,
    "tenant_id": ("fair_share", "worker_limits"),
    "enqueued_by": None,
    "outbox": None,
    "expires_at": ("expiry",),
    "after": ("waiting_for_jobs", "dependency_failed"),
    "run_anyway": ("waiting_for_jobs",),
}
#: the fields of what a claim is told, a key's limit, a queue's controls and a worker's caps
LIMIT_FIELDS: dict[str, tuple[str, ...] | None] = {
    "ClaimLimits.jobs": ("key_at_limit", "rate_limited"),
    "ClaimLimits.plain_queues": None,  # where runs with no key are looked for
    "ClaimLimits.stray_queues": None,
    "ClaimLimits.fair": ("fair_share",),
    "JobLimit.name": None,
    "JobLimit.concurrency": ("key_at_limit",),
    "JobLimit.rate": ("rate_limited",),
    "JobLimit.window": ("rate_limited",),
    "QueueState.queue": None,
    "QueueState.paused": ("queue_paused",),
    "QueueState.paused_at": ("queue_paused",),
    "QueueState.paused_by": ("queue_paused",),
    "QueueState.limit": ("queue_at_cap",),
    "QueueState.paused_until": ("queue_paused",),
    "Limits.global_": ("worker_limits",),
    "Limits.per_queue": ("worker_limits",),
    "Limits.per_tenant": ("worker_limits",),
    # a tenant's starts per window are counted in each worker's memory: out of the database's
    # sight, so why cannot see it (docs/troubleshooting.md says so)
    "Limits.rate_per_tenant": None,
    "Limits.max_tenants": None,
}
#: why a worker hands a claimed run back unrun (Shed reasons, by their fixed start)
SHEDS: dict[str, tuple[str, ...] | None] = {
    # no child could run a suspect: due again a lease later, as the suspect it still is
    "not isolated": ("suspect",),
    "limited: ": ("worker_limits",),
    "job concurrency (": ("job_at_limit",),
    "rate limited for ": ("key_paused",),
    "queue paused": ("queue_paused",),
    # a run of a newer version than the worker's: its claim never takes one (SPEC VER-05)
    "a newer version (": ("newer_version",),
    # a read of the slot table failed, a drain, a run cancelled or lost before it started, a
    # run taken by a thread that an urgent run's body then held past its timeout (PRIO-01):
    # handed back at once in its place, held by nothing
    "the concurrency slot could not be taken": None,
    "draining": None,
    "never started": None,
    "thread held past a timeout": None,
}
#: how a run parks (StepSuspension kinds)
PARKINGS = {
    "sleep": ("sleeping",),
    "event": ("waiting_for_event",),
    "children": ("waiting_for_children",),
}
#: every state, and the causes a row in it may be held by
STATES = {
    "ready": ("behind", "fair_share", "queue_paused", "newer_version"),
    "delayed": ("scheduled", "backing_off", "snoozed"),
    "running": ("running",),
    "suspended": (
        "sleeping",
        "waiting_for_event",
        "waiting_for_children",
        "waiting_for_jobs",
        "version_parked",
        "newer_version",
        "key_missing",
    ),
    "done": ("finished",),
    "failed": ("finished",),
    "dead": ("finished",),
    "cancelled": ("finished",),
}


def _causes(table: dict[str, tuple[str, ...] | None]) -> set[str]:
    return {code for codes in table.values() if codes for code in codes}


@pytest.mark.parametrize(
    "table", [JOB_OPTIONS, USING_OPTIONS, LIMIT_FIELDS, SHEDS, PARKINGS, STATES]
)
def test_every_gate_names_a_cause_there_is(table):
    assert _causes(table) <= {c.code for c in CAUSES}


def test_every_job_option_is_a_known_gate():
    """A new ``job()`` or ``using()`` option is classed here: a gate with its causes, or none."""
    assert list(inspect.signature(django_xjobs.job).parameters) == list(JOB_OPTIONS)
    using = inspect.signature(django_xjobs.JobHandle.using).parameters
    assert list(using) == list(USING_OPTIONS)


def test_every_claim_limit_queue_control_and_worker_cap_is_a_known_gate():
    found = {
        f"{kind.__name__}.{f.name}"
        for kind in (ClaimLimits, JobLimit, QueueState, Limits)
        for f in dataclasses.fields(kind)
    }
    assert found == set(LIMIT_FIELDS)


def _literal_start(node: ast.expr | None) -> str | None:
    """The fixed start of a string a call is given: a literal, or an f-string's first part."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None


def _calls(names: set[str]) -> list[tuple[str, ast.Call, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if name in names:
                    found.append((name, node, path))
    return found


def test_every_hand_back_is_a_known_gate():
    """Every reason a worker hands a claimed run back unrun (``Shed``) is classed in SHEDS."""
    reasons = set()
    for name, call, _path in _calls({"Shed", "shed", "hand_back"}):
        given = {k.arg: k.value for k in call.keywords}
        value = given.get("reason")
        if value is None and name == "shed" and call.args and len(call.args) == 1:
            value = call.args[0]  # admission's shed(reason)
        start = _literal_start(value)
        if start is not None:
            reasons.add(start)
    for path in sorted(PACKAGE.rglob("*.py")):  # a reason given as a parameter's default
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "hand_back":
                names = [a.arg for a in node.args.args][-len(node.args.defaults) :]
                defaults = dict(zip(names, node.args.defaults, strict=True))
                reasons.add(_literal_start(defaults["reason"]) or "")
    assert reasons == set(SHEDS)


def test_every_way_a_run_parks_is_a_known_gate():
    kinds = {
        _literal_start(call.args[2])
        for _, call, _ in _calls({"StepSuspension"})
        if len(call.args) > 2
    }
    assert kinds == set(PARKINGS)


def test_every_state_is_a_known_gate():
    assert set(STATES) == set(JobState.values)


def test_every_cause_is_in_the_cli_reference_and_troubleshooting():
    """The docs name each cause, so an operator who reads a code in ``--json`` finds it."""
    pages = (DOCS / "reference" / "cli.md").read_text() + (DOCS / "troubleshooting.md").read_text()
    assert sorted(c.code for c in CAUSES if f"`{c.code}`" not in pages) == []


# --- count, don't load (issue 40) -------------------------------------------------------------


class RowsRead:
    """Every row the database hands this process, counted at psycopg's cursor."""

    def __init__(self, monkeypatch) -> None:
        import psycopg

        self.rows = 0
        for method in ("fetchone", "fetchmany", "fetchall"):
            fetch = getattr(psycopg.Cursor, method)
            monkeypatch.setattr(psycopg.Cursor, method, self._counting(fetch))

    def _counting(self, fetch):
        def counted(cursor, *args, **kwargs):
            got = fetch(cursor, *args, **kwargs)
            if isinstance(got, list):
                self.rows += len(got)
            elif got is not None:
                self.rows += 1
            return got

        return counted


def test_why_07_a_job_behind_many_is_counted_not_loaded(db, monkeypatch):
    """SPEC WHY-07: explaining a job behind 300 due jobs of 20 KB reads counts, not the rows
    (it loaded up to 10,000 whole rows: 86 MB per admin page view)."""
    from django_xjobs.drivers import create, install, uninstall

    driver = create("postgres")
    install(driver)
    try:
        watched(driver, "default")
        pad = "x" * 20_000
        driver.jobs().enqueue_many(
            [
                dataclasses.replace(
                    request(key=f"big-{n}"),
                    input={"pad": pad},
                    input_json=json.dumps({"pad": pad, "n": n}),
                )
                for n in range(300)
            ]
        )
        mine = jobs.ok.enqueue(n=1)
        counted = RowsRead(monkeypatch)
        [behind] = why_job(mine.id).reasons
        assert behind.code == "behind" and behind.detail["ahead"] == 300
        assert counted.rows < 20, f"why read {counted.rows} rows to count 300"
    finally:
        uninstall(driver)


def test_why_07_the_counts_stop_at_the_cap(harness, monkeypatch):
    from django_xjobs.operations.why import place

    monkeypatch.setattr(place, "AHEAD_CAP", 3)
    from django_xjobs.operations import why

    monkeypatch.setattr(why, "AHEAD_CAP", 3)
    watched(harness.driver, "default")
    for n in range(5):
        jobs.ok.enqueue(n=n)
    mine = jobs.ok.enqueue(n=9)
    behind = reason(mine.id, "behind")
    assert behind.detail == {"ahead": 3, "higher_priority": 0, "at_least": True}
    assert "at least 3" in behind.text


def test_the_run_time_a_retry_puts_back_is_no_schedule_of_its_own(harness):
    """A RateLimited run waits for its key's pause: the pause is said, not a bare schedule."""
    watched(harness.driver, "limited")
    job = jobs.backs_off.enqueue(partner="p", n=1, retry_after="90s")
    run_until_idle(queues=["limited"])
    assert harness.row(job.id).run_at - harness.driver.steps().now() > timedelta(seconds=60)
    assert codes(job.id) == ["key_paused"]
