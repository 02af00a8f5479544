"""``manage.py xjobs``: each action's text and ``--json`` output, and its refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from django_xjobs import operations
from django_xjobs.errors import XJobsError
from django_xjobs.models import Job
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.support.process import MANAGE, ROOT, worker_env


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


def dead_job() -> str:
    job_id = str(jobs.terminal.enqueue(n=1).id)
    run_until_idle()
    return job_id


def test_ls_lists_newest_first_with_filters(db):
    first = jobs.ok.enqueue(n=1).id
    second = jobs.on_other_queue.enqueue(n=2).id
    text = xjobs("ls")
    assert text.index(str(second)) < text.index(str(first))
    assert str(first) not in xjobs("ls", "--queue", "other")
    rows = json.loads(xjobs("ls", "--json", "--state", "ready", "--limit", "1"))
    assert [r["id"] for r in rows] == [str(second)]
    assert set(rows[0]) >= {
        "id",
        "name",
        "queue",
        "state",
        "attempt",
        "max_attempts",
        "stop_reason",
    }


def test_show_prints_the_row_the_steps_and_the_retry_schedule(db):
    job_id = dead_job()
    text = xjobs("show", job_id)
    assert "tests.jobs.terminal" in text and "dead" in text and "X_TERMINAL" in text
    assert "0.01s, 0.02s, 0.04s, 0.08s" in text  # Retry(attempts=5, delay="10ms", jitter=False)
    shown = json.loads(xjobs("show", job_id, "--json"))
    assert shown["id"] == job_id and shown["stop_reason"] == "terminal" and shown["steps"] == []


def test_retry_and_cancel_act_through_the_operator_api(db):
    job_id = dead_job()
    assert f"queued {job_id}" in xjobs("retry", job_id)
    assert Job.objects.get(id=job_id).state == "ready"
    cancelled = json.loads(xjobs("cancel", job_id, "--reason", "not today", "--json"))
    assert (cancelled["state"], cancelled["last_error"]) == ("cancelled", "not today")
    assert "again" in xjobs("retry", job_id, "--force")


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("show", "0197a3c2-5b1e-7c4d-9f00-1a2b3c4d5e6f"), "X_JOB_NOT_FOUND"),
        (("cancel", "not-a-uuid"), "X_JOB_NOT_FOUND"),
        (("retry", "0197a3c2-5b1e-7c4d-9f00-1a2b3c4d5e6f"), "X_JOB_NOT_FOUND"),
    ],
)
def test_an_unknown_id_is_one_clear_error(db, args, code):
    with pytest.raises(CommandError) as caught:
        xjobs(*args)
    assert str(caught.value).startswith(code)


def test_a_refused_action_names_the_state(db):
    job_id = str(jobs.ok.enqueue(n=1).id)
    with pytest.raises(CommandError, match=r"X_JOB_NOT_RETRYABLE.*ready"):
        xjobs("retry", job_id)
    run_until_idle()
    with pytest.raises(CommandError, match=r"X_JOB_NOT_CANCELLABLE.*done"):
        xjobs("cancel", job_id)


def test_dead_queues_and_manifest(db):
    job_id = dead_job()
    jobs.ok.enqueue(n=5)
    dead = json.loads(xjobs("dead", "--json"))
    assert [d["id"] for d in dead] == [job_id]
    assert "python manage.py xjobs retry" in dead[0]["retry_command"]
    queues = json.loads(xjobs("queues", "--json"))
    assert queues["totals"]["dead"] == 1 and queues["totals"]["ready"] == 1
    assert "default" in xjobs("queues")
    manifest = json.loads(xjobs("manifest", "--json"))
    assert "tests.jobs.ok" in [j["name"] for j in manifest["jobs"]]
    assert "tests.daily" in [t["name"] for t in manifest["crons"]]
    assert "cron tests.daily" in xjobs("manifest")


def test_prune_keeps_dead_jobs_unless_named_and_reports_each_state(harness):
    """Item 6: without --state a prune never deletes dead jobs; --dry-run only counts; the
    counts are per state; a bare --older-than number is seconds. Both drivers."""
    stepped = jobs.five_steps.enqueue(token="prune").id
    failed = jobs.no_dead_letter.enqueue(n=1).id
    dead = jobs.terminal.enqueue(n=1).id
    cancelled = jobs.ok.enqueue(n=2).id
    operations.cancel_job(cancelled)
    run_until_idle()
    run_id = harness.row(stepped).run_id
    assert harness.driver.steps().list(run_id)
    harness.advance(3600)
    fresh = jobs.ok.enqueue(n=4).id
    run_until_idle()
    live = jobs.ok.using(delay="1h").enqueue(n=3).id
    everything = {stepped, failed, dead, cancelled, fresh, live}
    assert {harness.row(i).state for i in everything} == {
        "done",
        "failed",
        "dead",
        "cancelled",
        "delayed",
    }

    dry = json.loads(xjobs("prune", "--older-than", "60", "--dry-run", "--json"))
    assert dry == {
        "dry_run": True,
        "older_than": 60.0,
        "states": {"done": 1, "failed": 1, "cancelled": 1},
        "total": 3,
    }
    assert all(harness.row(i) is not None for i in everything)

    text = xjobs("prune", "--older-than", "60")
    assert text.startswith("deleted 3 job(s) older than 1m: done 1, failed 1, cancelled 1")
    assert "add --state dead" in text
    assert {i for i in everything if harness.row(i) is not None} == {dead, fresh, live}
    assert harness.driver.steps().list(run_id) == []

    named = json.loads(xjobs("prune", "--older-than", "1m", "--state", "dead", "--json"))
    assert named["states"] == {"dead": 1} and named["total"] == 1
    assert {i for i in everything if harness.row(i) is not None} == {fresh, live}


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"older_than": "30"}, "X_DURATION_INVALID"),  # in Python a string needs a unit
        ({"older_than": 0}, "X_INVARIANT"),
        ({"older_than": "1d", "states": ["ready"]}, "X_INVARIANT"),
        ({"older_than": "1d", "states": []}, "X_INVARIANT"),
    ],
)
def test_prune_refuses_bad_arguments(db, kwargs, code):
    with pytest.raises(XJobsError) as caught:
        operations.prune_jobs(**kwargs)
    assert caught.value.code == code


@pytest.mark.parametrize("value", ["soon", "0", "-5"])
def test_a_bad_older_than_is_one_error_in_the_shells_words(db, value):
    with pytest.raises(CommandError) as caught:
        xjobs("prune", f"--older-than={value}")
    message = str(caught.value)
    assert message.startswith(("X_DURATION_INVALID", "X_INVARIANT")), message
    assert f"--older-than {value}" in message and "timedelta" not in message


def test_global_options_work_after_the_action():
    """``manage.py xjobs ls --settings X -v 2``: argparse subparsers used to refuse them."""
    from django_xjobs.management.commands.xjobs import Command

    parser = Command().create_parser("manage.py", "xjobs")
    after = parser.parse_args(["ls", "--settings", "tests.settings", "-v", "2", "--traceback"])
    assert (after.verbosity, after.settings, after.traceback) == (2, "tests.settings", True)
    before = parser.parse_args(["-v", "3", "--settings", "x", "ls", "--state", "dead"])
    assert (before.verbosity, before.settings, before.state) == (3, "x", "dead")
    assert parser.parse_args(["queues"]).verbosity == 1


GLOBAL_OPTIONS_AFTER = ("--settings=tests.settings", "-v", "2", "--no-color")


@pytest.mark.process
def test_global_options_after_the_action_in_a_real_process(transactional_db):
    done = subprocess.run(
        [sys.executable, str(MANAGE), "xjobs", "queues", "--json", *GLOBAL_OPTIONS_AFTER],
        env=worker_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "totals" in json.loads(done.stdout)


@pytest.mark.process
def test_the_command_exits_non_zero_with_one_line(transactional_db):
    done = subprocess.run(
        [sys.executable, str(MANAGE), "xjobs", "--settings=tests.settings", "show", "nope"],
        env=worker_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "X_JOB_NOT_FOUND" in lines[0]


@pytest.mark.parametrize(
    "action", ["ls", "show", "cancel", "retry", "dead", "queues", "workers", "manifest", "prune"]
)
def test_every_action_prints_text_and_json(db, action):
    """Each action's text is non-empty prose (not JSON), and its --json parses."""
    dead = dead_job()
    live = str(jobs.ok.enqueue(n=9).id)
    args = {
        "ls": [],
        "show": [dead],
        "cancel": [live],
        "retry": [dead],
        "dead": [],
        "queues": [],
        "workers": [],
        "manifest": [],
        "prune": ["--older-than", "30d"],
    }[action]
    text = xjobs(action, *args)
    assert text.strip() and not text.lstrip().startswith(("{", "["))
    if action in ("cancel", "retry"):  # the first call acted; act on a fresh row for --json
        args = [str(jobs.ok.enqueue(n=10).id)] if action == "cancel" else [dead_job_again()]
    json.loads(xjobs(action, *args, "--json"))


