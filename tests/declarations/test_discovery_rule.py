"""One discovery rule, with or without ``TASKS`` (issue 23): a ``@job`` declared outside an
installed app's ``jobs.py`` is parked ``X_JOB_UNKNOWN``, and the hint says where jobs are
discovered from. With ``TASKS`` naming ``XJobsBackend`` a worker imports a row's name as a
``django.tasks`` task's module path (Django's model: a task is found by its module path); that
import must not make a ``@job`` known that discovery did not find. Both drivers."""

from __future__ import annotations

import sys

import pytest
from django.test import override_settings

from django_xjobs.backends import tasks as djtasks
from django_xjobs.declarations import registry
from django_xjobs.drivers.contract import EnqueueRequest
from django_xjobs.worker.worker import Worker
from tests import tasks

STRAY = "tests.undiscovered.stray"
TASKS = {"default": {"BACKEND": "django_xjobs.backends.XJobsBackend", "QUEUES": ["default"]}}


@pytest.fixture(autouse=True)
def _undiscovered():
    """Each case starts with the module never imported, and leaves it so."""
    sys.modules.pop("tests.undiscovered", None)
    djtasks.forget()
    yield
    sys.modules.pop("tests.undiscovered", None)
    registry.unregister(STRAY)
    djtasks.forget()


def _enqueue(driver, name: str) -> object:
    """The row a web process that imported the module would have written."""
    return (
        driver.jobs()
        .enqueue(
            EnqueueRequest(
                name=name,
                queue="default",
                input={"n": 1},
                input_json='{"n": 1}',
                idempotency_key="stray:1",
                max_attempts=3,
            )
        )
        .id
    )


@pytest.mark.parametrize("tasks_setting", [TASKS, {}], ids=["with-TASKS", "without-TASKS"])
def test_a_job_outside_jobs_py_is_unknown_with_or_without_tasks(live_harness, tasks_setting):
    with override_settings(TASKS=tasks_setting):
        job_id = _enqueue(live_harness.driver, STRAY)
        Worker(queues=["default"], driver=live_harness.driver, burst=True).run()
        row = live_harness.driver.reads().get_job(job_id)
        assert registry.get_job(STRAY) is None
    assert row.state == "suspended", row.last_error
    assert "X_JOB_UNKNOWN" in row.last_error
    assert "<installed app>/jobs.py" in row.last_error


def test_a_task_is_still_found_by_its_module_path(live_harness):
    """Django's model for ``@task`` rows is kept: the lookup imports the task's module."""
    result = tasks.add.enqueue(2, 3)
    djtasks.forget()  # as a fresh worker process: nothing looked up yet
    Worker(queues=["default"], driver=live_harness.driver, burst=True).run()
    assert tasks.add.get_result(result.id).return_value == 5


def _told(caplog) -> list:
    return [r for r in caplog.records if getattr(r, "event", "") == "xjobs.job.undiscovered"]


def test_enqueueing_a_job_declared_outside_discovery_warns_once(harness, caplog):
    """Issue 42: the enqueue succeeded in silence and the rows parked on the worker as
    ``X_JOB_UNKNOWN``; the process that enqueues it is told, once per job."""
    import importlib
    import logging

    registry._told_undiscovered.discard(STRAY)
    stray = importlib.import_module("tests.undiscovered").stray
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        stray.enqueue(n=1)
        stray.using(priority=3).enqueue(n=2)
        stray.enqueue_many([{"n": 3}])
    [record] = _told(caplog)
    assert record.fields["job"] == STRAY and record.fields["module"] == "tests.undiscovered"
    assert "jobs.py" in record.fields["hint"] and "X_JOB_UNKNOWN" in record.fields["hint"]


def test_a_discovered_job_enqueues_without_a_word(harness, caplog):
    import logging

    from tests import jobs

    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        jobs.ok.enqueue(n=1)
    assert not jobs.ok.undiscovered and _told(caplog) == []
