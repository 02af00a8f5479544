"""``django.tasks`` tasks the backend tests enqueue (TASKS in tests/settings.py names the
backends). Declared with Django's own decorator: Django 6's, or the backport's on Django 5.2."""

from __future__ import annotations

import os
import threading
import time

from django_xjobs import TerminalError, cron
from django_xjobs.backends.tasks import task

from .models import Ledger


@task
def add(a, b):
    return a + b


@task(priority=10, queue_name="other")
def urgent(label):
    return {"label": label}


@task(takes_context=True)
def with_context(context, label):
    result = context.task_result
    return {
        "label": label,
        "attempt": context.attempt,
        "id": result.id,
        "status": str(result.status),
        "worker_ids": list(result.worker_ids),
        "started": result.started_at is not None,
    }


@task
async def async_add(a, b):
    return a + b


@task
def pair():
    return (1, 2)  # a tuple comes back as a list, as Django normalises it


@task
def returns_object():
    return object()


@task
def boom(message):
    raise ValueError(message)


@task
def record(token):
    Ledger.objects.create(token=token, phase="run", attempt=1, pid=os.getpid())
    return token


@task
def ledgered(token):
    """A start and a done row per run, with the pid: the ledger that judges once-ness."""
    Ledger.objects.create(token=token, phase="start", attempt=1, pid=os.getpid())
    time.sleep(0.02)  # the work: long enough that a killed worker has runs in flight
    Ledger.objects.create(token=token, phase="done", attempt=1, pid=os.getpid())
    return token


@task(backend="retrying", takes_context=True)
def flaky(context, failures):
    if context.attempt <= failures:
        raise ConnectionError(f"attempt {context.attempt} failed")
    return {"attempt": context.attempt}


#: released by the test that made ``held`` pass its timeout, so its thread ends
RELEASE = threading.Event()


@task(backend="bounded")
def held():
    RELEASE.wait(30)


@task(backend="retrying")
def declined():
    raise TerminalError("the card was declined")


@cron("0 3 * * *", tz="UTC", name="tests.nightly_task")
@task
def nightly(occurrence=None):
    return {"occurrence": occurrence}


def _not_a_task():  # pragma: no cover - only its Task (below) is enqueued
    return None


misnamed = task(_not_a_task)
