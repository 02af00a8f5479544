"""The glue between Django's task tests and ``XJobsBackend``: which backend a test's ``TASKS``
names, and how a task is made to run. Nothing else of the tests is changed.

- ``QueuedBackend`` stands where the tests name Django's ``DummyBackend``: ``XJobsBackend``
  (an enqueue stores a row; nothing runs it), with the dummy's ``results`` and ``clear()``
  read from and done to the rows.
- ``RunAtOnceBackend`` stands where they name ``ImmediateBackend``, which runs a task inside
  ``enqueue()``: here the enqueue stores the row, a worker runs what is due
  (``run_until_idle``, the same claim, execute and settle as ``xjobs_worker``), and the result
  returned is the row as stored (``get_result``).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django_xjobs.backends import XJobsBackend
from django_xjobs.testing import run_until_idle


class QueuedBackend(XJobsBackend):
    """``DummyBackend``'s two test helpers, read from the rows: ``results`` (what was enqueued
    through this alias, oldest first) and ``clear()`` (forget it)."""

    @property
    def results(self) -> list[Any]:
        def read() -> list[Any]:
            ids = list(_rows(self.alias).values_list("id", flat=True))
            return [self.get_result(str(pk)) for pk in ids]

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return read()
        # an async test reads the dummy's list in its event loop: the rows are read on a thread
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(read).result()

    def clear(self) -> None:
        _rows(self.alias).delete()


def _rows(alias: str) -> Any:
    from django_xjobs.models import Job

    return Job.objects.filter(input__backend=alias).order_by("id")


class RunAtOnceBackend(XJobsBackend):
    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        result = super().enqueue(task, args, kwargs)
        run_until_idle()
        return self.get_result(result.id)
