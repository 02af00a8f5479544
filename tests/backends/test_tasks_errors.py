"""On Django's task API, an error is Django's class and ours (issue 23): code written against
Django's docs catches ``TypeError``, ``InvalidTask``, ``TaskResultDoesNotExist``..., and each
error ``XJobsBackend`` raises is an instance of the class Django's reference backend
(``DummyBackend``) raises for the same mistake, and an ``XJobsError`` with a code and a hint.

Each mistake is made against both backends (the mistakes were read from ``django.tasks`` on
Django 6 and the ``django_tasks`` backport: ``normalize_json``, ``BaseTaskBackend.validate_task``,
``DummyBackend.get_result``, ``Task.get_result``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import uuid4

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_xjobs.backends import XJobsBackend
from django_xjobs.backends.tasks import (
    TASKS_MODULE,
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    task,
)
from django_xjobs.errors import XJobsError
from tests import tasks

QUEUES = ["default", "other"]
TASKS = {
    "default": {"BACKEND": "django_xjobs.backends.XJobsBackend", "QUEUES": QUEUES},
    "xjobs": {"BACKEND": "django_xjobs.backends.XJobsBackend", "QUEUES": QUEUES},
    "reference": {"BACKEND": f"{TASKS_MODULE}.backends.dummy.DummyBackend", "QUEUES": QUEUES},
}


def _nested(alias: str) -> None:
    def inner() -> None:  # pragma: no cover - refused before it could run
        return None

    task(backend=alias)(inner)


def _async_enqueue(alias: str) -> None:
    async_to_sync(tasks.add.using(backend=alias).aenqueue)(object(), 1)


def _mismatch(alias: str) -> None:
    result = tasks.add.using(backend=alias).enqueue(1, 2)
    tasks.pair.using(backend=alias).get_result(result.id)


#: each mistake, and the class Django raises for it
MISTAKES: dict[str, tuple[Callable[[str], Any], type[BaseException]]] = {
    "an argument of a type JSON cannot hold": (
        lambda a: tasks.add.using(backend=a).enqueue(object(), 1),
        TypeError,
    ),
    "a set argument": (lambda a: tasks.add.using(backend=a).enqueue({1, 2}, 1), TypeError),
    "a keyword argument JSON cannot hold": (
        lambda a: tasks.add.using(backend=a).enqueue(1, b=object()),
        TypeError,
    ),
    "bytes that are not UTF-8": (
        lambda a: tasks.add.using(backend=a).enqueue(b"\xff", 1),
        ValueError,
    ),
    "aenqueue with an argument JSON cannot hold": (_async_enqueue, TypeError),
    "a priority above the range": (
        lambda a: tasks.add.using(priority=101, backend=a),
        InvalidTask,
    ),
    "a priority below the range": (
        lambda a: tasks.add.using(priority=-101, backend=a),
        InvalidTask,
    ),
    "a priority that is not whole": (
        lambda a: tasks.add.using(priority=1.5, backend=a),
        InvalidTask,
    ),
    "a queue the backend does not list": (
        lambda a: tasks.add.using(queue_name="nowhere", backend=a),
        InvalidTask,
    ),
    "a naive run_after": (
        lambda a: tasks.add.using(run_after=datetime(2030, 1, 1), backend=a),
        InvalidTask,
    ),
    "takes_context without a context parameter": (
        lambda a: task(backend=a, takes_context=True)(tasks.add.func),
        InvalidTask,
    ),
    "a function not at module level": (_nested, InvalidTask),
    "get_result of a malformed id": (
        lambda a: tasks.add.using(backend=a).get_result("not-an-id"),
        TaskResultDoesNotExist,
    ),
    "get_result of an unknown id": (
        lambda a: tasks.add.using(backend=a).get_result(str(uuid4())),
        TaskResultDoesNotExist,
    ),
    "backend.get_result of an unknown id": (
        lambda a: tasks.add.using(backend=a).get_backend().get_result(str(uuid4())),
        TaskResultDoesNotExist,
    ),
}


@pytest.fixture
def both(db):
    with override_settings(TASKS=TASKS):
        yield


@pytest.mark.parametrize("backend", ["xjobs", "reference"])
@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_a_mistake_raises_djangos_class_on_both_backends(both, mistake, backend):
    make, django_class = MISTAKES[mistake]
    with pytest.raises(BaseException) as caught:
        make(backend)
    error = caught.value
    assert isinstance(error, django_class), f"{type(error).__mro__} for {mistake}"
    if backend == "xjobs":  # and ours: a code, a hint, one line
        assert isinstance(error, XJobsError), type(error).__mro__
        assert error.code.startswith("X_") and "\n" not in str(error)


@pytest.mark.parametrize("backend", ["xjobs", "reference"])
def test_get_result_through_another_task_is_djangos_mismatch_on_both(both, backend):
    """Raised by Django's own ``Task.get_result``, so the class is Django's on every backend."""
    with pytest.raises(TaskResultMismatch):
        _mismatch(backend)


def test_a_task_its_module_path_does_not_find_is_invalid_and_ours(both):
    """A rule of ours alone (a worker imports the task by its path): still ``InvalidTask``."""
    misnamed = tasks.misnamed.using(backend="xjobs")
    with pytest.raises(InvalidTask) as caught:
        misnamed.enqueue()
    assert isinstance(caught.value, XJobsError) and caught.value.hint


def test_a_value_jsonb_cannot_hold_is_a_value_error_and_ours(both):
    """NaN and NUL pass Django's normalisation and not PostgreSQL's jsonb: a ValueError."""
    for value in (float("nan"), "a\x00b"):
        with pytest.raises(ValueError) as caught:
            tasks.add.using(backend="xjobs").enqueue(value, 1)
        assert isinstance(caught.value, XJobsError) and caught.value.code == "X_INPUT_INVALID"


def test_a_bad_options_on_enqueue_is_improperly_configured_and_ours(db):
    """Django's class for a bad ``TASKS`` entry is ``InvalidTaskBackend``, an
    ``ImproperlyConfigured``; a bad ``OPTIONS`` is one, raised on every enqueue."""
    broken = {"default": {**TASKS["default"], "OPTIONS": {"RETRY": "often"}}}
    with override_settings(TASKS=broken), pytest.raises(ImproperlyConfigured) as caught:
        tasks.add.enqueue(1, 1)
    assert isinstance(caught.value, XJobsError) and caught.value.code == "X_CONFIG_INVALID"
    backend = XJobsBackend("probe", {"OPTIONS": {"NOPE": 1}})
    assert isinstance(backend.config_error, ImproperlyConfigured)


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (
            lambda: tasks.add.enqueue(datetime(2030, 1, 1), 1),
            "argument 'a' (positional 1) is a datetime",
        ),
        (lambda: tasks.add.enqueue(1, b={1, 2}), "argument 'b' is a set"),
        (lambda: tasks.add.enqueue(1, b"\xff"), "argument 'b' (positional 2) is a bytes"),
        (lambda: tasks.add.enqueue(float("nan"), 1), "argument 'a' (positional 1): nan"),
        (lambda: tasks.add.enqueue(1, b={"x": ["a\x00"]}), "argument 'b'.x[0]: contains a NUL"),
        (lambda: tasks.with_context.enqueue(object()), "argument 'label' (positional 1)"),
        (lambda: tasks.add.enqueue(1, 2, object()), "argument 3 (positional)"),
    ],
)
def test_an_argument_json_cannot_hold_is_named(both, call, named):
    """Issue 42: "an argument JSON cannot hold" said neither which argument nor its type; a call
    of several arguments names the one refused (Django's "Unsupported type" kept in the text)."""
    with pytest.raises(XJobsError) as caught:
        call()
    assert named in str(caught.value), str(caught.value)
    assert "\n" not in str(caught.value)
    if isinstance(caught.value, TypeError):
        assert "Unsupported type" in str(caught.value)
