"""``django.tasks`` tasks as jobs: the API's names (Django 6, or the ``django-tasks`` backport on
Django 5.2), the job a task's row runs as, and the ``TaskResult`` a row reads back as.

A task enqueued through ``XJobsBackend`` is an ordinary ``x_jobs`` row named by the task's
module path (``shop.tasks.send_email``), with ``{"args": [...], "kwargs": {...}, "backend":
alias}`` as its input. A worker finds the task again by importing that path, so every worker,
retry, lease and operator tool treats it like any job.

The API's names (``api``), its errors (``errors``) and the ``OPTIONS`` (``options``) have modules
of their own and are named here too; ``@cron`` over a task is in ``crons``, and the registry's
door to all of it in ``resolver``.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from inspect import iscoroutinefunction
from typing import Any

from django.apps import apps
from django.core.signals import setting_changed
from django.utils import timezone
from django.utils.module_loading import import_string

from .. import conf, log
from ..declarations import registry
from ..drivers import get_driver
from ..drivers.bounds import check_request
from ..drivers.contract import EnqueueRequest, JobSnapshot
from ..errors import (
    InvariantError,
)
from ..ids import uuid7
from ..payload import NotJSON, check_json, encode
from ..run import signals
from ..run.tracing import current_traceparent
from .api import (
    BACKEND_PATH,
    TASKS_MODULE,
    BaseTaskBackend,
    InvalidTask,
    InvalidTaskBackend,
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    normalize_json,
    task,
    task_enqueued,
    task_finished,
    task_started,
)
from .errors import (
    TaskArgumentTypeError,
    TaskArgumentValueError,
    TaskBackendConfigError,
    TaskInvalidError,
    TaskQueueUnknownError,
    TaskResultNotFoundError,
)
from .options import NO_RETRY, TaskOptions, options_for, parse_options, task_queues

__all__ = [
    "BACKEND_PATH",
    "NO_RETRY",
    "TASKS_MODULE",
    "BaseTaskBackend",
    "InvalidTask",
    "InvalidTaskBackend",
    "Task",
    "TaskArgumentTypeError",
    "TaskArgumentValueError",
    "TaskBackendConfigError",
    "TaskContext",
    "TaskError",
    "TaskInvalidError",
    "TaskJob",
    "TaskOptions",
    "TaskQueueUnknownError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultMismatch",
    "TaskResultNotFoundError",
    "TaskResultStatus",
    "build_request",
    "enqueued_result",
    "normalize_json",
    "options_for",
    "parse_options",
    "task",
    "task_enqueued",
    "task_finished",
    "task_queues",
    "task_result",
    "task_started",
]


_STATUS = {
    "ready": TaskResultStatus.READY,
    "delayed": TaskResultStatus.READY,
    # a parked row (its task could not be imported yet) is waiting to run, not running
    "suspended": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "done": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
    "dead": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
}
_FINISHED = {"done", "failed", "dead", "cancelled"}


#: enqueued, so ``enqueue()`` and ``get_result()`` answer the same ``enqueued_at``
_CALL_KEYS = frozenset({"args", "kwargs", "backend"})
_ROW_KEYS = _CALL_KEYS | {"enqueued_at"}


def is_task_row(row: JobSnapshot) -> bool:
    """Whether ``row`` is a ``django.tasks`` task's row (its input is the call, not job inputs)."""
    data = row.input
    return (
        isinstance(data, dict)
        and _CALL_KEYS <= data.keys() <= _ROW_KEYS
        and isinstance(data["args"], list)
        and isinstance(data["kwargs"], dict)
        and isinstance(data["backend"], str)
        and isinstance(data.get("enqueued_at", ""), str)
    )


def enqueued_at(row: JobSnapshot) -> datetime:
    """When the task was enqueued, as its ``enqueue()`` answered: the time the call recorded
    (an enqueue inside ``atomic()`` is inserted at the commit, after the call returned), else
    the row's creation."""
    recorded = row.input.get("enqueued_at")
    if not recorded:
        return row.created_at
    try:
        return datetime.fromisoformat(recorded)
    except ValueError:
        return row.created_at


