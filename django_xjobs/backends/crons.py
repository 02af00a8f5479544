"""What ``@cron`` asks of ``django.tasks``: whether a handler is a task, and a cron's entries for
one (each occurrence enqueues the task through its ``XJobsBackend``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..declarations import registry
from ..errors import (
    CronInvalidError,
)
from .api import Task
from .options import TaskOptions
from .tasks import TaskJob


def as_task(handler: object) -> Any:
    """``handler`` when it is a Task of the task API in use, else None."""
    return handler if isinstance(handler, Task) else None


def cron_entries(task: Any) -> Callable[[datetime], Any]:
    """A cron's ``fn`` for ``task``: each occurrence enqueues it, with the occurrence (ISO 8601,
    UTC) as its ``occurrence`` argument when it takes one. Checked now: the task runs through an
    ``XJobsBackend`` (else the exactly-once firing would end at another backend's door), and it
    takes no other argument without a default."""
    import inspect

    if task.backend not in registry.task_aliases():
        raise CronInvalidError(
            f"@cron above task {task.module_path!r}: its backend {task.backend!r} is not "
            "django_xjobs.backends.XJobsBackend, so an occurrence could not be enqueued exactly once",
            hint=f'point TASKS["{task.backend}"] at django_xjobs.backends.XJobsBackend, or use '
            "@task(backend=...) with one that is",
        )
    params = list(inspect.signature(task.func).parameters.values())
    if task.takes_context:
        params = params[1:]
    takes_occurrence = any(p.name == "occurrence" for p in params)
    needed = [
        p.name
        for p in params
        if p.name != "occurrence"
        and p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    if needed:
        raise CronInvalidError(
            f"@cron above task {task.module_path!r}: an occurrence has no value for "
            f"{', '.join(needed)}",
            hint="give those parameters defaults; an `occurrence` parameter gets the occurrence "
            "as ISO 8601 text",
        )
    # The backend's OPTIONS are read when an occurrence is enqueued (TaskJob.build_request), not
    # here: a bad one is then `manage.py check`'s one E010 line and each enqueue's error, as for
    # a task without a cron, instead of an import error that stops every manage.py command.
    job = TaskJob(task, TaskOptions())

    def entries(occurrence: datetime) -> list[tuple[Any, dict[str, Any]]]:
        inputs = {"occurrence": occurrence.isoformat()} if takes_occurrence else {}
        return [(job, inputs)]

    entries.__module__ = task.func.__module__
    entries.__qualname__ = task.func.__qualname__
    entries.__doc__ = task.func.__doc__
    return entries
