"""The ``django.tasks`` backend: Django's own task API, run by django-xjobs workers.

::

    TASKS = {
        "default": {
            "BACKEND": "django_xjobs.backends.XJobsBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"RETRY": {"attempts": 5, "delay": "2s"}, "TIMEOUT": "10m"},
        }
    }

Every flag is on: ``run_after``, async tasks, results from any process, priority. An enqueue is
an ordinary ``x_jobs`` row, so workers, retries, leases, the admin, the CLI and the metrics all
apply. Inside ``transaction.atomic()`` it is staged in the caller's transaction like any
enqueue: rolled back, the task never existed, so no ``on_commit`` wrapper is needed. On Django
5.2 it runs through the ``django-tasks`` backport (``pip install 'django-tasks>=0.12'``, the ``tasks`` extra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.core import checks

from .. import conf
from ..drivers import get_driver
from ..errors import XJobsError
from ..text import did_you_mean
from . import tasks as djtasks
from .tasks import (
    BaseTaskBackend,
    InvalidTask,
    TaskInvalidError,
    TaskQueueUnknownError,
    TaskResultNotFoundError,
)

__all__ = ["XJobsBackend"]


class XJobsBackend(BaseTaskBackend):
    """Runs ``django.tasks`` tasks as django-xjobs jobs (see the module docstring)::

        from django.tasks import task

        @task(queue_name="emails")
        def send_receipt(order_id: int): ...

        result = send_receipt.enqueue(order_id=7)  # an x_jobs row; a worker runs it
        result.refresh()

    Tasks keep Django's API; the options in ``TASKS`` set their retries and timeout.
    """

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: Mapping[str, object]) -> None:
        super().__init__(alias, params)
        # A bad OPTIONS must not break the import of every module that declares a task (the
        # backend is built there): it is reported by `manage.py check`, and raised on enqueue.
        self.config_error: XJobsError | None = None
        try:
            self.task_options = djtasks.parse_options(self.options, alias)
        except XJobsError as error:
            self.config_error = error
            self.task_options = djtasks.TaskOptions()

    # --- validate and enqueue ---------------------------------------------------------------

    def validate_task(self, task: Any) -> None:
        """Django's rules, plus: a ``run_after`` may be a ``timedelta`` (from now, at enqueue),
        and a queue name must be one django-xjobs can store. Each refusal is Django's
        ``InvalidTask`` and an ``XJobsError`` (``TaskInvalidError``, ``TaskQueueUnknownError``)."""
        if self.queues and task.queue_name not in self.queues:
            # Django's exact words (its tests and code written against them match the text);
            # the hint names the alias and what it accepts
            raise TaskQueueUnknownError(
                f"Queue '{task.queue_name}' is not valid for backend.",
                hint=" ".join(
                    filter(
                        None,
                        [
                            did_you_mean(task.queue_name, self.queues),
                            f'TASKS["{self.alias}"]["QUEUES"] lists '
                            f"{', '.join(sorted(map(str, self.queues)))}",
                        ],
                    )
                ),
            )
        if isinstance(task.run_after, timedelta):
            if task.run_after < timedelta(0):
                raise TaskInvalidError("run_after must not be a negative timedelta.")
            replace(task, run_after=None)  # Django's checks on everything else
            return
        try:
            super().validate_task(task)
        except InvalidTask as error:
            if isinstance(error, XJobsError):
                raise
            raise TaskInvalidError(str(error)) from None
        if not conf.QUEUE_NAME.match(task.queue_name):
            raise TaskInvalidError(
                f"Queue {task.queue_name!r} is not a valid queue name: 1 to 64 letters, digits "
                "and _.:- starting with a letter or digit."
            )

    def enqueue(self, task: object, args: Sequence[object], kwargs: Mapping[str, object]) -> Any:
        """Store one run of ``task`` as a job; staged in the caller's transaction inside
        ``atomic()``. Arguments that JSON cannot hold are refused here, nothing stored."""
        self.validate_task(task)
        if self.config_error is not None:
            raise self.config_error
        if not djtasks.resolves(task):
            raise TaskInvalidError(djtasks.unresolved_message(task), hint=djtasks.UNRESOLVED_HINT)
        djtasks.remember(task, self.task_options)
        request = djtasks.build_request(task, args, kwargs, self.alias, self.task_options)
        from ..run.enqueue import submit

        submit(request, outbox=None, on_conflict="dedupe")
        result = djtasks.enqueued_result(task, request)
        djtasks.task_enqueued.send(type(self), task_result=result)
        return result

    # --- results ----------------------------------------------------------------------------

    def get_result(self, result_id: str) -> Any:
        """The task's result as stored now. An id that names no task of this backend (unknown,
        malformed, another backend's, a plain job's, or staged in a transaction that has not
        committed) raises ``TaskResultDoesNotExist`` (``TaskResultNotFoundError``)."""
        try:
            job_id = UUID(str(result_id))
        except ValueError:
            raise TaskResultNotFoundError(f"{result_id!r} is not a task result id") from None
        row = get_driver().reads().get_job(job_id)
        if row is None or not djtasks.is_task_row(row) or row.input["backend"] != self.alias:
            raise TaskResultNotFoundError(f"no task result {result_id} in backend {self.alias!r}")
        handle = djtasks.task_job(row.name)
        if handle is None:
            raise TaskResultNotFoundError(
                f"task result {result_id} belongs to {row.name!r}, which cannot be imported here"
            )
        return djtasks.task_result(row, handle.task_for(row))

    # --- checks -----------------------------------------------------------------------------

    def check(self, **kwargs: object) -> list[checks.CheckMessage]:
        found: list[checks.CheckMessage] = []
        where = f'TASKS["{self.alias}"]'
        if self.config_error is not None:
            found.append(
                checks.Error(
                    self.config_error.message,
                    hint=self.config_error.hint,
                    id="django_xjobs.E010",
                )
            )
        for queue in sorted(self.queues):
            if not isinstance(queue, str) or not conf.QUEUE_NAME.match(queue):
                found.append(
                    checks.Error(
                        f"{where}['QUEUES'] lists {queue!r}, which is not a queue name",
                        hint="1 to 64 letters, digits and _.:- starting with a letter or digit",
                        id="django_xjobs.E011",
                    )
                )
        if not self.queues:
            found.append(
                checks.Warning(
                    f"{where}['QUEUES'] is empty, so tasks may name any queue, and workers "
                    "watch only the queues they are told about",
                    hint='list the queues in QUEUES, or in XJOBS["QUEUES"] / xjobs_worker --queues',
                    id="django_xjobs.W010",
                )
            )
        if "django_xjobs" not in {a.split(".")[0] for a in settings.INSTALLED_APPS}:
            found.append(
                checks.Error(
                    f"{where} uses XJobsBackend, but django_xjobs is not in INSTALLED_APPS",
                    hint='add "django_xjobs" to INSTALLED_APPS and run migrate',
                    id="django_xjobs.E012",
                )
            )
        return found
