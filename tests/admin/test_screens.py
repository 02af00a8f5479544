"""What the screens say (issue 23): a step's real duration, a cron that never fired, one state
vocabulary on every surface, a cancelled run reported as cancelled, and the smaller lines of the
jobs list and the job page. Each storage case runs on both drivers through ``harness``."""

from __future__ import annotations

import json
import logging
import signal
import sys
import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO
from uuid import UUID

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db.models.functions import Now
from django.utils.html import strip_tags

from django_xjobs import metrics, operations
from django_xjobs.admin import JobAdmin
from django_xjobs.clock import FrozenClock
from django_xjobs.drivers.postgres import PostgresDriver
from django_xjobs.drivers.postgres.scheduler import PostgresSchedulerStore
from django_xjobs.errors import JobIdAmbiguousError, JobNotFoundError
from django_xjobs.models import Job
from django_xjobs.run.execution import Outcome
from django_xjobs.scheduler.role import Scheduler
from django_xjobs.testing import run_to_completion, run_until_idle
from django_xjobs.worker.worker import Worker
from tests import jobs

HOLD = 0.3


def _common(ids: list[str]) -> str:
    """The start the ids share, character by character (they are all 36 characters)."""
    shared = ""
    for chars in zip(*ids, strict=True):
        if len(set(chars)) > 1:
            break
        shared += chars[0]
    return shared


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


# --- a step's duration ------------------------------------------------------------------------


def test_step_02_a_step_records_when_its_body_began_not_when_its_record_was_written(harness):
    job_id = jobs.timed_steps.enqueue(token=f"timed-{uuid.uuid4()}", hold=HOLD).id
    run_to_completion(job_id)
    steps = {s["name"]: s for s in operations.inspect_job(job_id)["steps"]}
    assert steps["slow"]["duration"] >= HOLD  # it read 0.000 s: both times were the write's
    assert steps["quick"]["duration"] < HOLD
    assert steps["slow"]["started_at"] < steps["slow"]["completed_at"]
    assert steps["slow"]["completed_at"] <= steps["quick"]["started_at"]
    shown = xjobs("show", str(job_id))
    [line] = [x for x in shown.splitlines() if x.strip().startswith("slow ")]
    assert float(line.split()[3].rstrip("s")) >= HOLD, line


def test_step_03_a_failed_step_keeps_its_first_start_and_ends_at_its_completion(harness):
    job_id = jobs.timed_steps.enqueue(token=f"timed-{uuid.uuid4()}", fail_first=True).id
    run_to_completion(job_id)
    [slow] = [s for s in operations.inspect_job(job_id)["steps"] if s["name"] == "slow"]
    assert (slow["status"], slow["attempts"]) == ("completed", 2)
    assert slow["duration"] >= 2 * HOLD  # from the first attempt's start: two bodies ran


# --- a cron that never fired ------------------------------------------------------------------


@pytest.fixture
def admin_client(client, db):
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


def test_sched_01_an_armed_cron_that_never_fired_says_never(admin_client):
    clock = FrozenClock(datetime(2026, 1, 5, 10, 0, 30, tzinfo=UTC))  # hours from 03:00
    scheduler = Scheduler(
        driver=PostgresDriver("default"),
        store=PostgresSchedulerStore("default"),
        cron_names=["tests.daily", "tests.hourly_once"],
        clock=clock,
    )
    assert scheduler.tick() == []  # arms both watermarks, fires nothing (SPEC SCHED-01)
    page = admin_client.get("/admin/django_xjobs/job/crons/")
    listed = {c["name"]: c for c in page.context["crons"]}
    # the arming mark is a microsecond before the next occurrence: an instant still ahead
    assert listed["tests.daily"]["last_fired"] is None
    assert listed["tests.hourly_once"]["last_fired"] is None
    row = page.content.decode().split("tests.hourly_once")[1].split("</tr>")[0]
    assert "never" in row, row
    # the scheduler state's own changelist says the same, its watermark apart
    states = admin_client.get("/admin/django_xjobs/schedulerstate/").content.decode()
    row = states.split("tests.hourly_once")[1].split("</tr>")[0]
    assert "never" in row and "watermark" in states, row
    clock.advance(3600)
    [_] = scheduler.tick()  # the hourly occurrence, once
    listed = {
        c["name"]: c for c in admin_client.get("/admin/django_xjobs/job/crons/").context["crons"]
    }
    assert listed["tests.hourly_once"]["last_fired"] == clock.now()  # run-once: moved to now
    assert listed["tests.daily"]["last_fired"] is None


# --- a cancelled run is reported as cancelled -------------------------------------------------


