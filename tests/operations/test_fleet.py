"""A queue's pause that ends by itself (issue 45, SPEC PAUSE-01/02): ``pause_queue(until=)``
on both drivers through the ``harness`` fixture, a worker's paused set dropping the queue once
the end has passed with no one resuming it, ``why`` saying when it ends, and
``xjobs pause --until/--for``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from django_xjobs import operations, why_job
from django_xjobs.errors import XJobsError
from django_xjobs.worker.paused import PausedQueues
from tests import jobs


def _control(harness, queue):
    return next(c for c in harness.driver.limits().queue_controls() if c.queue == queue)


def test_pause_01_a_pause_given_an_end_ends_by_itself(harness):
    limits = harness.driver.limits()
    state = operations.pause_queue("emails", by="ops:alice", until="10m")
    now = harness.driver.steps().now()
    assert state.paused and state.paused_by == "ops:alice"
    assert timedelta(minutes=9) < state.paused_until - now <= timedelta(minutes=10)
    assert limits.paused_queues() == {"emails"}
    assert _control(harness, "emails").paused_until == state.paused_until
    worker = PausedQueues(harness.driver, ("emails", "default"), interval=0, worker_id="w")
    assert worker.refresh() == {"emails"}
    harness.advance(601)  # past its end, and no one resumed it
    assert limits.paused_queues() == frozenset()
    assert worker.refresh() == frozenset()
    ended = _control(harness, "emails")
    assert (ended.paused, ended.paused_at, ended.paused_by, ended.paused_until) == (
        False,
        None,
        None,
        None,
    )
    assert not [q for q in operations.inspect_queues().queues if q.queue == "emails" and q.paused]
    again = operations.pause_queue("emails", by="ops:bob")  # starts afresh, with no end
    assert (again.paused_by, again.paused_until) == ("ops:bob", None)
    assert limits.paused_queues() == {"emails"}


def test_pause_01_pausing_a_paused_queue_keeps_its_first_pause_and_takes_the_new_end(harness):
    first = operations.pause_queue("emails", by="ops:alice")
    later = datetime.fromisoformat("2100-01-01T00:00:00+00:00")
    second = operations.pause_queue("emails", by="ops:bob", until=later)
    assert (second.paused_at, second.paused_by, second.paused_until) == (
        first.paused_at,
        "ops:alice",
        later,
    )
    operations.resume_queue("emails")
    assert _control(harness, "emails").paused_until is None
    [entry, *_] = operations.inspect_audit(verb="pause_queue")
    assert entry.reason == "until 2100-01-01T00:00:00+00:00"


@pytest.mark.parametrize(
    "until",
    [datetime(2100, 1, 1), datetime.fromisoformat("2000-01-01T00:00:00+00:00"), "0s", "-5m"],
)
def test_pause_01_an_end_without_a_zone_or_in_the_past_is_refused(harness, until):
    with pytest.raises(XJobsError) as refused:
        operations.pause_queue("emails", until=until)
    assert refused.value.code in ("X_INVARIANT", "X_DURATION_INVALID")
    assert harness.driver.limits().paused_queues() == frozenset()


def test_pause_02_why_says_when_the_pause_ends(harness):
    job = jobs.ok.enqueue(n=1)
    operations.pause_queue("default", by="ops:alice", until="1h")
    [reason] = [r for r in why_job(job.id).reasons if r.code == "queue_paused"]
    assert "is paused by ops:alice since" in reason.text and " until " in reason.text
    assert "resumes" not in reason.text and "until then" in reason.text
    assert reason.detail["until"] is not None
    harness.advance(3601)
    assert "queue_paused" not in [r.code for r in why_job(job.id).reasons]


def test_pause_02_xjobs_pause_takes_an_end(db):
    out = StringIO()
    call_command("xjobs", "pause", "emails", "--for", "30m", "--json", stdout=out)
    shown = json.loads(out.getvalue())
    assert shown["paused"] and shown["paused_until"] is not None
    out = StringIO()
    call_command("xjobs", "pause", "mail", "--until", "2100-01-01T00:00:00+00:00", stdout=out)
    assert "until 2100-01-01T00:00:00+00:00: it resumes by itself then" in out.getvalue()
    for bad in ("2100-01-01T00:00:00", "soon"):
        with pytest.raises(CommandError, match="X_INVARIANT"):
            call_command("xjobs", "pause", "other", "--until", bad, stdout=StringIO())


def test_pause_02_the_queues_report_the_command_and_the_admin_show_the_end(db):
    from django.contrib.auth.models import User
    from django.test import Client

    state = operations.pause_queue("emails", until="2h")
    [row] = [q for q in operations.inspect_queues().queues if q.queue == "emails"]
    assert (row.paused, row.paused_until) == (True, state.paused_until.isoformat())
    out = StringIO()
    call_command("xjobs", "queues", stdout=out)
    [line] = [x for x in out.getvalue().splitlines() if x.startswith("emails")]
    assert line.endswith(f"paused until {state.paused_until.isoformat()}")
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    page = client.get("/admin/django_xjobs/job/queues/").content.decode()
    assert f"<strong>paused</strong> until {state.paused_until.isoformat()}" in page


def test_pause_03_pause_jobs_pauses_one_limit_key_until_a_time(harness):
    from django_xjobs import pause_jobs
    from tests.operations.test_why import limited_claim

    held = jobs.backs_off.enqueue(partner="acme", n=1).id
    free = jobs.backs_off.enqueue(partner="globex", n=1).id
    report = pause_jobs(name="tests.jobs.backs_off", limit_key="acme", until="10m", by="ops:a")
    assert report.job == "tests.jobs.backs_off" and report.paused_until is not None
    # a worker's claim within the declared limits takes the other key's run, not this one's
    assert [c.id for c in limited_claim(harness.driver, ["limited"])] == [free]
    assert harness.row(held).state == "ready"
    [reason] = [r for r in why_job(held).reasons if r.code == "key_paused"]
    assert "an operator paused it (pause_jobs)" in reason.text
    [entry] = operations.inspect_audit(verb="pause_jobs")
    assert (entry.actor, entry.target) == ("ops:a", "tests.jobs.backs_off[acme]")
    harness.advance(601)  # past its end: the key runs again with no one resuming it
    assert [c.id for c in limited_claim(harness.driver, ["limited"])] == [held]


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"name": "tests.jobs.ok", "limit_key": "x"}, "declares no limit key"),
        ({"name": "tests.jobs.nope"}, "no job named"),
        ({"name": "tests.jobs.backs_off", "limit_key": "acme", "until": "-1m"}, "duration"),
    ],
)
def test_pause_03_pause_jobs_refuses_what_has_no_key_to_pause(harness, fields, says):
    from django_xjobs import pause_jobs

    with pytest.raises(XJobsError, match=says):
        pause_jobs(**{"until": "10m", **fields})


def test_pause_03_xjobs_pause_jobs(db):
    out = StringIO()
    call_command(
        "xjobs", "pause-jobs", "tests.jobs.backs_off", "--key", "acme", "--for", "1h", stdout=out
    )
    assert out.getvalue().startswith("paused tests.jobs.backs_off[acme] until ")
    with pytest.raises(CommandError, match="X_INVARIANT"):
        call_command(
            "xjobs", "pause-jobs", "tests.jobs.ok", "--key", "x", "--for", "1h", stdout=StringIO()
        )


def test_pause_06_pause_jobs_and_resume_jobs_a_whole_job_until_resumed(harness):
    """SPEC PAUSE-06: pause_jobs with no limit_key and no until pauses the whole job until
    resume_jobs; both are audited, and inspect_job_pauses lists what is in force."""
    from django_xjobs import inspect_job_pauses, pause_jobs, resume_jobs

    report = pause_jobs(name="tests.jobs.ok", by="ops:a")
    assert (report.job, report.key, report.paused, report.paused_until) == (
        "tests.jobs.ok",
        None,
        True,
        None,
    )
    assert [(p.job, p.key, p.paused_by) for p in inspect_job_pauses()] == [
        ("tests.jobs.ok", None, "ops:a")
    ]
    key = pause_jobs(name="tests.jobs.backs_off", limit_key="acme", by="ops:a")
    assert (key.key, key.paused_until) == ("acme", None)
    assert resume_jobs(name="tests.jobs.ok", by="ops:b").lifted is True
    assert resume_jobs(name="tests.jobs.ok", by="ops:b").lifted is False
    assert [(p.job, p.key) for p in inspect_job_pauses()] == [("tests.jobs.backs_off", "acme")]
    verbs = [(a.verb, a.actor, a.target) for a in operations.inspect_audit(limit=4)]
    assert verbs[-1] == ("pause_jobs", "ops:a", "tests.jobs.ok[]")
    assert ("resume_jobs", "ops:b", "tests.jobs.ok[]") in verbs
    with pytest.raises(XJobsError, match="no job named"):
        resume_jobs(name="tests.jobs.nope")


def test_pause_06_xjobs_pause_jobs_and_resume_jobs(db):
    out = StringIO()
    call_command("xjobs", "pause-jobs", "tests.jobs.ok", stdout=out)
    assert out.getvalue().startswith("paused tests.jobs.ok: no run of it starts")
    assert "xjobs resume-jobs tests.jobs.ok" in out.getvalue()
    out = StringIO()
    call_command("xjobs", "queues", "--json", stdout=out)
    [paused] = json.loads(out.getvalue())["paused_jobs"]
    assert (paused["job"], paused["key"], paused["paused_until"]) == ("tests.jobs.ok", None, None)
    out = StringIO()
    call_command("xjobs", "queues", stdout=out)
    assert "tests.jobs.ok" in out.getvalue() and "paused job" in out.getvalue()
    out = StringIO()
    call_command("xjobs", "resume-jobs", "tests.jobs.ok", "--json", stdout=out)
    assert json.loads(out.getvalue())["lifted"] is True
    out = StringIO()
    call_command("xjobs", "resume-jobs", "tests.jobs.ok", stdout=out)
    assert out.getvalue().startswith("tests.jobs.ok was not paused")
    out = StringIO()
    call_command("xjobs", "pause-jobs", "tests.jobs.ok", "--for", "1h", "--json", stdout=out)
    assert json.loads(out.getvalue())["paused_until"] is not None


def test_pause_07_why_names_the_jobs_pause_and_its_end(harness):
    """SPEC PAUSE-07: why's job_paused cause: who, since when, and until when or until
    resumed (with the command that resumes it)."""
    from django_xjobs import pause_jobs

    held = jobs.ok.enqueue(n=1).id
    pause_jobs(name="tests.jobs.ok", by="ops:a")
    [reason] = [r for r in why_job(held).reasons if r.code == "job_paused"]
    assert "paused by ops:a" in reason.text and "xjobs resume-jobs tests.jobs.ok" in reason.text
    assert (reason.detail["job"], reason.detail["key"], reason.detail["until"]) == (
        "tests.jobs.ok",
        None,
        None,
    )
    ends = pause_jobs(name="tests.jobs.ok", until="10m").paused_until
    [reason] = [r for r in why_job(held).reasons if r.code == "job_paused"]
    assert reason.detail["until"].isoformat() == ends
    keyed = jobs.backs_off.enqueue(partner="acme", n=1).id
    pause_jobs(name="tests.jobs.backs_off", limit_key="acme")
    [reason] = [r for r in why_job(keyed).reasons if r.code == "job_paused"]
    assert reason.detail["key"] == "acme" and "--key acme" in reason.text