class TaskJob:
    """A ``django.tasks`` task seen as a job: what the worker, the retry decision and the
    operator tools read from a handle, and how one run calls the task."""

    #: "no retries" (Django's semantics) is about what the task raises: a run whose worker died
    #: (SIGKILL, OOM) runs again, past the retry budget, as long as MAX_LEASE_EXPIRIES allows
    reruns_lapsed = True
    step_timeout: float | None = None
    event_poll: float | None = None
    concurrency: int | None = None
    tenant: Any = None
    #: a task has no steps, so no version of its code confuses a run of another
    version = 1
    old_runs = "replay"
    #: Django's TaskResult API reads a task's call and return value back from its row, so a
    #: task's row stays clear under XJOBS["ENCRYPTION_KEYS"] (docs/howto/data.md)
    encrypt = False

    def __init__(self, task: Any, options: TaskOptions) -> None:
        self.task = task
        self.fn = task.func
        self.name: str = task.module_path
        self.queue: str = task.queue_name
        self.priority: int = task.priority
        self.retry = options.retry
        self.timeout = options.timeout
        self.is_async = iscoroutinefunction(task.func)
        self.origin = f"django.tasks task {task.module_path}"
        self.__doc__ = task.func.__doc__
        # Django's task_finished is owed only where a task runs, and one exists by then: a
        # receiver connected at import would make every plain job's settle send the signal
        # and look its handle up (a measurable share of W2's Python time)
        signals.job_finished.connect(
            _finished, dispatch_uid="django_xjobs.backends.tasks.task_finished"
        )

    def __repr__(self) -> str:
        return f"<TaskJob {self.name} queue={self.queue}>"

    def invoke(self, ctx: Any, inputs: Mapping[str, object]) -> Any:
        """Run the task for one claimed row, as Django's contract says: ``task_started`` with a
        RUNNING result, then ``task.call(*args, **kwargs)`` (the context first when the task
        takes it); the return value is normalised to JSON as Django does."""
        row = get_driver().reads().get_job(ctx.job_id)
        if row is None or not is_task_row(row):
            raise InvariantError(
                f"job {ctx.job_id} ({self.name}): its row is gone, or its input is not a "
                "django.tasks call",
                hint="a task's row holds {'args': [...], 'kwargs': {...}, 'backend': alias}",
            )
        result = task_result(row, self.task_for(row))
        task = result.task
        task_started.send(type(task.get_backend()), task_result=result)
        args, kwargs = list(row.input["args"]), dict(row.input["kwargs"])
        try:
            if task.takes_context:
                value = task.call(TaskContext(task_result=result), *args, **kwargs)
            else:
                value = task.call(*args, **kwargs)
            # a value JSON cannot hold fails the run with normalize_json's own TypeError (or
            # ValueError), the class Django's reference backends record for it
            return normalize_json(value)
        except BaseException as error:
            _raised.keep(ctx.job_id, error)
            raise

    # what a cron occurrence calls (declarations/cron.py, the scheduler): the task's own backend
    # and options

    def build_request(self, inputs: Mapping[str, object]) -> EnqueueRequest:
        """The row for ``task(**inputs)``, keyed for the scheduler to scope by occurrence."""
        if not resolves(self.task):
            raise TaskInvalidError(unresolved_message(self.task), hint=UNRESOLVED_HINT)
        return build_request(
            self.task, (), inputs, self.task.backend, self.options(), key=self.name
        )

    def enqueue(self, **inputs: object) -> Any:
        """``task.enqueue(**inputs)`` through its backend (a cron fired by hand)."""
        return self.task.enqueue(**inputs)

    def announce(self, request: EnqueueRequest, job_id: object) -> None:
        """``task_enqueued`` for a row the scheduler inserted."""
        result = enqueued_result(self.task, request, job_id)
        task_enqueued.send(type(self.task.get_backend()), task_result=result)

    def options(self) -> TaskOptions:
        return options_for(self.task.backend)

    def task_for(self, row: JobSnapshot) -> Any:
        """The task as it was enqueued: its backend, queue and priority from the row."""
        changes: dict[str, Any] = {}
        alias = row.input.get("backend", self.task.backend)
        if alias != self.task.backend:
            changes["backend"] = alias
        if row.queue != self.task.queue_name:
            changes["queue_name"] = row.queue
        if row.priority != self.task.priority:
            changes["priority"] = row.priority
        return self.task.using(**changes) if changes else self.task


