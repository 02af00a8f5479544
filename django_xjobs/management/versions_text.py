"""``manage.py xjobs versions``: the live runs per job and the version each started under, with
what a worker of this code does with them; a (json-able result, text) pair like every ``xjobs``
action (issue 44)."""

from __future__ import annotations

from ..operations.answers import RunVersion
from ..operations.versions import inspect_versions

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