def test_cancel_05_q_08_a_run_cancelled_before_its_heartbeat_saw_it_is_reported_cancelled(
    live_harness, caplog
):
    """The body returns before any heartbeat reads the cancel: its settle is refused because of
    the cancel, and that is news (INFO xjobs.job.cancelled), not a lost lease."""
    job_id = jobs.ok.enqueue(n=77).id
    # no heartbeat inside this test: only the settle can find the cancel
    worker = Worker(
        queues=["default"],
        driver=live_harness.driver,
        burst=True,
        heartbeat_interval=600,
        visibility_timeout=1800,
    )
    original = worker._execute

    def cancelled_as_it_starts(run):
        live_harness.driver.jobs().cancel(run.job.id, "customer asked")
        return original(run)

    worker._execute = cancelled_as_it_starts
    counted = {
        o: metrics.value("xjobs_jobs_total", queue="default", outcome=o)
        for o in ("cancelled", "lease_lost")
    }
    with caplog.at_level(logging.INFO, logger="django_xjobs"):
        stats = worker.run()
    assert stats.outcomes == {Outcome.CANCELLED: 1}
    mine = [r for r in caplog.records if str(job_id) in r.getMessage()]
    assert [(r.levelno, r.getMessage().split()[0]) for r in mine] == [
        (logging.INFO, "xjobs.job.cancelled")
    ], [r.getMessage() for r in mine]
    assert "customer asked" in mine[0].getMessage()
    assert metrics.value("xjobs_jobs_total", queue="default", outcome="cancelled") == (
        counted["cancelled"] + 1
    )
    assert (
        metrics.value("xjobs_jobs_total", queue="default", outcome="lease_lost")
        == (counted["lease_lost"])
    )
    assert live_harness.row(job_id).state == "cancelled"


# --- one state vocabulary ---------------------------------------------------------------------


def waiting_fixture(harness) -> dict[str, set[str]]:
    """Two due rows and two not yet due, each pair stored both ways: a retry waiting out its
    backoff is stored ready, a due enqueue(delay=...) is stored delayed."""
    backoff = jobs.flaky.enqueue(n=23).id
    run_until_idle()  # fails once: stored ready, its run_at one backoff ahead
    harness.advance(-3600)  # that backoff now ends an hour from now, whatever the host's speed
    due_delayed = jobs.ok.using(delay="5s").enqueue(n=1).id
    harness.advance(10)
    later = jobs.ok.using(delay="1h").enqueue(n=2).id
    ready = jobs.ok.enqueue(n=3).id
    assert harness.row(backoff).state == "ready" and harness.row(due_delayed).state == "delayed"
    return {
        "ready": {str(due_delayed), str(ready)},
        "delayed": {str(backoff), str(later)},
    }


def test_q_05_every_surface_says_the_same_state_with_the_same_numbers(harness, admin_client):
    expected = waiting_fixture(harness)
    counts = {state: len(ids) for state, ids in expected.items()}
    # the operator API and the command: counts, filters and the state each row shows
    totals = operations.inspect_queues()["totals"]
    assert {s: totals[s] for s in counts} == counts
    queues = json.loads(xjobs("queues", "--json"))["totals"]
    assert {s: queues[s] for s in counts} == counts
    for state, ids in expected.items():
        assert {r["id"] for r in operations.list_jobs(state=state)} == ids, state
        listed = json.loads(xjobs("ls", "--json", "--state", state))
        assert {r["id"] for r in listed} == ids, state
    shown = {r["id"]: r["state"] for r in operations.list_jobs()}
    cli = {r["id"]: r["state"] for r in json.loads(xjobs("ls", "--json"))}
    traced = {i: operations.inspect_job(i)["state"] for i in shown}
    for state, ids in expected.items():
        for each in (shown, cli, traced):
            assert {i for i, s in each.items() if s == state} == ids, (state, each)
    if harness.driver.name != "postgres":
        return  # the admin reads the database
    page = admin_client.get("/admin/django_xjobs/job/queues/")
    assert {s: page.context["totals"][s] for s in counts} == counts
    [row] = page.context["rows"]
    for state, ids in expected.items():
        found = admin_client.get(row["links"][state])  # the page's own link for the number
        rows = found.context["cl"].result_list
        assert {str(j.id) for j in rows} == ids, state
        assert {strip_tags(JobAdmin.state_shown(None, j)) for j in rows} == {state}  # type: ignore[arg-type]


# --- a database that does not exist -----------------------------------------------------------


@pytest.mark.process
def test_a_database_that_does_not_exist_names_createdb(db):
    """SQLSTATE 3D000 at connect: the fix is to create it, not to start PostgreSQL."""
    from django_xjobs.testing.postgres import database_url, url_for_database
    from tests.support.process import run_manage

    missing = f"xjobs_missing_{uuid.uuid4().hex[:8]}"
    url = url_for_database(database_url(), missing)
    for argv in (["xjobs", "ls"], ["xjobs_worker", "--burst"]):
        done = run_manage(*argv, "--settings=tests.settings", url=url)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 1 and len(lines) == 1, done.stderr
        assert "X_DRIVER_UNAVAILABLE" in lines[0], lines[0]
        assert f"createdb {missing}" in lines[0], lines[0]


