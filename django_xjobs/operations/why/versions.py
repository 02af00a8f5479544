"""What the version of a job's code holds a run by (issue 44): parked by a worker of a newer
version, or started under a version newer than this process declares, which its workers never
claim (SPEC VER-05, VER-08)."""

from __future__ import annotations

from ...drivers.contract import JobSnapshot
from ...run.handle import Runnable
from .causes import Reason, because

HINT = "python manage.py xjobs retry {id} --restart starts it again under this code"


def parked_reason(row: JobSnapshot, handle: Runnable | None) -> Reason:
    """A run a worker of a newer version parked (``old_runs="park"``)."""
    version = 1 if row.version is None else row.version
    declared = None if handle is None else handle.version
    return because(
        "version_parked",
        f"it started under version {version} of its job and a worker of version "
        f"{declared if declared is not None else 'a newer one'} parked it (old_runs='park'): a "
        f"worker of version {version}, or one that replays or restarts old runs, takes it; "
        + HINT.format(id=row.id),
        version=version,
        declared=declared,
    )


def newer_reasons(row: JobSnapshot, handle: Runnable | None) -> list[Reason]:
    """A run started under a version newer than this process's: its workers never claim it."""
    if handle is None or row.version is None or row.version <= handle.version:
        return []
    return [
        because(
            "newer_version",
            f"it started under version {row.version} of its job, and this process declares "
            f"version {handle.version}: a worker of this code never claims it; a worker of "
            f"version {row.version} or later does",
            version=row.version,
            declared=handle.version,
        )
    ]
