"""Django's own task API on django-xjobs: ``XJobsBackend`` (issue 14).

Tasks are declared in tests/tasks.py with Django's decorator (Django 6's ``django.tasks``, or the
``django-tasks`` backport on Django 5.2) and run by the same claim, execute and settle as jobs.
"""

from __future__ import annotations

import contextlib
import signal
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from uuid import UUID, uuid4

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core import checks
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from django_xjobs import cancel_job, conf
from django_xjobs.backends import XJobsBackend
from django_xjobs.backends.tasks import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    task_enqueued,
    task_finished,
    task_started,
)
from django_xjobs.declarations import registry
from django_xjobs.errors import ConfigInvalidError, InputInvalidError
from django_xjobs.models import LIVE, Job, OutboxEntry
from django_xjobs.testing import run_until_idle
from tests import jobs, tasks
from tests.models import Ledger
from tests.support.database import sessions_of
from tests.support.process import wait_for, worker_env

TASKS = dict(
    default={"BACKEND": "django_xjobs.backends.XJobsBackend", "QUEUES": ["default", "other"]},
    retrying={
        "BACKEND": "django_xjobs.backends.XJobsBackend",
        "OPTIONS": {"RETRY": {"attempts": 3, "delay": "1s", "jitter": False}},
    },
)


def row_of(harness, result):
    return harness.row(UUID(result.id))


@contextlib.contextmanager
def received(signal) -> Iterator[list]:
    """The ``(sender, task_result)`` of every send of ``signal`` inside the block."""
    seen: list = []

    def receiver(sender, task_result, **kwargs):
        seen.append((sender, task_result))

    signal.connect(receiver, weak=False)
    try:
        yield seen
    finally:
        signal.disconnect(receiver)


# --- the backend as Django sees it ----------------------------------------------------------


def test_every_capability_flag_is_on_and_tasks_use_the_backend():
    backend = tasks.add.get_backend()
    assert isinstance(backend, XJobsBackend)
    assert (
        backend.supports_defer,
        backend.supports_async_task,
        backend.supports_get_result,
        backend.supports_priority,
    ) == (True, True, True, True)


def test_validate_task_keeps_djangos_rules_and_adds_queue_names_and_timedelta():
    with pytest.raises(InvalidTask, match="Queue 'nope' is not valid"):
        tasks.add.using(queue_name="nope")
    with pytest.raises(InvalidTask, match="priority must be a whole number"):
        tasks.add.using(priority=101)
    with pytest.raises(InvalidTask, match="negative"):
        tasks.add.using(run_after=timedelta(seconds=-1))
    with (
        override_settings(TASKS={"default": {**TASKS["default"], "QUEUES": []}}),
        pytest.raises(InvalidTask, match="not a valid queue name"),
    ):
        tasks.add.using(queue_name="no spaces")
    assert tasks.add.using(run_after=timedelta(minutes=5)).run_after == timedelta(minutes=5)


# --- enqueue ----------------------------------------------------------------------------------


def test_enqueue_stores_an_ordinary_job_row_whose_id_is_the_result_id(harness):
    with received(task_enqueued) as enqueued:
        result = tasks.add.enqueue(1, b=2)
    row = row_of(harness, result)
    assert row is not None and result.id == str(row.id)
    assert (row.name, row.queue, row.priority, row.state) == (
        "tests.tasks.add",
        "default",
        0,
        "ready",
    )
    assert row.input == {
        "args": [1],
        "kwargs": {"b": 2},
        "backend": "default",
        "enqueued_at": result.enqueued_at.isoformat(),
    }
    assert row.max_attempts == 1  # Django's semantics: no retry unless OPTIONS say so
    assert result.status == TaskResultStatus.READY and result.backend == "default"
    assert (result.args, result.kwargs, result.attempts) == ([1], {"b": 2}, 0)
    assert enqueued == [(XJobsBackend, result)]


def test_each_enqueue_is_a_run_of_its_own(harness):
    first, second = tasks.add.enqueue(1, 2), tasks.add.enqueue(1, 2)
    assert first.id != second.id
    assert row_of(harness, first).state == row_of(harness, second).state == "ready"


