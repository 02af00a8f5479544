"""The ``registry.TaskResolver`` the app registers when ``django.tasks`` is installed: how the
registry, the worker and ``@cron`` reach the task API without importing it themselves."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from . import crons, options, tasks


class Resolver:
    """The backend's answers to what the registry asks (``registry.TaskResolver``)."""

    def task_job(self, name: str) -> Any:
        return tasks.task_job(name)

    def task_queues(self) -> set[str]:
        return options.task_queues()

    def as_task(self, handler: object) -> Any:
        return crons.as_task(handler)

    def cron_entries(self, task: object) -> Callable[[datetime], Any]:
        return crons.cron_entries(task)
