"""The process-wide registry of job definitions, keyed by their durable name (SPEC JOB-11..16)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .errors import JobDefinitionError

if TYPE_CHECKING:
    from .definitions import JobHandle

_jobs: dict[str, JobHandle] = {}
_lock = threading.Lock()


def register(handle: JobHandle) -> None:
    """Add ``handle``; a second, different definition under the same name is refused.

    Re-executing the same definition (a module imported twice, an autoreload) replaces it,
    because it is the same code under the same name.
    """
    with _lock:
        existing = _jobs.get(handle.name)
        if existing is not None and existing is not handle and existing.origin != handle.origin:
            raise JobDefinitionError(
                f"two jobs are named {handle.name!r}: {existing.origin} and {handle.origin}",
                code="X_JOB_DUPLICATE",
                hint="the name is the durable key of queued rows; give one of them another name=",
            )
        _jobs[handle.name] = handle


def unregister(name: str) -> None:
    with _lock:
        _jobs.pop(name, None)


def get_job(name: str) -> JobHandle | None:
    return _jobs.get(name)


def registered_jobs() -> list[JobHandle]:
    """Every registered job, sorted by name in code-unit order (SPEC JOB-16)."""
    return [_jobs[name] for name in sorted(_jobs)]


def known_queues(extra: tuple[str, ...] = ()) -> set[str]:
    """``default``, every queue a job declares, and the ones the settings list."""
    return {"default", *(h.queue for h in _jobs.values()), *extra}