def test_priority_and_queue_go_to_the_row_and_order_the_claim(harness):
    urgent = tasks.urgent.enqueue("now")
    row = row_of(harness, urgent)
    assert (row.queue, row.priority) == ("other", 10)
    low = tasks.add.using(priority=-100).enqueue(0, 0)
    high = tasks.add.using(priority=100).enqueue(0, 1)
    middle = tasks.add.enqueue(0, 2)
    order = [str(e.job.id) for e in run_until_idle(queues=["default"])]
    assert order == [high.id, middle.id, low.id]


def test_a_task_runs_only_where_its_queue_is_watched(harness):
    other = tasks.urgent.enqueue("routed")  # queue_name="other"
    moved = tasks.add.using(queue_name="other").enqueue(1, 2)
    assert run_until_idle(queues=["default"]) == []
    ran = run_until_idle(queues=["other"])
    assert sorted(str(e.job.id) for e in ran) == sorted([other.id, moved.id])
    assert {e.job.queue for e in ran} == {"other"}


def test_run_after_defers_the_run_by_datetime_or_timedelta(harness):
    later = tasks.add.using(run_after=timezone.now() + timedelta(minutes=5)).enqueue(1, 1)
    soon = tasks.add.using(run_after=timedelta(minutes=5)).enqueue(2, 2)
    assert row_of(harness, later).state == row_of(harness, soon).state == "delayed"
    assert run_until_idle() == []
    harness.advance(301)
    assert sorted(str(e.job.id) for e in run_until_idle()) == sorted([later.id, soon.id])


def test_arguments_json_cannot_hold_are_refused_at_enqueue_and_nothing_is_stored(harness):
    before = len(harness.driver.reads().list_jobs(limit=1000))
    with pytest.raises(InputInvalidError, match="X_INPUT_INVALID") as error:
        tasks.add.enqueue(object(), 1)
    assert "tests.tasks.add" in str(error.value) and error.value.hint
    with pytest.raises(InputInvalidError, match="not a JSON number"):
        tasks.add.enqueue(float("nan"), 1)
    assert len(harness.driver.reads().list_jobs(limit=1000)) == before


def test_a_task_its_module_path_does_not_find_is_refused_at_enqueue(harness):
    with pytest.raises(InvalidTask, match="cannot be found again by its module path"):
        tasks.misnamed.enqueue()
    assert harness.driver.reads().list_jobs(limit=10) == []


# --- running it ---------------------------------------------------------------------------------


def test_a_run_sends_started_and_finished_and_the_result_reads_back(harness):
    result = tasks.add.enqueue(2, 3)
    with received(task_started) as started, received(task_finished) as finished:
        [execution] = run_until_idle(worker_id="w-1")
    assert execution.outcome == "completed"
    [(sender, running)] = started
    assert sender is XJobsBackend and running.id == result.id
    assert running.status == TaskResultStatus.RUNNING and running.worker_ids == ["w-1"]
    [(sender, done)] = finished
    assert sender is XJobsBackend and done.status == TaskResultStatus.SUCCESSFUL
    stored = tasks.add.get_result(result.id)
    assert stored.status == TaskResultStatus.SUCCESSFUL and stored.return_value == 5
    assert (stored.attempts, stored.worker_ids, stored.errors) == (1, ["w-1"], [])
    assert stored.enqueued_at <= stored.started_at <= stored.finished_at
    assert stored.last_attempted_at == stored.started_at
    assert done.finished_at == stored.finished_at


def test_refresh_follows_the_row(harness):
    result = tasks.add.enqueue(1, 1)
    result.refresh()
    assert result.status == TaskResultStatus.READY and not result.is_finished
    run_until_idle()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 2


def test_a_task_that_takes_context_sees_its_attempt_and_running_result(harness):
    result = tasks.with_context.enqueue(label="x")
    run_until_idle(worker_id="w-2")
    value = tasks.with_context.get_result(result.id).return_value
    assert value == {
        "label": "x",
        "attempt": 1,
        "id": result.id,
        "status": "RUNNING",
        "worker_ids": ["w-2"],
        "started": True,
    }


def test_an_async_task_runs(harness):
    result = tasks.async_add.enqueue(20, 22)
    run_until_idle()
    assert tasks.async_add.get_result(result.id).return_value == 42


def test_a_return_value_is_normalised_as_django_does_or_the_run_fails(harness):
    pair, bad = tasks.pair.enqueue(), tasks.returns_object.enqueue()
    run_until_idle()
    assert tasks.pair.get_result(pair.id).return_value == [1, 2]
    failed = tasks.returns_object.get_result(bad.id)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.errors[0].exception_class_path == "builtins.TypeError"


