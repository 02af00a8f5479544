"""``manage.py xjobs retry|cancel|delete|requeue`` by filter and ``xjobs audit`` (issue 45): the
filter flags, the question asked before acting on many jobs, and each action's text and JSON, a
(json-able result, text) pair like every ``xjobs`` action."""

from __future__ import annotations

import getpass
import json
import socket
import sys
from argparse import ArgumentParser
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from ..errors import AuditRecordNotFoundError, ConfirmationRequiredError, InvariantError
from ..limits.operator import JobPauseReport, pause_jobs, resume_jobs
from ..operations import audit, bulk, filters
from ..operations.answers import BulkResult
from ..states import JOB_STATES

#: a bulk action on more jobs than this asks first (``--yes`` does not ask)
ASK_ABOVE = 100
#: each filter flag and the filter field it sets
FLAGS = {
    "state": "state",
    "queue": "queue",
    "name": "name",
    "tenant": "tenant_id",
    "error_code": "error_code",
    "stop_reason": "stop_reason",
    "input": "input",
    "created_after": "created_after",
    "created_before": "created_before",
    "updated_after": "updated_after",
    "updated_before": "updated_before",
}


def operator() -> str:
    """Who acts from a shell: the login and the host, as far as the process knows them."""
    try:
        login = getpass.getuser()
    except (OSError, KeyError):  # no login name (no passwd entry): still say where
        login = "unknown"
    return f"cli:{login}@{socket.gethostname()}"


def add_filter_flags(sub: ArgumentParser, *, bulk_verb: bool = True) -> None:
    """The filter flags (``xjobs ls`` takes ``--input`` and ``--error-code`` only); a bulk verb
    also takes ``--dry-run`` and ``--yes``."""
    sub.add_argument("--error-code", help="the code at the start of last_error, e.g. X_TERMINAL")
    sub.add_argument(
        "--input", help="a JSON object the input contains, e.g. '{\"order_id\": 4711}'"
    )
    if not bulk_verb:
        return
    sub.add_argument(
        "--state", action="append", choices=JOB_STATES, help="repeatable: any of these states"
    )
    sub.add_argument("--queue")
    sub.add_argument("--name", help="the job's name")
    sub.add_argument("--tenant", help="the tenant_id")
    sub.add_argument("--stop-reason")
    for edge in ("created", "updated"):
        sub.add_argument(f"--{edge}-after", help="ISO 8601 with its zone: at or after")
        sub.add_argument(f"--{edge}-before", help="ISO 8601 with its zone: strictly before")
    sub.add_argument(
        "--dry-run", action="store_true", help="count and show a sample; change nothing"
    )
    sub.add_argument(
        "--yes", action="store_true", help=f"do not ask before acting on {ASK_ABOVE}+ jobs"
    )


def filter_of(options: Mapping[str, object]) -> dict[str, object]:
    """The filter the flags given make (a flag left out admits every job)."""
    return {field: options[flag] for flag, field in FLAGS.items() if options.get(flag) is not None}


def bulk_action(
    verb: str,
    options: Mapping[str, object],
    *,
    ask: Callable[[str], str] = input,
    interactive: Callable[[], bool] = lambda: sys.stdin.isatty(),
) -> tuple[object, str]:
    """One bulk verb on the flags' filter: with ``--dry-run`` the count and a sample; else, past
    ``ASK_ABOVE`` jobs and without ``--yes``, asked first on a terminal and refused without one
    (``X_CONFIRMATION_REQUIRED``: nothing changed), then done (SPEC BULK-10)."""
    where = filters.job_filter(filter_of(options))
    kwargs: dict[str, object] = {}
    if verb == "cancel":
        kwargs["reason"] = options.get("reason")
    if verb == "requeue":
        if not options.get("to"):
            raise InvariantError(
                "xjobs requeue needs the queue to move the jobs to",
                hint="python manage.py xjobs requeue --to QUEUE --queue FROM ...",
            )
        kwargs["queue"] = options["to"]
    if verb == "retry":
        kwargs["force"] = bool(options.get("force"))
    run: Callable[..., BulkResult] = getattr(bulk, f"{verb}_jobs")
    if not options.get("dry_run") and not options.get("yes"):
        count = run(where, dry_run=True, **kwargs).matched
        if count > ASK_ABOVE:
            question = f"{verb} {count:,} jobs matching {json.dumps(where.to_json())}? [y/N] "
            if not interactive():
                raise ConfirmationRequiredError(
                    f"xjobs {verb} would act on {count:,} jobs and there is no terminal to ask "
                    "on: nothing was changed",
                    hint="look first with --dry-run, then add --yes",
                )
            if ask(question).strip().lower() not in ("y", "yes"):
                return {"verb": verb, "confirmed": False, "matched": count}, "nothing changed"
    result = run(where, dry_run=bool(options.get("dry_run")), by=operator(), **kwargs)
    return result, bulk_text(result)


def bulk_text(result: BulkResult) -> str:
    """A bulk answer in a few lines: what it did (or would do), then a dry run's sample."""
    where = json.dumps(result.filter) if result.filter else "every job"
    if result.note:
        return f"{result.note} (filter: {where})"
    if result.dry_run:
        lines = [f"would {result.verb} {result.matched:,} job(s) matching {where}; a sample:"]
        lines += [
            f"  {s.id}  {s.name:<32} {s.queue:<10} {s.state:<9} {s.last_error or '-'}"
            for s in result.sample
        ]
        return "\n".join(lines)
    done = {"retry": "queued again", "cancel": "cancelled", "delete": "deleted"}
    what = done.get(result.verb, f"moved to queue {result.verb}")
    if result.verb == "requeue":
        what = "requeued"
    text = f"{what} {result.changed:,} of {result.matched:,} job(s) matching {where}"
    if result.skipped:
        text += (
            f"; {result.skipped:,} skipped (they moved on meanwhile, or a live job holds their key)"
        )
    return text


