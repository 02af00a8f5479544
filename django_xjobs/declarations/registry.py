"""The process-wide registries of declarations (jobs, crons), keyed by their durable name
(SPEC JOB-11..16)."""

from __future__ import annotations

import functools
import importlib.util
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ..drivers.contract import DeclaredVersions
from ..errors import CronInvalidError, JobDefinitionError, JobDuplicateDefinitionError, XJobsError
from ..limits.keys import JobLimits, use_declared

if TYPE_CHECKING:
    from ..drivers.contract import EnqueueRequest
    from ..retry import Retry
    from ..run.context import JobContext
    from ..run.handle import Runnable


class Declared(Protocol):
    name: str
    origin: str


class DeclaredBackfill(Protocol):
    """What a job knows of the backfill whose passes it runs (a ``backfills.Backfill``)."""

    @property
    def name(self) -> str: ...


class DeclaredJob(Declared, Protocol):
    """What the registry's readers ask of a declared job (a ``JobHandle``): a protocol, so the
    registry never names the handle modules that import it."""

    fn: Callable[..., Any]
    queue: str
    retry: Retry
    timeout: float | None
    step_timeout: float | None
    event_poll: float | None
    concurrency: int | None
    limits: JobLimits | None
    #: a ``str.format`` template over the inputs, or a callable making the key from them
    idempotency_key: str | Callable[..., Any]
    reruns_lapsed: bool
    is_async: bool
    backfill: DeclaredBackfill | None
    #: the version of its code (``@job(version=...)``)
    version: int
    #: its input and result are sealed under XJOBS["ENCRYPTION_KEYS"] (``@job(encrypt=...)``)
    encrypt: bool

    #: what a run started under an older version does here (``@job(old_runs=...)``)
    @property
    def old_runs(self) -> str: ...

    #: the events that start a run of it, and those that cancel its live runs by the input
    #: fields they name (issue 43)
    on_event: tuple[str, ...]
    cancel_on: Mapping[str, tuple[str, ...]]

    def invoke(self, ctx: JobContext, inputs: Mapping[str, object]) -> object: ...

    def using(
        self, *, tenant_id: str | None = None, enqueued_by: str | None = None
    ) -> DeclaredJob: ...

    def build_request(self, inputs: Mapping[str, object]) -> EnqueueRequest: ...

    def describe(self) -> dict[str, Any]: ...


class DeclaredCron(Declared, Protocol):
    """What the registry's readers ask of a declared cron (a ``CronHandle``)."""

    schedule: str
    seconds: str | None
    tz: str
    #: the ``django.tasks`` Task each occurrence enqueues, when the cron decorates one
    task: Any


H = TypeVar("H", bound=Declared)
T = TypeVar("T")


class Registry(Generic[H]):
    """Handles by name. A second, different definition under a taken name is refused;
    re-executing the same definition (a module imported twice, an autoreload) replaces it."""

    def __init__(self, kind: str, why: str) -> None:
        self.kind, self.why = kind, why
        self._items: dict[str, H] = {}
        self._lock = threading.Lock()
        #: counts every change of the items, so a reader may keep what it made of them
        self.generation = 0

    def register(self, handle: H) -> None:
        if getattr(_lookup, "active", False):
            return  # declared by a module a task lookup imported: not discovered (see below)
        with self._lock:
            existing = self._items.get(handle.name)
            if existing is not None and existing is not handle and existing.origin != handle.origin:
                raise JobDuplicateDefinitionError(
                    f"two {self.kind}s are named {handle.name!r}: {existing.origin} and {handle.origin}",
                    hint=f"the name {self.why}; give one of them another name=",
                )
            self._items[handle.name] = handle
            self.generation += 1

    def unregister(self, name: str) -> None:
        with self._lock:
            self._items.pop(name, None)
            self.generation += 1

    def get(self, name: str) -> H | None:
        return self._items.get(name)

    def all(self) -> list[H]:
        """Sorted by name in code-unit order, never by locale (SPEC JOB-16, SE-26)."""
        return [self._items[name] for name in sorted(self._items)]


jobs: Registry[DeclaredJob] = Registry("job", "is the durable key of queued rows")
crons: Registry[DeclaredCron] = Registry("cron", "keys the schedule's watermark")

#: where declarations come from, for messages that say one was not found
DISCOVERY = "the jobs.py module of each app in INSTALLED_APPS"
#: the same rule, as a hint says it
DISCOVERY_HINT = (
    "jobs are discovered from <installed app>/jobs.py: declare it there or in a module that "
    "jobs.py imports"
)

_lookup = threading.local()