def test_a_failure_is_final_by_default_with_its_class_path_and_traceback(harness):
    result = tasks.boom.enqueue("kaput")
    with received(task_finished) as finished:
        run_until_idle()
    stored = tasks.boom.get_result(result.id)
    assert stored.status == TaskResultStatus.FAILED and stored.attempts == 1
    [error] = stored.errors
    assert error.exception_class_path == "builtins.ValueError"
    assert error.exception_class is ValueError
    assert "kaput" in error.traceback and "Traceback" in error.traceback
    with pytest.raises(ValueError, match="Task failed"):
        stored.return_value  # noqa: B018 - Django's property raises
    assert [r.status for _, r in finished] == [TaskResultStatus.FAILED]
    assert row_of(harness, result).state == "dead"


def test_options_retry_runs_it_again_and_each_failed_attempt_is_an_error(harness):
    result = tasks.flaky.enqueue(failures=1)
    with received(task_finished) as finished:
        run_until_idle()
    first = tasks.flaky.get_result(result.id)
    assert first.status == TaskResultStatus.READY and len(first.errors) == 1
    assert first.errors[0].exception_class_path == "builtins.ConnectionError"
    assert [r.status for _, r in finished] == [TaskResultStatus.READY]
    harness.advance(1)
    run_until_idle()
    done = tasks.flaky.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value == {"attempt": 2}
    assert done.attempts == 2 and len(done.errors) == 1


def test_a_terminal_error_is_not_retried_even_with_retries_on(harness):
    result = tasks.declined.enqueue()
    run_until_idle()
    stored = tasks.declined.get_result(result.id)
    assert stored.status == TaskResultStatus.FAILED and stored.attempts == 1
    assert stored.errors[0].exception_class_path == "django_xjobs.errors.TerminalError"
    assert row_of(harness, result).stop_reason == "terminal"


def test_options_timeout_fails_a_task_that_runs_past_it(live_harness):
    """A body with a timeout runs on a thread of its own, with its own connection: the rows
    are committed here (live_harness) as they are in production."""
    tasks.RELEASE.clear()
    result = tasks.held.enqueue()
    try:
        [execution] = run_until_idle()
    finally:
        tasks.RELEASE.set()  # the body was left running in its thread: let it end
    assert execution.outcome == "dead_lettered" and execution.stop_reason == "timeout"
    stored = tasks.held.get_result(result.id)
    assert stored.status == TaskResultStatus.FAILED
    assert stored.errors[0].exception_class_path == "django_xjobs.errors.JobTimeoutError"


def _dies_with_its_worker(harness) -> None:
    """One claim whose worker is never heard from again: its lease lapses."""
    harness.driver.runs().claim(queues=["default"], limit=1, visibility_timeout=5, worker_id="gone")
    harness.advance(5)


def test_a_task_whose_worker_died_runs_again_though_it_has_no_retries(harness):
    """Django's "no retries" is about what the task raises: a run that died with its worker
    (SIGKILL, OOM) is run again, where a @job with attempts=1 is dead-lettered (SPEC T4)."""
    result = tasks.add.enqueue(1, 1)
    _dies_with_its_worker(harness)
    [execution] = run_until_idle(worker_id="w-3")
    assert execution.outcome == "completed"
    stored = tasks.add.get_result(result.id)
    assert stored.status == TaskResultStatus.SUCCESSFUL and stored.return_value == 2
    assert stored.attempts == 2 and stored.worker_ids == ["w-3", "w-3"]
    assert stored.errors[0].exception_class_path == "django_xjobs.errors.LeaseLostError"


def test_lease_17_a_task_whose_runs_keep_dying_is_still_stopped_by_the_crash_bound(harness):
    """Its runs died alone, in the child isolating them, ``MAX_LEASE_EXPIRIES`` times: the
    claim after dead-letters it, though the task has no attempt budget to run out of."""
    from django_xjobs.drivers.contract import RetryAt

    result = tasks.add.enqueue(2, 2)
    for _ in range(conf.get().max_lease_expiries):
        [held] = harness.driver.runs().claim(
            queues=["default"], limit=1, visibility_timeout=5, worker_id="isolating"
        )
        assert harness.driver.runs().retry(RetryAt(held.id, held.lease_token, crashed=True))
    [execution] = run_until_idle()
    assert execution.outcome == "dead_lettered"
    stored = tasks.add.get_result(result.id)
    assert stored.status == TaskResultStatus.FAILED
    assert stored.errors[-1].exception_class_path == "django_xjobs.errors.JobCrashedError"