def task_result(row: JobSnapshot, task: object) -> Any:
    """``row`` as Django's ``TaskResult``."""
    status = _STATUS[row.state]
    attempts = row.attempt
    errors = [
        TaskError(exception_class_path=e.exception, traceback=e.traceback or e.message)
        for e in row.errors
    ]
    if status == TaskResultStatus.FAILED and not errors:
        # a job cancelled (or failed) before any attempt failed still says why
        errors.append(
            TaskError(
                exception_class_path="django_xjobs.errors.JobCancelledError"
                if row.state == "cancelled"
                else "django_xjobs.errors.XJobsError",
                traceback=row.last_error or row.stop_reason or row.state,
            )
        )
    result: Any = TaskResult(
        task=task,
        id=str(row.id),
        status=status,
        enqueued_at=enqueued_at(row),
        started_at=row.started_at,
        finished_at=row.updated_at if row.state in _FINISHED else None,
        last_attempted_at=row.last_attempted_at,
        args=list(row.input["args"]),
        kwargs=dict(row.input["kwargs"]),
        backend=row.input["backend"],
        errors=errors,
        # the worker of each earlier attempt is not kept: every entry names the latest one
        worker_ids=[row.attempted_by] * attempts if row.attempted_by else [],
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", row.result)
    return result


# --- enqueue ---------------------------------------------------------------------------------


def build_request(
    task: Any,
    args: Sequence[object],
    kwargs: Mapping[str, object],
    alias: str,
    options: TaskOptions,
    *,
    key: str | None = None,
) -> EnqueueRequest:
    """The job row for one call of ``task``: the call normalised as Django's ``TaskResult``
    does and checked to round-trip through ``jsonb``. Without ``key``, the run is a run of its
    own (Django's semantics: every enqueue runs); the scheduler passes one per occurrence."""
    call = {
        "args": [_normalised(task, value, position=n) for n, value in enumerate(args)],
        "kwargs": {name: _normalised(task, value, name=name) for name, value in kwargs.items()},
    }
    payload: dict[str, Any] = {**call, "backend": alias}
    if key is None:
        # the enqueue's time, read once: the result enqueue() returns and every get_result() of
        # the row answer the same enqueued_at, whenever a staged row is inserted (Django's
        # contract: result == get_result(result.id)); a cron's row is made by the scheduler on
        # its own clock, and answers its creation
        payload["enqueued_at"] = timezone.now().isoformat()
    job_id = uuid7()
    run_at, delay = _when(task.run_after)
    request = EnqueueRequest(
        id=job_id,
        name=task.module_path,
        queue=task.queue_name,
        input=payload,
        input_json=encode(
            payload,
            limit=conf.get().max_payload_bytes,
            what=f"the arguments of task {task.module_path!r}",
        ),
        idempotency_key=str(job_id) if key is None else key,
        max_attempts=options.retry.attempts,
        priority=task.priority,
        run_at=run_at,
        delay=delay,
        traceparent=current_traceparent(),
    )
    check_request(request, what=f"task {task.module_path!r}")
    return request


def _normalised(task: Any, value: object, *, position: int | None = None, name: str = "") -> Any:
    """One argument normalised as Django does; refused with Django's class (``TypeError`` for a
    type, ``ValueError`` for a value) and a message naming the argument, so a call of several
    says which one JSON cannot hold."""
    try:
        normal = normalize_json(value)
        check_json(normal, f"argument {_argument(task, position, name)}")
        return normal
    except NotJSON as error:  # past Django's normalisation, not what jsonb holds (NaN, NUL)
        raise TaskArgumentValueError(
            f"task {task.module_path!r}: {error.path}: {error.reason}",
            hint="task arguments are stored as JSON; pass ids and plain values",
        ) from None
    except (TypeError, ValueError) as error:
        refused = TaskArgumentTypeError if isinstance(error, TypeError) else TaskArgumentValueError
        raise refused(
            f"task {task.module_path!r}: argument {_argument(task, position, name)} is a "
            f"{type(value).__name__}, which JSON cannot hold ({error})",
            hint="task arguments are stored as JSON; pass ids and plain values",
        ) from None


def _argument(task: Any, position: int | None, name: str) -> str:
    """``'when'`` for a keyword, ``'when' (positional 1)`` when the signature names it."""
    if position is None:
        return repr(name)
    import inspect

    try:
        params = [
            p
            for p in inspect.signature(task.func).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):  # pragma: no cover - a callable without a signature
        params = []
    offset = 1 if task.takes_context else 0
    if position + offset < len(params):
        return f"{params[position + offset].name!r} (positional {position + 1})"
    return f"{position + 1} (positional)"


def enqueued_result(task: object, request: EnqueueRequest, job_id: object = None) -> Any:
    """The READY result an enqueue of ``request`` returns."""
    return TaskResult(
        task=task,
        id=str(job_id or request.id),
        status=TaskResultStatus.READY,
        enqueued_at=datetime.fromisoformat(request.input["enqueued_at"])
        if "enqueued_at" in request.input
        else timezone.now(),
        started_at=None,
        finished_at=None,
        last_attempted_at=None,
        args=request.input["args"],
        kwargs=request.input["kwargs"],
        backend=request.input["backend"],
        errors=[],
        worker_ids=[],
    )


def _when(run_after: Any) -> tuple[datetime | None, float | None]:
    """``(run_at, delay)``: a ``timedelta`` counts from the enqueue; a naive datetime
    (``USE_TZ = False``) is local time."""
    if run_after is None:
        return None, None
    if isinstance(run_after, timedelta):
        return None, run_after.total_seconds()
    return (run_after if timezone.is_aware(run_after) else timezone.make_aware(run_after)), None


# --- finding a task from a row's name -------------------------------------------------------

_lock = threading.Lock()
_jobs: dict[str, TaskJob] = {}
#: names that resolved to no task, most recent last: a row's name is data anyone who can
#: enqueue writes, so the misses remembered are bounded (the hits are bounded by the code)
_misses: OrderedDict[str, None] = OrderedDict()
MISSES_KEPT = 1024


def task_job(name: str) -> TaskJob | None:
    """The job a row named ``name`` runs as, if ``name`` is the module path of a task in an
    installed app (``importable``); looked up once per process, a miss too (the code of a
    running process does not change) while it is among the last ``MISSES_KEPT``."""
    found = _jobs.get(name)
    if found is not None:
        return found
    with _lock:
        if name in _misses:
            _misses.move_to_end(name)
            return None
    found = _find(name)
    with _lock:
        if found is None:
            _misses[name] = None
            while len(_misses) > MISSES_KEPT:
                _misses.popitem(last=False)
            return None
        return _jobs.setdefault(name, found)


def importable(name: str) -> bool:
    """Whether a row's ``name`` may be imported to look for a task: a dotted path whose module
    is an installed app's package or a module inside it (``shop.tasks.send`` for the app
    ``shop``). Any other name (``os.system``, a module outside every app) is never imported."""
    parts = name.split(".")
    if len(parts) < 2 or not all(part.isidentifier() for part in parts):
        return False
    module = name.rpartition(".")[0]
    return any(
        module == config.name or module.startswith(f"{config.name}.")
        for config in apps.get_app_configs()
    )


def remember(task: Any, options: TaskOptions) -> TaskJob:
    """The job for ``task``, now known to this process (an enqueue has just resolved it)."""
    with _lock:
        known = _jobs.get(task.module_path)
        if known is None or known.task.func is not task.func or known.retry != options.retry:
            known = _jobs[task.module_path] = TaskJob(_declared(task), options)
        return known


def forget() -> None:
    """Drop what was looked up (tests that declare tasks on the fly)."""
    with _lock:
        _jobs.clear()
        _misses.clear()


UNRESOLVED_HINT = "declare the task with @task at module level, under its function's name"


def unresolved_message(task: Any) -> str:
    if not importable(task.module_path):
        return (
            f"Task {task.module_path!r} is not in a module of an installed app, and a worker "
            "imports a row's task only from those: move it into an app in INSTALLED_APPS."
        )
    return (
        f"Task {task.module_path!r} cannot be found again by its module path, so no worker "
        "could run it: declare it with @task at module level under the name of its function."
    )


def resolves(task: Any) -> bool:
    """Whether importing ``task.module_path`` gives back this task, as a worker will do."""
    if not importable(task.module_path):
        return False
    try:
        found = import_string(task.module_path)
    except Exception:
        return False
    return isinstance(found, Task) and found.func is task.func


def _declared(task: Any) -> Any:
    """The task as its module declares it (``using()`` copies differ per enqueue)."""
    found = import_string(task.module_path)
    return found if isinstance(found, Task) else task


def _find(name: str) -> TaskJob | None:
    if not importable(name):
        return None
    try:
        with registry.task_lookup():  # a row of a @job is found by discovery alone
            found = import_string(name)
    except ImportError:
        return None
    except Exception as error:  # the module itself is broken: say so, once
        log.event(logging.ERROR, "xjobs.task.import_failed", task=name, error=error)
        return None
    if not isinstance(found, Task):
        return None
    return TaskJob(found, options_for(found.backend))


# --- task_finished, once the run's end is written --------------------------------------------


class _Raised:
    """What each task's run raised, from its job thread to the settle that sends
    ``task_finished``; bounded, since a run abandoned at its timeout may raise after its settle."""

    kept = 1024

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._errors: OrderedDict[Any, BaseException] = OrderedDict()

    def keep(self, job_id: object, error: BaseException) -> None:
        with self._lock:
            self._errors[job_id] = error
            while len(self._errors) > self.kept:
                self._errors.popitem(last=False)

    def take(self, job_id: object) -> BaseException | None:
        with self._lock:
            return self._errors.pop(job_id, None)


_raised = _Raised()


def _finished(sender: Any, job: Any, outcome: str, **kwargs: Any) -> None:
    """Django's ``task_finished`` for a task's run, with the result as stored after its settle
    (a run that no longer held its job sends nothing: the run that holds it will)."""
    if not isinstance(sender, TaskJob):
        return
    error = _raised.take(job.id)
    if outcome in ("lease_lost", "suspended"):
        return
    row = get_driver().reads().get_job(job.id)
    if row is None or not is_task_row(row):
        return
    result = task_result(row, sender.task_for(row))
    backend = type(result.task.get_backend())
    if error is None or result.status != TaskResultStatus.FAILED:
        task_finished.send(backend, task_result=result)
        return
    # Django sends a failed task's task_finished inside the handler of what it raised, and its
    # log receiver (logger "django.tasks") attaches sys.exc_info(): error monitoring hooked to
    # that logger gets the task's traceback, not "NoneType: None"
    traceback = error.__traceback__
    try:
        raise error
    except BaseException:
        error.__traceback__ = traceback  # the task's frames, not this one's on top
        task_finished.send(backend, task_result=result)


def _settings_changed(setting: str, **kwargs: object) -> None:
    if setting == "TASKS":  # another backend, or other OPTIONS: look every task up again
        forget()


setting_changed.connect(_settings_changed, dispatch_uid="django_xjobs.backends.tasks.settings")
