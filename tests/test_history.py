"""A job's failure history (issue 10 item 5): each failed attempt's error, class path and
traceback, bounded, read back by ``inspect_job()``, ``xjobs show`` and the admin. The storage
cases run on the memory driver AND the PostgreSQL driver through the ``harness`` fixture."""

from __future__ import annotations

import json
import logging
import time
import uuid
from datetime import datetime, timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from django_xjobs import conf, history
from django_xjobs.drivers.contract import Complete, EnqueueRequest, RetryAt, SuspendUntil
from django_xjobs.history import KEEP, TRACEBACK_LIMIT, FailedAttempt
from django_xjobs.operations import inspect_job, retry_job
from django_xjobs.run.execution import Outcome
from django_xjobs.testing import run_until_idle
from django_xjobs.text import cap
from tests import jobs


def claim(driver, vis=30.0):
    return driver.runs().claim(queues=["default"], limit=1, visibility_timeout=vis, worker_id="w")


def raised(error: BaseException) -> BaseException:
    """``error`` with a traceback, as a handler's exception reaches the executor."""
    try:
        raise error
    except BaseException as caught:
        return caught


def drain(harness, count):
    """Run until ``count`` runs happened, moving time past each retry delay in between."""
    runs = []
    for _ in range(count):
        runs += run_until_idle()
        if len(runs) >= count:
            return runs
        harness.advance(1)
    raise AssertionError(f"only {len(runs)} of {count} runs happened")


def fail_once(harness, job_id, error: BaseException, outcome="retried") -> None:
    [held] = claim(harness.driver)
    assert held.id == job_id
    failure = history.failure(raised(error), outcome)
    assert harness.driver.runs().retry(
        RetryAt(held.id, held.lease_token, error=str(error), failure=failure)
    )
    harness.advance(1)


# --- storage: both drivers answer the same -----------------------------------------------------


def test_each_failed_attempt_keeps_its_error_class_path_and_traceback(harness):
    job_id = jobs.fails.enqueue(n=7).id  # FAST: 3 attempts, dead-lettered after the third
    runs = drain(harness, 3)
    assert [r.outcome for r in runs][-1] == Outcome.DEAD_LETTERED
    trace = inspect_job(job_id)
    attempts = trace["attempts"]
    assert [(a["attempt"], a["outcome"]) for a in attempts] == [
        (1, "retried"),
        (2, "retried"),
        (3, "dead"),
    ]
    for a in attempts:
        assert (a["code"], a["exception"], a["message"]) == (None, "builtins.ValueError", "boom 7")
        assert a["traceback"].startswith("Traceback (most recent call last):")
        assert "in fails" in a["traceback"] and a["traceback"].endswith("ValueError: boom 7\n")
        datetime.fromisoformat(a["at"])
    assert trace["last_error"] == "ValueError: boom 7"  # unchanged: the first line as before


def test_our_errors_keep_their_code_and_the_message_without_it(harness):
    job_id = jobs.terminal.enqueue(n=1).id
    run_until_idle()
    [attempt] = inspect_job(job_id)["attempts"]
    assert attempt["code"] == "X_TERMINAL"
    assert attempt["exception"] == "django_xjobs.errors.TerminalError"
    assert attempt["message"] == "the card was declined"
    assert attempt["outcome"] == "dead"


def test_a_successful_attempt_adds_nothing(harness):
    job_id = jobs.flaky.enqueue(n=1, failures=1).id
    runs = drain(harness, 2)
    assert [r.outcome for r in runs] == [Outcome.RETRIED, Outcome.COMPLETED]
    attempts = inspect_job(job_id)["attempts"]
    assert [(a["attempt"], a["exception"], a["outcome"]) for a in attempts] == [
        (1, "builtins.ConnectionError", "retried")
    ]


def test_a_settle_without_a_failure_writes_no_history(harness):
    job_id = jobs.ok.enqueue(n=1).id
    [held] = claim(harness.driver)
    park = SuspendUntil(held.id, held.lease_token, error="waits")
    assert harness.driver.runs().suspend(park)
    assert harness.driver.reads().get_job(job_id).errors == ()


def test_only_the_last_ten_attempts_are_kept(harness):
    job_id = jobs.ok.enqueue(n=1).id  # the driver records whatever the settle says
    for n in range(1, KEEP + 3):
        fail_once(harness, job_id, ValueError(f"failure {n}"))
    kept = harness.driver.reads().get_job(job_id).errors
    assert KEEP == 10
    assert [e.attempt for e in kept] == list(range(3, KEEP + 3))
    assert [e.message for e in kept] == [f"failure {n}" for n in range(3, KEEP + 3)]
    assert all(isinstance(e, FailedAttempt) and e.at.tzinfo is not None for e in kept)