def test_a_job_with_one_attempt_whose_worker_died_is_dead_lettered_not_rerun(harness):
    job_id = jobs.no_dead_letter.enqueue(n=5).id  # Retry(attempts=1, dead_letter=False)
    _dies_with_its_worker(harness)
    [execution] = run_until_idle()
    assert execution.outcome == "failed"
    row = harness.row(job_id)
    assert (row.state, row.stop_reason) == ("failed", "attempts-exhausted")
    assert row.last_error.startswith("X_JOB_CRASHED")


def test_a_cancelled_task_reads_as_failed_with_the_reason(harness):
    result = tasks.add.enqueue(1, 1)
    cancel_job(result.id, reason="not needed")
    stored = tasks.add.get_result(result.id)
    assert stored.status == TaskResultStatus.FAILED
    [error] = stored.errors
    assert error.exception_class_path == "django_xjobs.errors.JobCancelledError"
    assert "not needed" in error.traceback


# --- get_result --------------------------------------------------------------------------------


def test_get_result_refuses_what_is_not_a_task_result_of_this_backend(harness):
    backend = tasks.add.get_backend()
    for bad in ("nope", "", str(uuid4())):
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(bad)
    plain = jobs.ok.enqueue(n=1)
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(str(plain.id))
    other = tasks.flaky.enqueue(failures=0)  # stored by the "retrying" alias
    with pytest.raises(TaskResultDoesNotExist, match="in backend 'default'"):
        backend.get_result(other.id)
    assert tasks.flaky.get_result(other.id).id == other.id
    with pytest.raises(TaskResultMismatch):  # Django's own check, on what this backend read
        tasks.declined.get_result(other.id)


def test_async_enqueue_and_get_result(harness):
    result = async_to_sync(tasks.add.aenqueue)(4, 4)
    run_until_idle()
    stored = async_to_sync(tasks.add.aget_result)(result.id)
    assert stored.return_value == 8


def test_workers_watch_the_queues_the_backends_accept():
    with override_settings(TASKS={"default": {**TASKS["default"], "QUEUES": ["mail"]}}):
        assert "mail" in registry.known_queues()
    assert registry.get_job("tests.tasks.add").name == "tests.tasks.add"
    assert registry.get_job("tests.tasks.nowhere") is None
    assert registry.get_job("tests.tasks._not_a_task") is None


# --- the caller's transaction ------------------------------------------------------------------


@pytest.fixture
def outbox_on(transactional_db):
    with override_settings(XJOBS={"QUEUES": ["other"], "OUTBOX": "auto"}):
        yield


def test_inside_atomic_a_rollback_leaves_no_task_ever(outbox_on):
    with pytest.raises(RuntimeError), transaction.atomic():
        result = tasks.add.enqueue(1, 2)
        raise RuntimeError("the order could not be saved")
    assert not Job.objects.exists() and not OutboxEntry.objects.exists()
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result.id)


def test_inside_atomic_the_result_id_is_the_jobs_and_answers_after_commit(outbox_on):
    with transaction.atomic():
        result = tasks.record.enqueue("t-1")
        with pytest.raises(TaskResultDoesNotExist):  # staged: no job until the commit
            tasks.record.get_result(result.id)
    assert str(Job.objects.get().id) == result.id
    assert tasks.record.get_result(result.id).status == TaskResultStatus.READY
    run_until_idle()
    assert tasks.record.get_result(result.id).return_value == "t-1"
    assert Ledger.objects.filter(token="t-1").count() == 1


# --- configuration -----------------------------------------------------------------------------


def _backend_check(params) -> list[checks.CheckMessage]:
    return XJobsBackend(
        "probe", {"BACKEND": "django_xjobs.backends.XJobsBackend", **params}
    ).check()