def dead_job_again() -> str:
    job_id = str(jobs.terminal.enqueue(n=2).id)
    run_until_idle()
    return job_id


def test_workers_lists_each_present_worker_alive_or_lapsed(harness):
    from django_xjobs.drivers.contract import Presence

    assert xjobs("workers").strip() == "no workers"
    harness.driver.runs().renew_presence(
        Presence("worker-a", "web-1", 4242, ("default", "mail"), 2), 30
    )
    harness.driver.runs().renew_presence(Presence("worker-b", "web-2", 77, ("default",), 0), 5)
    harness.advance(10)  # b's 5 s ttl has run out; a's 30 s has not
    rows = json.loads(xjobs("workers", "--json"))
    assert [
        (r["id"], r["host"], r["pid"], r["queues"], r["in_flight"], r["alive"]) for r in rows
    ] == [
        ("worker-a", "web-1", 4242, ["default", "mail"], 2, True),
        ("worker-b", "web-2", 77, ["default"], 0, False),
    ]
    text = xjobs("workers")
    [a_line] = [line for line in text.splitlines() if line.startswith("worker-a")]
    [b_line] = [line for line in text.splitlines() if line.startswith("worker-b")]
    assert "alive" in a_line and "4242" in a_line and "default,mail" in a_line
    assert "lapsed" in b_line


