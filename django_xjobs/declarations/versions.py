"""What a job declares about the code its runs started under: ``version=`` and ``old_runs=``.

A durable run outlives a deploy. Each run records the version of its job it was first claimed
under; a worker holding a newer version treats an older run as ``old_runs`` says (``replay`` its
steps by name, ``restart`` it with its steps discarded, or ``park`` it for a worker of its own
version), and a worker holding an older version never claims a newer run
(docs/howto/changing-jobs.md).
"""

from __future__ import annotations

from typing import Literal

from ..errors import JobVersionInvalidError

OldRuns = Literal["replay", "restart", "park"]
OLD_RUNS: tuple[OldRuns, ...] = ("replay", "restart", "park")
#: what a run first claimed before runs recorded their version reads as (migration 0029)
FIRST_VERSION = 1
#: the largest version a column of ``integer`` holds
MAX_VERSION = 2**31 - 1


def check_version(version: object) -> int:
    """``version=`` as declared: a whole number from 1 (a bool is not one)."""
    if (
        isinstance(version, bool)
        or not isinstance(version, int)
        or not FIRST_VERSION <= version <= MAX_VERSION
    ):
        raise JobVersionInvalidError(
            f"version={version!r} must be a whole number from 1 up",
            hint="start at 1 (the default) and add one each time the job's steps change",
        )
    return version


def check_old_runs(old_runs: object) -> OldRuns:
    """``old_runs=`` as declared: one of ``OLD_RUNS``."""
    if old_runs not in OLD_RUNS:
        raise JobVersionInvalidError(
            f"old_runs={old_runs!r} is not a policy",
            hint='use "replay" (the default), "restart" or "park"',
        )
    return old_runs