# --- the smaller lines: attempts, a stale error, the jobs list and id prefixes ---------------


def test_step_10_a_parked_run_names_the_attempt_it_is_in(harness, admin_client):
    job_id = jobs.sleeper.enqueue(n=5, token="parked").id
    run_until_idle()  # runs its first step, then parks in the 3-day sleep
    row = harness.row(job_id)
    assert (row.state, row.attempt) == ("suspended", 0)  # stored: the parked attempt given back
    shown = xjobs("show", str(job_id))
    assert "attempt 1 of" in shown and "attempt 0 of" not in shown, shown
    [line] = [x for x in xjobs("ls").splitlines() if x.startswith(str(job_id))]
    assert f" 1/{row.max_attempts} " in line, line
    if harness.driver.name == "postgres":
        page = admin_client.get("/admin/django_xjobs/job/").content.decode()
        assert f"1 of {row.max_attempts} (parked)" in page


def test_a_done_job_shows_no_error_its_earlier_attempts_keep_theirs(harness):
    job_id = jobs.flaky.enqueue(n=61, failures=1).id
    run_until_idle()
    assert harness.row(job_id).last_error == "ConnectionError: attempt 1 failed"
    harness.advance(2)
    run_until_idle()
    trace = operations.inspect_job(job_id)
    assert (trace["state"], trace["last_error"]) == ("done", None)
    assert [a["message"] for a in trace["attempts"]] == ["attempt 1 failed"]  # the history
    assert "last error -" in xjobs("show", str(job_id))


def test_after_an_operator_retry_a_done_job_no_longer_heads_with_its_dead_letter(harness):
    job_id = jobs.ok.enqueue(n=62).id
    harness.driver.jobs().cancel(job_id, "X_TERMINAL: stop")
    assert operations.retry_job(job_id, force=True)["last_error"] == "X_TERMINAL: stop"
    run_until_idle()
    assert (harness.row(job_id).state, harness.row(job_id).last_error) == ("done", None)


def test_ls_has_a_header_row_naming_every_column_the_time_too(harness):
    first = jobs.ok.enqueue(n=1).id
    lines = xjobs("ls").splitlines()
    assert lines[0].split() == ["id", "name", "queue", "state", "attempt", "updated"]
    assert lines[1].startswith(str(first))
    assert xjobs("ls", "--queue", "nowhere").strip() == "no jobs"


def test_show_cancel_and_retry_take_a_unique_id_prefix(harness):
    job_id = str(jobs.ok.enqueue(n=7).id)
    other = str(jobs.ok.enqueue(n=8).id)
    common = len(_common([job_id, other]))
    prefix = job_id[: common + 1]  # one digit past what the two share: names only the first
    assert json.loads(xjobs("show", prefix, "--json"))["id"] == job_id
    assert json.loads(xjobs("cancel", prefix, "--json"))["state"] == "cancelled"
    retried = json.loads(xjobs("retry", prefix, "--force", "--json"))
    assert (retried["id"], retried["state"]) == (job_id, "ready")
    assert harness.row(UUID(other)).state == "ready"  # untouched


def test_an_ambiguous_prefix_is_refused_with_its_candidates(harness):
    ids = [str(jobs.ok.enqueue(n=n).id) for n in (1, 2)]
    shared = _common(ids)
    assert len(shared.replace("-", "")) >= 4, ids  # UUIDv7: made in the same second
    with pytest.raises(CommandError) as refused:
        xjobs("show", shared)
    assert "X_JOB_ID_AMBIGUOUS" in str(refused.value)
    assert all(i in str(refused.value) for i in ids)
    with pytest.raises(JobIdAmbiguousError):
        operations.cancel_job(shared)
    assert {harness.row(UUID(i)).state for i in ids} == {"ready"}  # nothing cancelled
    with pytest.raises(JobNotFoundError, match="no job id starts with"):
        operations.inspect_job("ffff")
    with pytest.raises(JobNotFoundError, match="not a job id"):
        operations.retry_job("abc")  # too short to be a prefix


# --- a worker that exited past its shutdown timeout -------------------------------------------


