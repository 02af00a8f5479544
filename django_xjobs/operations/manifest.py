"""The committed manifest: what the code declares (jobs, crons, backfills) as a file that only
changes when the code does, and its drift check (SPEC JOB-16).

A queued row is keyed by its job's name. Renaming a job, or moving it to a queue no worker
serves, strands the rows already queued; ``xjobs manifest --check`` in CI shows that change in
review, before a deploy parks those rows as unknown.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from ..errors import ManifestDriftError, ManifestInvalidError

if TYPE_CHECKING:
    from ..declarations.cron import CatchUp, CronHandle
    from ..declarations.registry import DeclaredJob

#: the marker and version of the file's format
FORMAT = 1
KINDS: tuple[Literal["jobs"], Literal["crons"], Literal["backfills"]] = (
    "jobs",
    "crons",
    "backfills",
)
_WRITE = "re-run: python manage.py xjobs manifest --write {path}, and commit the file"


class ManifestJob(TypedDict):
    name: str
    queue: str
    input: list[str]
    required: list[str]
    retry: dict[str, object]
    priority: int
    concurrency: int | None
    timeout: float | None


class ManifestCron(TypedDict):
    name: str
    schedule: str
    tz: str
    catch_up: CatchUp
    max_catch_up: int


class ManifestBackfill(TypedDict):
    name: str
    queue: str
    batch: int
    rate: float
    environments: list[str] | None
    requires: list[str] | None


class Manifest(TypedDict):
    """The committed file's document (``xjobs manifest --write``)."""

    xjobs_manifest: int
    jobs: list[ManifestJob]
    crons: list[ManifestCron]
    backfills: list[ManifestBackfill]


def build() -> Manifest:
    """The manifest of this process's declarations: no clock, no database, names in code-unit
    order (SPEC SE-26), so two builds of the same code are equal."""
    from ..declarations import registry
    from ..declarations.cron import registered_crons

    return {
        "xjobs_manifest": FORMAT,
        "jobs": [_job(h) for h in registry.registered_jobs()],
        # a cron's ``jobs`` come from calling it for its next occurrence: a clock value, left out
        "crons": [_cron(c) for c in registered_crons()],
        "backfills": backfills(),
    }


def backfills() -> list[ManifestBackfill]:
    """The manifest's backfills section (no checksum: it hashes the handler's source, so every
    edit would churn the file)."""
    from ..backfills import declared_backfills

    return [
        {
            "name": b.name,
            "queue": declared.handle.queue,
            "batch": b.batch,
            "rate": float(b.rate),
            "environments": sorted(b.environments) if b.environments is not None else None,
            "requires": list(b.requires) if b.requires is not None else None,
        }
        for declared in declared_backfills()
        for b in [declared.spec]
    ]


def _cron(cron: CronHandle) -> ManifestCron:
    """The fields of its ``describe()`` row that only change when the code does."""
    return {
        "name": cron.name,
        "schedule": cron.schedule,
        "tz": cron.tz,
        "catch_up": cron.catch_up,
        "max_catch_up": cron.max_catch_up,
    }


def _job(handle: DeclaredJob) -> ManifestJob:
    row = handle.describe()
    schema = row["input"]
    return {
        "name": row["name"],
        "queue": row["queue"],
        "input": sorted(schema.get("properties", {})),
        "required": sorted(schema.get("required", [])),
        "retry": {**row["retry"], "delays": row["retry_delays"]},
        "priority": row["priority"],
        "concurrency": row["concurrency"],
        "timeout": row["timeout"],
    }


def render(manifest: Mapping[str, object]) -> str:
    """Stable JSON: sorted keys, two-space indent, ASCII only, one trailing newline."""
    return json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def write(path: str) -> Manifest:
    manifest = build()
    Path(path).write_text(render(manifest), encoding="utf-8", newline="\n")
    return manifest


def read(path: str) -> dict[str, Any]:
    """A committed manifest, or ``X_MANIFEST_INVALID`` saying why it cannot be compared."""
    hint = _WRITE.format(path=path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestInvalidError(f"no manifest file at {path}", hint=hint) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ManifestInvalidError(f"cannot read the manifest {path}: {error}", hint=hint) from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ManifestInvalidError(f"{path} is not JSON ({error})", hint=hint) from None
    if not isinstance(data, dict) or "xjobs_manifest" not in data:
        raise ManifestInvalidError(f"{path} is not an xjobs manifest", hint=hint)
    if data["xjobs_manifest"] != FORMAT or not all(
        isinstance(data.get(k), list) and all(isinstance(r, dict) and "name" in r for r in data[k])
        for k in KINDS
    ):
        raise ManifestInvalidError(
            f"{path} is not a format-{FORMAT} xjobs manifest (found format "
            f"{data['xjobs_manifest']!r}, or a list of jobs, crons, backfills is malformed)",
            hint=hint,
        )
    return data


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs, one line per name: ``added``, ``removed``, or ``changed`` with the fields."""
    lines = []
    for kind in KINDS:
        before = {r["name"]: r for r in old.get(kind, [])}
        after = {r["name"]: r for r in new.get(kind, [])}
        what = kind[:-1]
        for name in sorted(before.keys() | after.keys()):
            if name not in after:
                lines.append(f"removed {what} {name}")
            elif name not in before:
                lines.append(f"added   {what} {name}")
            elif before[name] != after[name]:
                fields = sorted(
                    k
                    for k in before[name].keys() | after[name].keys()
                    if before[name].get(k) != after[name].get(k)
                )
                lines.append(f"changed {what} {name}: {', '.join(fields)}")
    return lines


def check(path: str) -> tuple[list[str], str]:
    """The drift between ``path`` and the code: ``([], "")`` when they match, else the change
    lines and a unified diff of the two files' JSON. Raises ``X_MANIFEST_INVALID``."""
    committed = read(path)
    before, after = render(committed), render(build())
    if before == after:
        return [], ""
    diff = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=path,
        tofile="the code",
    )
    # compared as the file would hold it: lists, not tuples
    return changes(committed, json.loads(after)), "".join(diff)


def drift_error(path: str, lines: list[str]) -> ManifestDriftError:
    return ManifestDriftError(
        f"the code no longer matches {path} ({len(lines)} change(s): "
        "a renamed job or a moved queue strands rows already queued)",
        hint=_WRITE.format(path=path) + " if the change is meant",
    )


def inspect_manifest() -> dict[str, Any]:
    """Every declared job and cron, in code-unit order, as plain JSON (SPEC INSP-08): each
    handle's ``describe()`` row, and a cron's next run::

        inspect_manifest()["crons"][0]["next_run"]  # "2026-12-01T02:00:00+00:00"
    """
    from datetime import UTC, datetime

    from ..declarations import registry
    from ..declarations.cron import registered_crons

    now = datetime.now(UTC)
    return {
        "jobs": [h.describe() for h in registry.registered_jobs()],
        "crons": [
            {**c.describe(), "next_run": c.next_occurrence(now).isoformat()}
            for c in registered_crons()
        ],
    }
