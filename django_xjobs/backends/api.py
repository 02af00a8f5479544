"""The ``django.tasks`` API's names, taken once from whichever is installed: Django 6's own
``django.tasks``, or the ``django-tasks`` backport on Django 5.2. The two are different classes,
so every other module of the backend takes them from here."""

from __future__ import annotations

import importlib
from typing import Any

from ..declarations import registry

#: the backend's import path, as the TASKS setting names it
BACKEND_PATH = registry.TASKS_BACKEND

_api = registry.tasks_api()
if _api == "django.tasks":  # Django 6.0+
    TASKS_MODULE, _JSON, _INVALID = "django.tasks", "django.utils.json", "InvalidTask"
    _BAD_BACKEND = "InvalidTaskBackend"
elif _api == "django_tasks":  # the backport, on Django 5.2
    TASKS_MODULE, _JSON, _INVALID = "django_tasks", "django_tasks.utils", "InvalidTaskError"
    _BAD_BACKEND = "InvalidTaskBackendError"
else:  # pragma: no cover - the import error is the message
    raise ImportError(
        f"{BACKEND_PATH} needs Django 6.0+ (django.tasks) or, on Django 5.2, the django-tasks "
        "backport: pip install 'django-tasks>=0.12' (the project's tasks extra) and add \"django_tasks\" to INSTALLED_APPS",
        name="django_tasks",  # what is missing, for a caller that tells an absent extra apart
    )

# The same names from whichever is installed: the two are different classes, so each is taken
# from the one in use, once, here.
_base = importlib.import_module(f"{TASKS_MODULE}.base")
_exceptions = importlib.import_module(f"{TASKS_MODULE}.exceptions")
_signals = importlib.import_module(f"{TASKS_MODULE}.signals")
Task: Any = _base.Task
TaskContext: Any = _base.TaskContext
TaskError: Any = _base.TaskError
TaskResult: Any = _base.TaskResult
TaskResultStatus: Any = _base.TaskResultStatus
task: Any = _base.task
BaseTaskBackend: Any = importlib.import_module(f"{TASKS_MODULE}.backends.base").BaseTaskBackend
InvalidTask: Any = getattr(_exceptions, _INVALID)
TaskResultDoesNotExist: Any = _exceptions.TaskResultDoesNotExist
TaskResultMismatch: Any = _exceptions.TaskResultMismatch
task_enqueued: Any = _signals.task_enqueued
task_started: Any = _signals.task_started
task_finished: Any = _signals.task_finished
normalize_json: Any = importlib.import_module(_JSON).normalize_json
#: a bad ``TASKS`` entry (an ``ImproperlyConfigured``)
InvalidTaskBackend: Any = getattr(_exceptions, _BAD_BACKEND)