def test_a_traceback_is_capped_at_16_kib_with_a_marker(harness):
    job_id = jobs.ok.enqueue(n=1).id
    fail_once(harness, job_id, ValueError("x" * 3000 + "é" * 20_000))
    [entry] = harness.driver.reads().get_job(job_id).errors
    size = len(entry.traceback.encode())
    assert TRACEBACK_LIMIT - 4 <= size <= TRACEBACK_LIMIT == 16 * 1024
    assert entry.traceback.startswith("Traceback (most recent call last):")
    assert "bytes cut to keep it within 16384 bytes" in entry.traceback
    assert entry.traceback.endswith("éé\n")  # the tail: where the error is
    assert len(entry.message.encode()) <= history.MESSAGE_LIMIT


def test_text_postgresql_cannot_store_is_escaped_not_fatal(harness):
    job_id = jobs.ok.enqueue(n=1).id
    [held] = claim(harness.driver)
    failure = history.failure(raised(ValueError("nul \x00 and \udcff")), "retried")
    assert harness.driver.runs().retry(RetryAt(held.id, held.lease_token, failure=failure))
    [entry] = harness.driver.reads().get_job(job_id).errors
    assert entry.message == "nul \\x00 and \\udcff"


def test_a_stale_settle_writes_no_history(harness):
    job_id = jobs.ok.enqueue(n=1).id
    [first] = claim(harness.driver, vis=5)
    harness.advance(5)  # its lease lapsed; another worker claims the row
    [second] = claim(harness.driver)
    kept = harness.driver.reads().get_job(job_id).errors  # the lapsed run, recorded by the claim
    late = history.failure(raised(ValueError("late")), "retried")
    assert not harness.driver.runs().retry(
        RetryAt(first.id, first.lease_token, error="late", failure=late)
    )
    assert harness.driver.reads().get_job(job_id).errors == kept
    assert harness.driver.runs().complete([Complete(second.id, second.lease_token)]) == {job_id}
    done = RetryAt(second.id, second.lease_token, error="after", failure=late)
    assert not harness.driver.runs().retry(done)  # a settled row is not running: fenced out too
    assert harness.driver.reads().get_job(job_id).errors == kept
    assert [e.message for e in kept] == [history.LAPSED.message]


def test_lease_16_a_run_whose_worker_died_is_recorded_as_lapsed_by_the_next_claim(harness):
    job_id = jobs.flaky.enqueue(n=2, failures=2).id
    [lost] = claim(harness.driver, vis=5)
    lapsed_at = harness.driver.reads().get_job(job_id).visible_at
    harness.advance(5)  # the worker died: nothing settles attempt 1
    runs = drain(harness, 2)  # attempt 2 fails, attempt 3 completes
    assert [r.outcome for r in runs] == [Outcome.RETRIED, Outcome.COMPLETED]
    attempts = inspect_job(job_id)["attempts"]
    assert [(a["attempt"], a["outcome"], a["code"]) for a in attempts] == [
        (lost.attempt, "lapsed", "X_JOB_LEASE_LOST"),
        (2, "retried", None),
    ]
    crashed = attempts[0]
    assert "died or stalled" in crashed["message"] and "not counted" in crashed["message"]
    assert crashed["exception"] == "django_xjobs.errors.LeaseLostError"
    assert crashed["traceback"] == ""
    # when its lease ran out (the rows moved 5 s into the past since)
    assert datetime.fromisoformat(crashed["at"]) == lapsed_at - timedelta(seconds=5)


def test_retry_job_keeps_the_history_and_the_last_error(harness):
    job_id = jobs.terminal.enqueue(n=2).id
    run_until_idle()
    before = inspect_job(job_id)
    requeued = retry_job(job_id)
    assert requeued["state"] == "ready"
    assert requeued["attempts"] == before["attempts"] and len(before["attempts"]) == 1
    assert requeued["last_error"] == before["last_error"]
    run_until_idle()
    assert [a["attempt"] for a in inspect_job(job_id)["attempts"]] == [1, 1]