@contextmanager
def task_lookup() -> Iterator[None]:
    """While a row's name is imported as a ``django.tasks`` task's module path, the ``@job``
    and ``@cron`` declarations that import runs are not registered: jobs come from the apps'
    ``jobs.py`` alone, so a ``@job`` declared elsewhere is ``X_JOB_UNKNOWN`` whether ``TASKS``
    names ``XJobsBackend`` (and so a lookup imports its module) or not. A module's body runs on
    the thread that imports it, so a thread-local flag is exact."""
    before = getattr(_lookup, "active", False)
    _lookup.active = True
    try:
        yield
    finally:
        _lookup.active = before


#: jobs declared once Django had started, and already warned about (one line per job a process)
_told_undiscovered: set[str] = set()
_told_lock = threading.Lock()


def after_startup() -> bool:
    """Whether Django has finished starting (every app's ``ready()``, discovery included): a job
    declared from then on was imported by this process alone (a view's module, a shell), and a
    worker, which imports the apps' ``jobs.py``, does not know it."""
    from django.apps import apps

    return apps.ready


def tell_undiscovered(name: str, module: str) -> None:
    """Once per job and process: an enqueue of a job no worker will know (it parks its rows as
    ``X_JOB_UNKNOWN``), said where it is made rather than where the rows pile up."""
    with _told_lock:
        if name in _told_undiscovered:
            return
        _told_undiscovered.add(name)
    import logging

    from .. import log

    log.event(
        logging.WARNING,
        "xjobs.job.undiscovered",
        job=name,
        module=module,
        hint=f"{module} is not imported by any app's jobs.py, so a worker will not know this "
        f"job and parks its rows as X_JOB_UNKNOWN; {DISCOVERY_HINT}",
    )


def discovered() -> str:
    """Where jobs are discovered and which modules declared them, for a message."""
    modules = sorted({h.fn.__module__ for h in jobs.all()})
    found = f"found in {', '.join(modules)}" if modules else "none was found"
    return f"jobs are discovered from {DISCOVERY} ({found})"


register = jobs.register
unregister = jobs.unregister


def declared_versions() -> DeclaredVersions:
    """What this process's claims are told of the jobs it declares (issue 44): each job's
    version and whether it parks older runs; made again only once the declarations changed."""
    generation = (id(jobs._items), jobs.generation)  # a test may swap the whole dict
    cached = _versions.get(generation)
    if cached is None:
        cached = DeclaredVersions({h.name: (h.version, h.old_runs == "park") for h in jobs.all()})
        _versions.clear()
        _versions[generation] = cached
    return cached


#: the latest declared_versions(), by the registry's generation it was made at
_versions: dict[tuple[int, int], DeclaredVersions] = {}


def registered_jobs() -> list[DeclaredJob]:
    """Every declared job, sorted by name, as the registry types it (``DeclaredJob``), for the
    package's own readers; ``django_xjobs.registered_jobs`` (in ``declarations/job.py``) is the
    same list typed as the ``JobHandle`` objects it holds."""
    return jobs.all()


class EventDeclarations:
    """What one event name does to the declared jobs (issue 43): the jobs it starts
    (``on_event``) and those whose live runs it cancels, each with the input fields an event's
    data must equal (``cancel_on``)."""

    def __init__(
        self,
        starts: tuple[DeclaredJob, ...],
        cancels: tuple[tuple[DeclaredJob, tuple[str, ...]], ...],
    ) -> None:
        self.starts, self.cancels = starts, cancels

    def __bool__(self) -> bool:
        return bool(self.starts or self.cancels)


_NONE = EventDeclarations((), ())
_by_event: tuple[int, dict[str, EventDeclarations]] = (-1, {})


def event_declarations(event: str) -> EventDeclarations:
    """The declarations an event named ``event`` starts or cancels, by name: an index built
    once per change of the registry, so a publish pays a dict lookup."""
    global _by_event
    version, index = _by_event
    if version != jobs.generation:
        version = jobs.generation
        index = {}
        for handle in jobs.all():
            for name in getattr(handle, "on_event", ()):
                entry = index.setdefault(name, EventDeclarations((), ()))
                entry.starts += (handle,)
            for name, fields in getattr(handle, "cancel_on", {}).items():
                entry = index.setdefault(name, EventDeclarations((), ()))
                entry.cancels += ((handle, fields),)
        _by_event = (version, index)
    return index.get(event, _NONE)


class _DeclaredLimits:
    """The declared jobs' limits, for ``limits.keys`` to render a run's key from: it sits in the
    base, below this registry, so the registry hands this down when it is imported."""

    def limits_of(self, name: str) -> JobLimits | None:
        limits: JobLimits | None = getattr(jobs.get(name), "limits", None)
        return limits

    def limited_names(self) -> list[str]:
        return [h.name for h in jobs.all() if getattr(h, "limits", None) is not None]


use_declared(_DeclaredLimits())