@pytest.mark.process
def test_hang_05_a_worker_gone_past_its_shutdown_timeout_says_it_exited(workers):
    """A real worker, a run that ignores the stop, SIGTERM: exit 75, and its presence row is
    marked stopped, not left "lapsed, in flight 1" for ever; the re-claim's history says the
    worker exited, not that it stayed present through an outage."""
    from django_xjobs.management.lifecycle import EXIT_SHUTDOWN_TIMEOUT
    from django_xjobs.models import Worker as Presence
    from tests.support.process import ledger, wait_for

    token = f"exits-{uuid.uuid4()}"
    job_id = jobs.ledger.enqueue(token=token, hold=120.0, heed_signal=False).id
    name = f"exits-{uuid.uuid4().hex[:8]}"
    worker = workers(
        "--queues",
        "default",
        "--poll-interval",
        "100ms",
        "--visibility-timeout",
        "3s",
        "--shutdown-timeout",
        "1s",
        "--worker-id",
        name,
    )
    wait_for(lambda: ledger(token, "start"), timeout=30, what="the run to start")
    worker.send(signal.SIGTERM)
    code, _, err = worker.finish(timeout=60)
    assert code == EXIT_SHUTDOWN_TIMEOUT, err
    row = Presence.objects.get(id=name)
    assert row.stopped_at is not None and row.in_flight == 0
    [shown] = [w for w in json.loads(xjobs("workers", "--json")) if w["id"] == name]
    assert (shown["state"], shown["alive"], shown["in_flight"]) == ("exited", False, 0)
    [line] = [x for x in xjobs("workers").splitlines() if x.startswith(name)]
    assert " exited " in line, line
    # its run's lease lapses (moved into the past rather than waited for); the next claim
    # records what happened to that attempt
    Job.objects.filter(id=job_id).update(visible_at=Now() - timedelta(seconds=1))
    [again] = (
        PostgresDriver("default")
        .runs()
        .claim(queues=["default"], limit=1, visibility_timeout=30, worker_id="after")
    )
    assert again.id == job_id
    [entry] = operations.inspect_job(job_id)["attempts"]
    assert "exited past its --shutdown-timeout" in entry["message"], entry
    assert "stayed present" not in entry["message"]


def test_a_stopped_presence_reads_exited_and_its_lapses_say_so(harness):
    """The same on both drivers: the row the exit leaves, and the verdict of its re-claim.
    ``inspect_workers()`` lists the fleet's workers (SPEC WORK-16)."""
    from django_xjobs.drivers.contract import Presence

    job_id = jobs.ok.enqueue(n=90).id
    harness.driver.runs().renew_presence(Presence("w-exits", "host", 1, ("default",), 1), 30)
    harness.driver.runs().renew_presence(Presence("w-stays", "host", 2, ("default",), 0), 30)
    [held] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=5, worker_id="w-exits"
    )
    harness.driver.runs().stop_presence("w-exits")
    states = {w["id"]: (w["state"], w["in_flight"]) for w in operations.inspect_workers()}
    assert states == {"w-exits": ("exited", 0), "w-stays": ("alive", 0)}
    harness.advance(6)
    harness.driver.runs().renew_presence(Presence("w-stays", "host", 2, ("default",), 0), 30)
    [again] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=5, worker_id="w-stays"
    )
    assert again.id == held.id == job_id
    [entry] = operations.inspect_job(job_id)["attempts"]
    assert entry["outcome"] == "lapsed" and "exited past" in entry["message"], entry
    # told to stop: no crash, and no suspect either (SPEC LEASE-16)
    assert (again.lease_expiries, again.died_with) == (0, None)
    harness.driver.runs().renew_presence(Presence("w-exits", "host", 3, ("default",), 0), 30)
    assert {w["id"]: w["state"] for w in operations.inspect_workers()}["w-exits"] == "alive"


# --- one line per task event ------------------------------------------------------------------


def test_the_workers_console_tells_a_task_event_once(monkeypatch, capfd):
    """Django 6 prints its task logger through the ``django`` console; the worker's own console
    tells the same runs. With no logging of the project's own, only the worker's speaks."""
    from django_xjobs.declarations.registry import tasks_api
    from django_xjobs.management.commands.xjobs_worker import _log_to_console

    root, ours = logging.getLogger(), logging.getLogger("django_xjobs")
    tasks_logger = logging.getLogger(tasks_api())
    for each in (root, ours, tasks_logger):
        monkeypatch.setattr(each, "handlers", [])  # restored after: pytest's own, and none
    monkeypatch.setattr(ours, "level", ours.level)
    monkeypatch.setattr(tasks_logger, "propagate", True)
    _log_to_console(1)
    # what Django 6's default logging holds above django.tasks: a console of its own
    monkeypatch.setattr(root, "handlers", [logging.StreamHandler(sys.stderr)])
    tasks_logger.info("Task id=1 path=shop.tasks.receipt state=SUCCESSFUL")
    tasks_logger.error("Task id=2 path=shop.tasks.receipt state=FAILED")
    assert "Task id=" not in capfd.readouterr().err
