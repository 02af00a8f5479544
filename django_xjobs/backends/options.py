"""What a task cannot declare on ``@task``, from its backend's ``TASKS`` entry: ``OPTIONS``
(``RETRY`` and ``TIMEOUT``), checked, and the queues the aliases accept."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from ..declarations import registry
from ..retry import Retry
from .errors import TaskBackendConfigError

#: a task's failed run is not retried unless the backend's OPTIONS say so (Django's semantics)
NO_RETRY = Retry(attempts=1)


@dataclass(frozen=True)
class TaskOptions:
    """What a task cannot declare on ``@task``, from the backend's ``OPTIONS``."""

    retry: Retry = NO_RETRY
    timeout: float | None = None


def task_queues() -> set[str]:
    """The queues ``XJobsBackend`` aliases accept, for the queues a worker watches by default."""
    found: set[str] = set()
    tasks: Mapping[str, Any] = settings.TASKS
    for alias in registry.task_aliases():
        queues = tasks[alias].get("QUEUES", ["default"])
        if isinstance(queues, list | tuple | set | frozenset):
            found.update(q for q in queues if isinstance(q, str))
    return found


def options_for(alias: str) -> TaskOptions:
    """The ``OPTIONS`` of ``alias`` when it is an ``XJobsBackend``, else the defaults."""
    if alias not in registry.task_aliases():
        return TaskOptions()
    tasks: Mapping[str, Any] = settings.TASKS
    return parse_options(tasks[alias].get("OPTIONS", {}), alias)


def parse_options(raw: object, alias: str) -> TaskOptions:
    """``OPTIONS`` checked: ``RETRY`` (a ``Retry`` or a dict of its arguments) and ``TIMEOUT``
    (a duration); anything else is refused, naming the key."""
    from ..durations import parse_optional

    where = f'TASKS["{alias}"]["OPTIONS"]'
    if not isinstance(raw, Mapping):
        raise TaskBackendConfigError(f"{where} must be a dict, got {type(raw).__name__}")
    unknown = sorted(set(raw) - {"RETRY", "TIMEOUT"})
    if unknown:
        hint = "known keys: RETRY, TIMEOUT"
        if "VISIBILITY_TIMEOUT" in unknown:
            hint = (
                'a lease is the worker\'s XJOBS["VISIBILITY_TIMEOUT"], renewed while the task '
                "runs; set it there. " + hint
            )
        raise TaskBackendConfigError(f"{where} has unknown key(s) {', '.join(unknown)}", hint=hint)
    retry = raw.get("RETRY", NO_RETRY)
    if isinstance(retry, Mapping):
        try:
            retry = Retry(**retry)
        except TypeError as error:
            raise TaskBackendConfigError(
                f"{where}['RETRY']: {error}",
                hint="e.g. {'attempts': 5, 'delay': '2s', 'backoff': 'exponential'}",
            ) from None
        except Exception as error:
            message = getattr(error, "message", str(error))
            raise TaskBackendConfigError(
                f"{where}['RETRY']: {message}", hint=getattr(error, "hint", None)
            ) from None
    if not isinstance(retry, Retry):
        raise TaskBackendConfigError(
            f"{where}['RETRY'] must be a Retry(...) or a dict of its arguments, got {retry!r}",
            hint="e.g. Retry(attempts=5, delay='2s')",
        )
    try:
        timeout = parse_optional(raw.get("TIMEOUT"), field=f"{where}['TIMEOUT']")
    except Exception as error:
        message = getattr(error, "message", str(error))
        raise TaskBackendConfigError(message, hint=getattr(error, "hint", None)) from None
    return TaskOptions(retry=retry, timeout=timeout)
