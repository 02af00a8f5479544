"""``manage.py xjobs versions``: the live runs per job and the version each started under, with
what a worker of this code does with them; a (json-able result, text) pair like every ``xjobs``
action (issue 44)."""

from __future__ import annotations

from ..errors import JobVersionError
from ..operations.answers import RunVersion
from ..operations.versions import deploy_blockers, inspect_versions

HEADER = (
    f"{'JOB':<40} {'VERSION':>7} {'DECLARED':>8} {'RUNNING':>7} {'WAITING':>7} {'PARKED':>6}  FATE"
)

#: what each fate means, as the text says it
FATES = {
    "current": "runs here",
    "new": "not started: stamped with the declared version at its first claim",
    "replay": "an older version: replayed here, its steps found by name",
    "restart": "an older version: started again here, its steps discarded",
    "park": "an older version: parked here for a worker of its version",
    "newer": "a newer version: no worker of this code runs it",
    "undeclared": "this code does not declare the job: no worker of it runs it",
}


def versions_report() -> tuple[object, str]:
    found = inspect_versions()
    if not found:
        return found, "no live runs"
    lines = [HEADER, *(_line(v) for v in found)]
    return found, "\n".join(lines)


def _line(v: RunVersion) -> str:
    version = "-" if v.version is None else str(v.version)
    declared = "-" if v.declared is None else str(v.declared)
    return (
        f"{v.job:<40} {version:>7} {declared:>8} {v.running:>7} {v.waiting:>7} {v.parked:>6}  "
        f"{v.fate}: {FATES[v.fate]}"
    )


def deploy_check() -> tuple[object, str, JobVersionError | None]:
    """``xjobs check --deploy``: the runs a deploy of this code would strand, the text, and the
    error the command exits non-zero with when there is any (SPEC VER-13)."""
    blockers = deploy_blockers()
    result = {"ok": not blockers, "blockers": blockers}
    if not blockers:
        return result, "no live run is left parked or to no worker by this code", None
    runs = sum(v.running + v.waiting + v.parked for v in blockers)
    lines = [HEADER, *(_line(v) for v in blockers)]
    error = JobVersionError(
        f"{runs} live run(s) of {len({v.job for v in blockers})} job(s) would be parked or run "
        "by no worker of this code",
        hint="keep a worker of their version running, declare old_runs='replay' or 'restart', "
        "or start them again with: python manage.py xjobs retry <id> --restart",
    )
    return result, "\n".join(lines), error