def test_lease_17_a_crash_loop_is_recorded_as_crashed(harness):
    """Each run died alone, in the child its worker isolated it in (SPEC LEASE-17): each death is
    recorded as ``crashed``, and the claim after the last dead-letters it, recorded too."""
    from django_xjobs.run.verdicts import crashed_alone

    job_id = jobs.ledger.using().enqueue(token=f"poison-{uuid.uuid4()}").id
    expiries = conf.get().max_lease_expiries
    for _ in range(expiries - 1):
        [held] = claim(harness.driver, vis=5)
        execution = crashed_alone(held, jobs.ledger, "was killed by SIGKILL")
        assert execution.outcome == Outcome.RETRIED
        assert harness.driver.runs().retry(execution.settle)
    [held] = claim(harness.driver, vis=5)
    last = crashed_alone(held, jobs.ledger, "was killed by SIGKILL")  # the bound: dead at once
    assert last.outcome == Outcome.DEAD_LETTERED
    assert harness.driver.runs().finish(last.settle)
    *deaths, verdict = inspect_job(job_id)["attempts"]
    assert [(a["attempt"], a["code"], a["outcome"]) for a in deaths] == [
        (n, "X_JOB_CRASHED", "crashed") for n in range(1, expiries)
    ]
    assert "was killed by SIGKILL while it ran alone" in deaths[0]["message"]
    assert (verdict["code"], verdict["outcome"]) == ("X_JOB_CRASHED", "crashed")
    assert verdict["attempt"] == expiries
    assert (
        f"the last {expiries} run(s)" in verdict["message"] and "died alone" in verdict["message"]
    )


def test_an_unknown_name_is_recorded_when_it_is_dead_lettered_not_while_parked(harness):
    request = EnqueueRequest(
        name="gone.from.this.deploy",
        queue="default",
        input={},
        input_json="{}",
        idempotency_key="x",
        max_attempts=3,
    )
    job_id = harness.driver.jobs().enqueue(request).id
    assert [r.outcome for r in run_until_idle()] == [Outcome.SUSPENDED]
    assert inspect_job(job_id)["attempts"] == []  # parked, no attempt spent: not a failure
    harness.advance(86400)  # past the grace period
    assert [r.outcome for r in run_until_idle()] == [Outcome.DEAD_LETTERED]
    [attempt] = inspect_job(job_id)["attempts"]
    assert (attempt["code"], attempt["outcome"]) == ("X_JOB_UNKNOWN", "dead")


def test_a_timed_out_attempt_is_recorded_as_timeout(db, caplog):
    job_id = jobs.overruns.enqueue(token=f"late-{uuid.uuid4()}", late_step=False).id
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        run_until_idle()
        deadline = time.monotonic() + 10
        while "xjobs.timeout.abandoned" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.02)  # the abandoned body ends on its own thread; poll for its log
    [attempt] = inspect_job(job_id)["attempts"]
    assert (attempt["code"], attempt["outcome"]) == ("X_JOB_TIMEOUT", "timeout")
    assert attempt["exception"] == "django_xjobs.errors.JobTimeoutError"


# --- the cap itself ------------------------------------------------------------------------------


def test_cap_leaves_text_that_fits_alone_and_never_splits_a_character():
    assert cap("é" * 8, 16) == "é" * 8
    cut = cap("a" + "€" * 3000, 1024)
    assert len(cut.encode()) <= 1024
    assert cut.startswith("a€") and cut.endswith("€") and "bytes cut" in cut
    cut.encode().decode()  # whole characters only


# --- where an operator reads it ------------------------------------------------------------------


def test_xjobs_show_prints_each_failed_attempt_and_the_last_traceback(db):
    job_id = str(jobs.fails.enqueue(n=3).id)
    run_until_idle()
    out = StringIO()
    call_command("xjobs", "show", job_id, stdout=out)
    text = out.getvalue()
    assert "failed attempts:" in text
    assert "#1" in text and "retried" in text and "builtins.ValueError: boom 3" in text
    assert "traceback of attempt 1:" in text and "raise ValueError" in text
    out = StringIO()
    call_command("xjobs", "show", job_id, "--json", stdout=out)
    [attempt] = json.loads(out.getvalue())["attempts"]
    assert attempt["exception"] == "builtins.ValueError" and "Traceback" in attempt["traceback"]


def test_xjobs_show_says_when_no_attempt_failed(db):
    job_id = str(jobs.ok.enqueue(n=3).id)
    out = StringIO()
    call_command("xjobs", "show", job_id, stdout=out)
    assert "failed attempts: none" in out.getvalue()


@pytest.fixture
def admin_client(client, db):
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


def test_the_admin_detail_page_shows_the_attempt_history(admin_client):
    job_id = jobs.fails.enqueue(n=4).id
    run_until_idle()
    page = admin_client.get(f"/admin/django_xjobs/job/{job_id}/change/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "Failed attempts" in body and "Attempt history" in body
    assert "builtins.ValueError" in body and "boom 4" in body and "<details>" in body
    assert "raise ValueError(f&quot;boom {n}&quot;)" in body  # the traceback, escaped
    empty = admin_client.get(f"/admin/django_xjobs/job/{jobs.ok.enqueue(n=4).id}/change/")
    assert "no failed attempts" in empty.content.decode()