def test_check_reports_bad_options_and_enqueue_raises_them():
    [error] = _backend_check({"OPTIONS": {"RETRY": {"attempts": 0}}})
    assert error.id == "django_xjobs.E010" and "RETRY" in error.msg
    [error] = _backend_check({"OPTIONS": {"VISIBILITY_TIMEOUT": 60}})
    assert "VISIBILITY_TIMEOUT" in error.msg and 'XJOBS["VISIBILITY_TIMEOUT"]' in error.hint
    [error] = _backend_check({"OPTIONS": {"TIMEOUT": "-1s"}})
    assert error.id == "django_xjobs.E010"
    [error] = _backend_check({"QUEUES": ["ok", "not ok"]})
    assert error.id == "django_xjobs.E011"
    [warning] = _backend_check({"QUEUES": []})
    assert warning.id == "django_xjobs.W010"
    assert _backend_check({"OPTIONS": {"RETRY": {"attempts": 2}, "TIMEOUT": "5m"}}) == []
    broken = {"default": {**TASKS["default"], "OPTIONS": {"RETRY": "often"}}}
    with override_settings(TASKS=broken), pytest.raises(ConfigInvalidError, match="RETRY"):
        tasks.add.enqueue(1, 1)


def test_manage_py_check_runs_the_backend_check():
    broken = {"default": {**TASKS["default"], "OPTIONS": {"NOPE": 1}}}
    with override_settings(TASKS=broken):
        found = checks.run_checks()
    assert any(m.id == "django_xjobs.E010" and "NOPE" in m.msg for m in found)


# --- a real worker process ---------------------------------------------------------------------


@pytest.mark.process
def test_a_worker_process_finds_tasks_by_module_path_and_runs_them(workers):
    """The worker imports only the apps' jobs.py: it finds each task by the row's name."""
    token = f"task-{uuid4()}"
    ok, failing = tasks.record.enqueue(token), tasks.boom.enqueue("kaput")
    backend = tasks.record.get_backend()
    worker = workers()  # no --queues: the queues TASKS accepts are watched by default
    wait_for(
        lambda: all(backend.get_result(r.id).is_finished for r in (ok, failing)),
        what="both tasks to finish",
    )
    worker.send(signal.SIGTERM)
    code, _, err = worker.finish()
    assert code == 0, err
    stored = tasks.record.get_result(ok.id)
    assert stored.status == TaskResultStatus.SUCCESSFUL and stored.return_value == token
    [entry] = Ledger.objects.filter(token=token)
    assert entry.pid == worker.proc.pid
    [worker_id] = stored.worker_ids
    assert worker_id.startswith("worker-") and worker_id in err  # the id it logged
    failed = tasks.boom.get_result(failing.id)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.errors[0].exception_class_path == "builtins.ValueError"