@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("pause", "default"), "paused queue default"),
        (("resume", "default"), "resumed queue default"),
        (("limit", "default", "4"), "queue default: at most 4 runs at once"),
    ],
)
def test_an_operator_action_says_its_sentence_and_nothing_else(transactional_db, args, said):
    """Issue 42: with no logging configured for the library, ``xjobs pause`` printed its own
    sentence, then the raw ``xjobs.queue.paused ...`` record on stderr."""
    done = subprocess.run(
        [sys.executable, str(MANAGE), "xjobs", *args, "--settings=tests.settings"],
        env=worker_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(said) and done.stderr == ""


def test_dead_prints_a_header_and_the_stop_reason(db):
    """Issue 42: ``xjobs dead`` had no header and no stop reason, where ``ls`` has both."""
    job_id = dead_job()
    lines = xjobs("dead").splitlines()
    assert lines[0].split() == ["id", "name", "attempt", "stop", "reason", "failed", "at"]
    row = lines[1].split()
    assert row[:4] == [job_id, "tests.jobs.terminal", "1", "terminal"]
    assert lines[2].strip().startswith("X_TERMINAL")
    assert lines[1][lines[0].index("stop reason") :].startswith("terminal")  # one column


def test_a_job_that_never_ran_is_at_attempt_0_and_runs_after_its_dependencies(db):
    """Issue 42: a dependant said attempt 1 and a run at in the year 9999."""
    first = jobs.ok.enqueue(n=1)
    waits = jobs.ok.using(after=[first.id]).enqueue(n=2)
    shown = xjobs("show", str(waits.id))
    assert "attempt 0 of 3" in shown and "parked" not in shown
    assert "run at     runs after its dependencies" in shown and "9999" not in shown
    [line] = [x for x in xjobs("ls").splitlines() if x.startswith(str(waits.id))]
    assert "suspended" in line and " 0/3 " in line


def test_show_lists_snoozes_as_snoozes_and_no_empty_traceback(db):
    """Issue 42: a snooze read as a failed attempt, under a traceback heading with nothing in it."""
    job_id = jobs.snoozer.enqueue(token="show-snooze", times=1, seconds=60).id
    run_until_idle()
    shown = xjobs("show", str(job_id))
    assert "failed attempts: none" in shown
    assert "snoozes (ctx.snooze, no attempt spent):" in shown and "snoozed for 1m" in shown
    assert "traceback of attempt" not in shown
