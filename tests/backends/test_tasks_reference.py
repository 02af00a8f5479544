"""What Django's own task tests ask of a backend, where ``XJobsBackend`` answered otherwise
(issue 42): measured by running Django 6.1's ``tests/tasks``, the ``django-tasks`` backport's
and ``django-tasks-db``'s tests against the backend (``make tasks-conformance``), and pinned here
so the suite keeps them without downloading anything.

- ``enqueue()`` and ``get_result()`` answer the same ``enqueued_at`` (Django's tests compare
  ``result == get_result(result.id)``), inside ``atomic()`` too, where the row is inserted at the
  commit;
- a failed task's ``task_finished`` is sent inside the handler of what it raised, so Django's log
  line for it carries the traceback;
- a return value JSON cannot hold fails the run with ``TypeError``, as the reference backends
  record it;
- an unknown queue is refused with Django's exact words.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from django.db import transaction
from django.test import override_settings

from django_xjobs.backends import XJobsBackend
from django_xjobs.backends.tasks import TASKS_MODULE, InvalidTask, TaskResultStatus, task
from django_xjobs.declarations import registry
from django_xjobs.testing import run_until_idle
from tests import tasks
from tests.models import Ledger

#: the logger Django's task API logs a finished task on (the backport's is named for its package)
TASKS_LOGGER = TASKS_MODULE

REFERENCE = {
    "default": {"BACKEND": "django_xjobs.backends.XJobsBackend", "QUEUES": ["default", "other"]},
    "reference": {
        "BACKEND": f"{TASKS_MODULE}.backends.dummy.DummyBackend",
        "QUEUES": ["default", "other"],
    },
}


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def task_log() -> Iterator[list[logging.LogRecord]]:
    """The records Django's task API logs, caught on its own logger."""
    handler = _Records()
    logger = logging.getLogger(TASKS_LOGGER)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


# --- enqueued_at ---------------------------------------------------------------------------------


def test_the_result_enqueue_returns_is_the_result_get_result_reads(harness):
    result = tasks.add.enqueue(1, b=2)
    assert tasks.add.get_result(result.id) == result
    assert tasks.add.get_backend().get_result(result.id).enqueued_at == result.enqueued_at


@pytest.mark.django_db(transaction=True)
def test_inside_atomic_enqueued_at_is_the_enqueue_not_the_commit():
    with override_settings(XJOBS={"QUEUES": ["other"], "OUTBOX": "auto"}):
        with transaction.atomic():
            result = tasks.record.enqueue("t-enq")
            Ledger.objects.create(token="the rest of it", phase="run", attempt=1, pid=0)
        stored = tasks.record.get_result(result.id)
        run_until_idle()
        done = tasks.record.get_result(result.id)
    assert stored == result
    assert done.enqueued_at == result.enqueued_at and done.status == TaskResultStatus.SUCCESSFUL
    assert done.started_at >= done.enqueued_at


# --- task_finished, inside the exception's handler ---------------------------------------------


def test_a_failed_tasks_log_line_carries_its_exception(harness, task_log):
    result = tasks.boom.enqueue("kaput")
    run_until_idle()
    [line] = [r for r in task_log if r.levelno == logging.ERROR]
    assert result.id in line.getMessage()
    assert line.exc_info is not None and line.exc_info[0] is ValueError
    assert str(line.exc_info[1]) == "kaput"
    frames = []
    tb = line.exc_info[2]
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert frames[-1] == "boom"  # the task's own frames, where it raised


def test_a_successful_tasks_log_line_carries_no_exception(harness, task_log):
    tasks.add.enqueue(1, 2)
    run_until_idle()
    finished = [r for r in task_log if "SUCCESSFUL" in r.getMessage()]
    assert len(finished) == 1 and not finished[0].exc_info


# --- a return value JSON cannot hold --------------------------------------------------------------


def test_a_return_value_json_cannot_hold_fails_with_djangos_type_error(harness, task_log):
    result = tasks.returns_object.enqueue()
    run_until_idle()
    failed = tasks.returns_object.get_result(result.id)
    assert failed.status == TaskResultStatus.FAILED
    [error] = failed.errors
    assert error.exception_class is TypeError
    assert "Unsupported type" in error.traceback
    [line] = [r for r in task_log if r.levelno == logging.ERROR]
    assert line.exc_info is not None and line.exc_info[0] is TypeError


# --- an unknown queue, in Django's words ---------------------------------------------------------


@pytest.mark.parametrize("queue", ["nowhere", "it's"])
def test_an_unknown_queue_is_refused_in_the_reference_backends_words(db, queue):
    with override_settings(TASKS=REFERENCE):
        with pytest.raises(InvalidTask) as reference:
            tasks.add.using(queue_name=queue, backend="reference")
        with pytest.raises(InvalidTask) as ours:
            tasks.add.using(queue_name=queue, backend="default")
    assert str(reference.value) in str(ours.value)
    assert ours.value.message == str(reference.value)  # type: ignore[attr-defined]
    assert "QUEUES" in ours.value.hint  # type: ignore[attr-defined]


def test_a_declared_task_on_an_unknown_queue_is_refused_in_djangos_words(db):
    with override_settings(TASKS=REFERENCE), pytest.raises(InvalidTask) as caught:
        task(queue_name="queue-2")(tasks.add.func)
    assert "Queue 'queue-2' is not valid for backend." in str(caught.value)


# --- a subclass of the backend -------------------------------------------------------------------


class ProjectBackend(XJobsBackend):
    """A project's backend that adds to XJobsBackend (the conformance glue is two of these)."""


SUBCLASSED = {
    "default": {
        "BACKEND": f"{ProjectBackend.__module__}.{ProjectBackend.__qualname__}",
        "QUEUES": ["default", "other"],
    }
}


def test_a_subclass_of_the_backend_serves_its_alias(harness):
    """An alias whose BACKEND subclasses XJobsBackend is one: its tasks run on the workers
    (a subclass was taken for another backend, and its rows parked as unknown jobs)."""
    with override_settings(TASKS=SUBCLASSED):
        assert registry.task_aliases() == ["default"]
        result = tasks.add.enqueue(2, 5)
        run_until_idle()
        assert tasks.add.get_result(result.id).return_value == 7
    with override_settings(
        TASKS={"default": {"BACKEND": f"{TASKS_MODULE}.backends.dummy.DummyBackend"}}
    ):
        assert registry.task_aliases() == []