@pytest.mark.process
def test_tasks_enqueued_by_a_view_in_atomic_run_once_across_a_killed_worker(workers, client):
    """Issue 14: 500 tasks staged by one web request's transaction, two worker processes, one
    SIGKILLed midway. The ledger the tasks write judges: none lost, none stuck, none run twice
    except a run the killed worker finished but could not acknowledge."""
    prefix = f"view-{uuid4()}"
    args = ("--concurrency", "4", "--poll-interval", "100ms")
    # the victim's short leases hand its runs back soon after the kill; the survivor's long
    # ones never lapse while it runs them, however slow a loaded machine makes its heartbeat
    # (a lapsed lease is taken again by design, and the ledger would count a second run)
    name = f"victim-{uuid4().hex[:8]}"  # its backends, in pg_stat_activity
    victim = workers(*args, "--visibility-timeout", "2s", env={**worker_env(), "PGAPPNAME": name})
    survivor = workers(*args, "--visibility-timeout", "30s")
    with override_settings(XJOBS={"QUEUES": ["other"], "OUTBOX": "auto"}):
        response = client.post("/tasks/enqueue/", {"prefix": prefix, "n": 500})
    assert response.status_code == 200
    ids = response.json()["ids"]
    tokens = [f"{prefix}-{i}" for i in range(500)]
    assert len(set(ids)) == 500 and Job.objects.filter(id__in=ids).count() == 500

    def victim_mid_run() -> bool:
        rows = Ledger.objects.filter(token__startswith=prefix, pid=victim.proc.pid)
        phases = list(rows.values_list("token", "phase"))
        done = {t for t, p in phases if p == "done"}
        return len(done) >= 20 and bool({t for t, p in phases if p == "start"} - done)

    def stopped_mid_run() -> bool:
        # Frozen first, then judged: a run seen in flight before the signal could finish in
        # the gap (a CI run's victim had ended all it started by the time SIGKILL landed). And
        # judged once its statements have ended: a "done" it sent before it froze commits
        # after, and a CI run judged that run in flight when it was not.
        if not victim_mid_run():
            return False
        victim.send(signal.SIGSTOP)
        wait_for(lambda: sessions_of(name)[1] == 0, timeout=30, what="its statements to end")
        assert sessions_of(name)[0], "the victim's sessions are not named: nothing was awaited"
        if victim_mid_run():
            return True
        victim.send(signal.SIGCONT)
        return False

    wait_for(stopped_mid_run, what="the victim stopped mid-run, 20 tasks in")
    victim.send(signal.SIGKILL)
    victim.proc.wait(timeout=30)
    backend = tasks.ledgered.get_backend()
    wait_for(
        lambda: not Job.objects.filter(id__in=ids, state__in=LIVE).exists(),
        timeout=90,
        what="every task to settle",
    )
    survivor.send(signal.SIGTERM)
    code, _, err = survivor.finish(timeout=60)
    assert code == 0, err

    results = [backend.get_result(i) for i in ids]
    assert {r.status for r in results} == {TaskResultStatus.SUCCESSFUL}
    assert sorted(r.return_value for r in results) == sorted(tokens)
    rows = list(
        Ledger.objects.filter(token__startswith=prefix).values_list("token", "phase", "pid")
    )
    started_by_victim = {t for t, p, pid in rows if p == "start" and pid == victim.proc.pid}
    done_by_victim = {t for t, p, pid in rows if p == "done" and pid == victim.proc.pid}
    assert started_by_victim - done_by_victim, "the victim was killed with no task in flight"
    done = Counter(t for t, p, _ in rows if p == "done")
    assert set(done) == set(tokens)  # none lost
    twice = {t for t, n in done.items() if n > 1}
    assert twice <= done_by_victim, (
        f"run twice while the first run was alive: {twice - done_by_victim}"
    )


def test_check_says_when_the_task_api_is_missing_or_its_backport_app_is_not_installed(monkeypatch):
    from django_xjobs.management import checks as xjobs_checks

    monkeypatch.setattr(registry, "tasks_api", lambda: None)
    [error] = xjobs_checks._check_tasks_api()
    assert error.id == "django_xjobs.E014" and "django-tasks>=0.12" in error.hint
    assert registry.get_job("tests.tasks.add") is None  # TASKS is ignored, as Django 5.2 does
    monkeypatch.setattr(registry, "tasks_api", lambda: "django_tasks")
    apps = [a for a in settings.INSTALLED_APPS if a != "django_tasks"]
    with override_settings(INSTALLED_APPS=apps):
        [warning] = xjobs_checks._check_tasks_api()
    assert warning.id == "django_xjobs.W011"


def test_task_finished_is_wired_when_a_task_is_first_seen_not_at_import():
    """A receiver on job_finished makes every settle send the signal and look the job's handle
    up; a project with no task must not pay that, so the tasks backend connects its receiver
    when it first builds a task's handle (W2's Python time, issue 27)."""
    import subprocess
    import sys

    from django_xjobs.backends.tasks import TaskJob, TaskOptions, _finished
    from django_xjobs.run import signals

    fresh = (
        subprocess.run(  # a process that set Django up (the backend is imported) but ran no task
            [
                sys.executable,
                "-c",
                "import django; django.setup(); import django_xjobs.backends.tasks; "
                "from django_xjobs.run import signals; print(len(signals.job_finished.receivers))",
            ],
            capture_output=True,
            text=True,
            env={
                **__import__("os").environ,
                "DJANGO_SETTINGS_MODULE": "bench.settings",
                "DATABASE_URL": "postgres://nobody:x@127.0.0.1:9/never",
            },
            timeout=60,
        )
    )
    assert fresh.stdout.strip() == "0", fresh.stderr
    uid = "django_xjobs.backends.tasks.task_finished"
    signals.job_finished.disconnect(dispatch_uid=uid)
    try:
        TaskJob(tasks.add, TaskOptions())
        TaskJob(tasks.add, TaskOptions())  # a second handle: still one receiver
        assert len(signals.job_finished.receivers) == 1
    finally:
        signals.job_finished.connect(_finished, dispatch_uid=uid)
