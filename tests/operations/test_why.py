"""Issue 30: "why isn't this job running?" names each cause that holds, checked against the
store, on both drivers: scheduled, backing off, paused queue, job at its concurrency limit (and
who holds the slots), no live worker on its queue, a name no process registers, waiting for an
event, behind older or higher-priority jobs."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from django_xjobs import operations
from django_xjobs.drivers.contract import Presence, RetryAt, Shed, SuspendUntil
from django_xjobs.errors import JobNotFoundError
from django_xjobs.operations.why import why_job
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.drivers.contract.support import claim, request


def codes(job_id) -> list[str]:
    return [r.code for r in why_job(job_id).reasons]


def watched(driver, *queues: str) -> None:
    """A live worker watches ``queues`` (its presence row, as a heartbeat writes it)."""
    driver.renew_presence(Presence("w-live", "host", 1, tuple(queues), 0), ttl=60)


def test_a_due_job_on_a_watched_queue_has_nothing_in_its_way(harness):
    watched(harness.driver, "default")
    job = jobs.ok.enqueue(n=1)
    assert codes(job.id) == []


def test_scheduled_for_later_says_when(harness):
    watched(harness.driver, "default")
    job = jobs.ok.using(delay="1h").enqueue(n=1)
    [reason] = why_job(job.id).reasons
    assert reason.code == "scheduled"
    assert 3500 < reason.detail["in_seconds"] <= 3600
    assert reason.detail["until"] == harness.row(job.id).run_at


def test_backing_off_names_the_attempt_and_until_when(harness):
    watched(harness.driver, "default")
    job = jobs.ok.enqueue(n=1)
    [held] = claim(harness.driver)
    assert harness.driver.retry(RetryAt(held.id, held.lease_token, delay=420, error="boom"))
    [reason] = why_job(job.id).reasons
    assert reason.code == "backing_off"
    assert (reason.detail["attempt"], reason.detail["error"]) == (1, "boom")
    assert "after attempt 1 failed" in reason.text and "in 7 m" in reason.text


def test_a_paused_queue_is_named_with_who_paused_it(harness):
    watched(harness.driver, "default")
    job = jobs.ok.enqueue(n=1)
    operations.pause_queue("default", by="ops:alice")
    [reason] = why_job(job.id).reasons
    assert reason.code == "queue_paused" and reason.detail["by"] == "ops:alice"


def test_a_job_at_its_concurrency_limit_names_who_holds_the_slots(harness):
    watched(harness.driver, "default")
    first = jobs.exclusive.enqueue(token="a")
    [held] = claim(harness.driver)
    holder = f"w1:{held.id}"  # the slot a worker takes for this run (SPEC SLOT-02)
    assert harness.driver.leases.acquire("job:tests.jobs.exclusive", 1, 30, holder) == 0
    second = jobs.exclusive.enqueue(token="b")
    [reason] = why_job(second.id).reasons
    assert reason.code == "job_at_limit"
    assert reason.detail["holders"] == [{"id": str(first.id), "worker": "w1"}]
    assert (reason.detail["held"], reason.detail["limit"]) == (1, 1)


def test_no_live_worker_on_its_queue(harness):
    job = jobs.ok.enqueue(n=1)
    assert codes(job.id) == ["no_worker"]
    watched(harness.driver, "other")
    [reason] = why_job(job.id).reasons
    assert reason.detail == {"queue": "default", "live_workers": 1}
    watched(harness.driver, "other", "default")
    assert codes(job.id) == []


def test_a_name_no_process_registers(harness):
    watched(harness.driver, "default")
    result = harness.driver.enqueue(request(name="tests.jobs.gone", key="g"))
    assert codes(result.id) == ["not_registered_here"]  # not claimed yet: this process's view
    [held] = claim(harness.driver)
    parked = SuspendUntil(held.id, held.lease_token, delay=30, error="X_JOB_UNKNOWN: no job")
    assert harness.driver.suspend(parked)
    [reason] = why_job(result.id).reasons
    assert reason.code == "unknown_job"  # a worker said so in the row (SPEC EXEC-10)


def test_waiting_for_an_event_names_it_and_its_match(harness):
    watched(harness.driver, "default")
    job = jobs.waiter.enqueue(order_id=7)
    run_until_idle()
    [reason] = why_job(job.id).reasons
    assert reason.code == "waiting_for_event"
    assert (reason.detail["event"], reason.detail["match"]) == (
        "order.shipped",
        harness.driver.steps.list(harness.row(job.id).run_id)[-1].correlation_key,
    )
    assert "order.shipped" in reason.text


def test_behind_older_and_higher_priority_jobs(harness):
    watched(harness.driver, "default")
    older = [jobs.ok.enqueue(n=n) for n in range(2)]
    mine = jobs.ok.enqueue(n=9)
    first = jobs.important.enqueue(n=1)  # priority 5, enqueued after: still ahead
    [reason] = why_job(mine.id).reasons
    assert reason.code == "behind"
    assert reason.detail == {"ahead": 3, "higher_priority": 1}
    assert why_job(older[0].id).reasons[0].detail == {"ahead": 1, "higher_priority": 1}
    assert codes(first.id) == []


def test_running_and_finished_jobs_say_so_and_an_unknown_id_is_refused(harness):
    watched(harness.driver, "default")
    job = jobs.ok.enqueue(n=1)
    claim(harness.driver)
    assert codes(job.id) == ["running"]
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
    assert harness.driver.shed(Shed(again.id, again.lease_token, keep_place=True))
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
    assert harness.driver.retry(RetryAt(held.id, held.lease_token, crashed=True))
    [reason] = why_job(job.id).reasons
    assert reason.code == "suspect"
    assert (reason.detail["crashes"], reason.detail["died_with"]) == (1, None)
    assert "1 of its runs in a row died alone" in reason.text