class TaskResolver(Protocol):
    """What the registry and ``@cron`` ask of ``django.tasks``, answered by the task backend
    (``django_xjobs.backends.tasks``), which the app registers in ``ready()``: the registry sits
    below the backend and never imports it."""

    def task_job(self, name: str) -> Runnable | None:
        """The handle that runs the task at module path ``name``, or None."""

    def task_queues(self) -> set[str]:
        """The queues the ``XJobsBackend`` aliases accept."""

    def as_task(self, handler: object) -> Any:
        """``handler`` when it is a Task of the task API in use, else None."""

    def cron_entries(self, task: object) -> Callable[[datetime], Any]:
        """A cron's entries for ``task``: each occurrence enqueues it."""


_task_resolver: TaskResolver | None = None


def use_tasks(resolver: TaskResolver) -> None:
    """Answer ``django.tasks`` questions with ``resolver`` (the app's ``ready()`` does this)."""
    global _task_resolver
    _task_resolver = resolver


def task_resolver() -> TaskResolver:
    """The registered resolver; refused with a coded error when none is (a Task declared
    before the app registry is ready, or no task API installed)."""
    if _task_resolver is None:
        raise CronInvalidError(
            "a django.tasks Task was used before django_xjobs's app was ready, or without a "
            "task API installed",
            hint="declare it in a module loaded after apps are ready (jobs.py or tasks.py), and "
            "install Django 6 or the django-tasks backport",
        )
    return _task_resolver


def get_job(name: str) -> Runnable | None:
    """The handle a row named ``name`` runs with (a ``Runnable``): a declared job, else a
    ``django.tasks`` task of that module path (run through ``XJobsBackend``), else None::

        get_job("shop.jobs.send_receipt").queue  # "emails"

    A declared job's handle is the ``JobHandle`` its ``@job`` returned, so
    ``get_job(name).enqueue(...)`` still runs; a typed caller that enqueues holds the handle
    itself, or reads ``registry.jobs.get(name)`` (a ``DeclaredJob``).
    """
    handle = jobs.get(name)
    if handle is not None or not _tasks_configured():
        return handle
    return task_resolver().task_job(name)


#: the backend's import path, as the ``TASKS`` setting names it
TASKS_BACKEND = "django_xjobs.backends.XJobsBackend"


def task_aliases() -> list[str]:
    """The ``TASKS`` aliases served by ``XJobsBackend``, read from the setting alone (no backend
    is built and no task API imported, so this is safe while apps load)."""
    from django.conf import settings

    tasks = getattr(settings, "TASKS", None)
    if not isinstance(tasks, Mapping):
        return []
    return [
        alias
        for alias, params in tasks.items()
        if isinstance(params, Mapping) and _serves_tasks(params.get("BACKEND"))
    ]


def _serves_tasks(path: object) -> bool:
    """``XJobsBackend``, named as such or by a subclass of it (a project's backend that adds
    to it). A subclass is looked up by its class's ancestry, by name: this layer never imports
    the backend; a path that cannot be imported yet (apps still loading) is not one."""
    if path == TASKS_BACKEND:
        return True
    if not isinstance(path, str) or path.startswith(("django.tasks.", "django_tasks.")):
        return False
    from django.utils.module_loading import import_string

    try:
        found = import_string(path)
    except Exception:
        return False
    return isinstance(found, type) and any(
        f"{cls.__module__}.{cls.__qualname__}" == TASKS_BACKEND for cls in found.__mro__
    )


def _tasks_configured() -> bool:
    """Whether ``TASKS`` names ``XJobsBackend`` and a task API is there to serve it (without
    one, Django 5.2 ignores ``TASKS``, and so does this; ``manage.py check`` says so)."""
    return bool(task_aliases()) and tasks_api() is not None


@functools.cache
def tasks_api() -> str | None:
    """``django.tasks`` (Django 6), ``django_tasks`` (the backport), or None."""
    for module in ("django.tasks", "django_tasks"):
        if importlib.util.find_spec(module) is not None:
            return module
    return None


def known_queues(extra: tuple[str, ...] = ()) -> set[str]:
    """``default``, every queue a job declares, the ones the settings list, and those the
    ``django.tasks`` backends served here accept."""
    queues = {"default", *(h.queue for h in jobs.all()), *extra}
    if _tasks_configured():
        queues |= task_resolver().task_queues()
    return queues


def declare(kind: str, label: str, build: Callable[[], T]) -> T:
    """Run ``build`` for a declaration; any rule it breaks surfaces as ``JobDefinitionError``
    naming the declaration, with the rule's own code and hint, at import time."""
    try:
        return build()
    except JobDefinitionError:
        raise
    except XJobsError as error:
        raise JobDefinitionError.of(type(error))(
            f"{kind} {label!r}: {error.message}", hint=error.hint
        ) from error