def pause_end(until: str | None, duration: str | None) -> datetime | str | None:
    """``xjobs pause --until TIME | --for D``: when the pause ends by itself (SPEC PAUSE-02)."""
    if duration is not None:
        return duration
    if until is None:
        return None
    try:
        return datetime.fromisoformat(until)
    except ValueError:
        raise InvariantError(
            f"--until {until!r} is not a time",
            hint="ISO 8601 with its zone, e.g. 2026-12-07T04:00:00+00:00, or --for 30m",
        ) from None


def add_pause_jobs(sub: ArgumentParser) -> None:
    """``xjobs pause-jobs NAME [--key K] [--until TIME | --for D]``."""
    sub.add_argument("name", help="the job's name")
    sub.add_argument("--key", help="the limit key, as its template renders it (xjobs queues)")
    ends = sub.add_mutually_exclusive_group()
    ends.add_argument("--until", help="ISO 8601 with its zone: the pause ends by itself then")
    ends.add_argument("--for", dest="for_", metavar="D", help='a duration: "30m", "2h"')


def add_resume_jobs(sub: ArgumentParser) -> None:
    """``xjobs resume-jobs NAME [--key K]``."""
    sub.add_argument("name", help="the job's name")
    sub.add_argument("--key", help="the limit key, as its template renders it (xjobs queues)")


def pause_jobs_action(options: Mapping[str, object]) -> tuple[object, str]:
    """``xjobs pause-jobs``: the job or key paused, and until when (SPEC PAUSE-03, PAUSE-06)."""
    until = pause_end(_text(options.get("until")), _text(options.get("for_")))
    name, key = str(options["name"]), _text(options.get("key"))
    report = pause_jobs(name=name, limit_key=key, until=until, by=operator())
    shown = f"{name}[{key}]" if key else name
    resume = f"python manage.py xjobs resume-jobs {name}" + (f" --key {key}" if key else "")
    if report.paused_until is None:
        return report, f"paused {shown}: no run of it starts, fleet-wide, until {resume}"
    return report, (
        f"paused {shown} until {report.paused_until}: no run of it starts before then, "
        f"fleet-wide; it resumes by itself (or {resume})"
    )


def resume_jobs_action(options: Mapping[str, object]) -> tuple[object, str]:
    """``xjobs resume-jobs``: the job's or key's pause lifted (SPEC PAUSE-06)."""
    name, key = str(options["name"]), _text(options.get("key"))
    report = resume_jobs(name=name, limit_key=key, by=operator())
    shown = f"{name}[{key}]" if key else name
    if not report.lifted:
        return report, f"{shown} was not paused: nothing changed"
    return report, f"resumed {shown}: workers start its runs again"


def pause_lines(pauses: Sequence[JobPauseReport]) -> list[str]:
    """The paused jobs and keys below ``xjobs queues``' table, when any is (SPEC PAUSE-06)."""
    if not pauses:
        return []
    lines = ["", f"{'paused job':<48} {'by':<20} paused until"]
    for p in pauses:
        name = f"{p.job}[{p.key}]" if p.key is not None else p.job
        lines.append(f"{name:<48} {p.paused_by or '-':<20} {p.paused_until or 'resumed'}")
    return lines


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def audit_report(limit: int, verb: str | None) -> tuple[object, str]:
    """``xjobs audit``: the newest operator actions first."""
    rows = audit.inspect_audit(limit=limit, verb=verb)
    if not rows:
        return rows, "no operator action recorded"
    lines = []
    for a in rows:
        on = a.job_id or a.target or (json.dumps(a.filter) if a.filter is not None else "-")
        counts = (
            ""
            if a.matched is None
            else f"  matched {a.matched} changed {a.changed} skipped {a.skipped}"
        )
        why = f"  ({a.reason})" if a.reason else ""
        where = f"  [{a.status}]" if a.status else ""
        lines.append(f"{a.at}  {a.actor:<28} {a.verb:<20} {on}{counts}{why}{where}")
    return rows, "\n".join(lines)


def audit_one(action_id: str) -> tuple[object, str]:
    """``xjobs audit ID``: one record, and a background bulk action's progress (SPEC BULK-15)."""
    a = audit.inspect_action(action_id)
    if a is None:
        raise AuditRecordNotFoundError(f"no audit record {action_id} exists")
    on = a.job_id or a.target or (json.dumps(a.filter) if a.filter is not None else "-")
    lines = [f"{a.verb} by {a.actor} at {a.at} on {on}"]
    if a.reason:
        lines.append(f"reason: {a.reason}")
    if a.status is not None:
        lines.append(
            f"{a.status}: {a.matched or 0:,} of {a.expected or 0:,} matched, "
            f"{a.changed or 0:,} changed, {a.skipped or 0:,} skipped (job {a.by_job or '-'})"
        )
        lines.append(f"started {a.started_at or '-'}, finished {a.finished_at or '-'}")
        if a.error:
            lines.append(f"error: {a.error}")
    elif a.matched is not None:
        lines.append(f"matched {a.matched:,}, changed {a.changed:,}, skipped {a.skipped:,}")
    return a, "\n".join(lines)
