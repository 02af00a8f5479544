"""``@cron`` above a ``django.tasks`` task (issue 14): each occurrence enqueues the task through
``XJobsBackend``, exactly once, with the occurrence as its argument."""

from __future__ import annotations

from collections.abc import Iterator
from uuid import UUID

import pytest
from django.core import checks
from django.test import override_settings

from django_xjobs import cron
from django_xjobs.backends.tasks import TASKS_MODULE, Task, TaskResultStatus, task, task_enqueued
from django_xjobs.declarations.cron import registered_crons, unregister
from django_xjobs.errors import JobDefinitionError
from django_xjobs.testing import run_until_idle
from tests import tasks
from tests.scheduler.test_role import START, Bench, _bench, epoch_ms, utc

TASKS = {
    "default": {"BACKEND": "django_xjobs.backends.XJobsBackend"},
    "elsewhere": {"BACKEND": f"{TASKS_MODULE}.backends.immediate.ImmediateBackend"},
}


@pytest.fixture(params=["memory", "postgres"])
def bench(request, db) -> Iterator[Bench]:
    yield from _bench(request.param)


def test_the_decorator_returns_the_task_and_registers_the_cron():
    assert isinstance(tasks.nightly, Task)  # still enqueued and found by its module path
    [handle] = [c for c in registered_crons() if c.name == "tests.nightly_task"]
    assert handle.task is tasks.nightly
    assert handle.describe()["jobs"] == ["tests.tasks.nightly"]


def test_each_occurrence_enqueues_the_task_once_across_two_schedulers(bench):
    seen: list = []

    def enqueued(sender, task_result, **kwargs):
        seen.append(task_result)

    task_enqueued.connect(enqueued, weak=False)
    try:
        first = bench.scheduler("tests.nightly_task", holder="first")
        second = bench.scheduler("tests.nightly_task", holder="second")
        bench.at(START)
        first.tick()  # the first round marks where the schedule starts
        second.tick()
        bench.at(utc(2026, 7, 26, 3, 0, 1))
        [dispatch] = first.tick() + second.tick()  # one leads; the occurrence fires once
        assert first.tick() + second.tick() == []
        bench.set_lease_left(0)  # the leader stalls; the other takes over and fires nothing again
        assert second.tick() + first.tick() == []
    finally:
        task_enqueued.disconnect(enqueued)
    occurrence = utc(2026, 7, 26, 3)
    assert dispatch.jobs == ("tests.tasks.nightly",)
    [row] = bench.rows("tests.tasks.nightly")
    assert row.input == {
        "args": [],
        "kwargs": {"occurrence": occurrence.isoformat()},
        "backend": "default",
    }
    assert row.idempotency_key == f"tests.nightly_task:{epoch_ms(occurrence)}:tests.tasks.nightly"
    [result] = seen
    assert result.id == str(row.id) and result.status == TaskResultStatus.READY
    run_until_idle(clock=bench.clock)
    stored = tasks.nightly.get_result(str(row.id))
    assert stored.return_value == {"occurrence": occurrence.isoformat()}
    assert bench.driver.reads().get_job(UUID(result.id)).state == "done"


def _report(occurrence=None):
    return occurrence


def _needs(day, occurrence=None):
    return day


def test_a_cron_above_a_task_of_another_backend_is_refused():
    with override_settings(TASKS=TASKS):
        elsewhere = task(backend="elsewhere")(_report)
        with pytest.raises(JobDefinitionError, match=r"X_CRON_INVALID.*not django_xjobs"):
            cron("0 3 * * *", tz="UTC", name="tests.elsewhere")(elsewhere)
    assert "tests.elsewhere" not in {c.name for c in registered_crons()}


def test_a_cron_above_a_task_with_an_argument_it_cannot_fill_is_refused():
    with override_settings(TASKS=TASKS), pytest.raises(JobDefinitionError, match="day"):
        cron("0 3 * * *", tz="UTC", name="tests.needs")(task(_needs))


def test_check_reports_a_cron_task_its_module_path_does_not_find():
    with override_settings(TASKS=TASKS):
        cron("0 3 * * *", tz="UTC", name="tests.lost")(task(_report))
        try:
            found = checks.run_checks()
        finally:
            unregister("tests.lost")
    [error] = [m for m in found if m.id == "django_xjobs.E013"]
    assert "tests.lost" in error.msg and "_report" in error.msg
