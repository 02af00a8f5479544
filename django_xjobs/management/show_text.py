"""``manage.py xjobs show ID``: a job's trace as text — its row, its controls, its steps and
its failed attempts — each part a few lines, like every ``xjobs`` action's text."""

from __future__ import annotations

import json
from datetime import datetime

from ..durations import format_time
from ..operations.answers import AttemptTrace, BackfillSection, JobTrace
from ..run.controls import progress_text
from ..states import after_dependencies, shown_attempt


def job_text(job: JobTrace) -> str:
    """``inspect_job``'s answer as ``xjobs show`` prints it."""
    lines = [f"{job['name']}  {job['id']}"]
    if "collapsed_from" in job:
        lines.append(
            f"  (asked for {job['collapsed_from']}: that enqueue was staged and, at publish, "
            "collapsed into this live job with the same idempotency key)"
        )
    lines += [
        f"  state      {job['state']}  ({_attempt_text(job)})",
        f"  queue      {job['queue']}  priority {job['priority']}",
        f"  version    {_version_text(job)}",
        f"  key        {job['idempotency_key']}",
        f"  run at     {_when(job['run_at'])}",
        f"  stop       {job['stop_reason'] or '-'}",
        *_control_lines(job),
        f"  last error {job['last_error'] or '-'}",
        f"  result     {json.dumps(job['result'])}",
        f"  retries    {', '.join(f'{d:g}s' for d in job['retry_delays']) or '-'}",
        *_backfill_lines(job["backfill"]),
        "  steps:" if job["steps"] else "  steps: none",
    ]
    for step in job["steps"]:
        took = f"{step['duration']:.3f}s" if step["duration"] is not None else "-"
        extra = step["error"] or (f"wakes {step['wake_at']}" if step["wake_at"] else "")
        lines.append(
            f"    {step['name']:<24} {step['status']:<9} x{step['attempts']} {took:>9}  {extra}"
        )
    lines += _attempt_lines(job["attempts"])
    return "\n".join(lines)


def _attempt_text(job: JobTrace) -> str:
    started = job.started_at is not None
    attempt = shown_attempt(job.state, job.attempt, started)
    parked = ", parked: it spends no attempt" if job.state == "suspended" and started else ""
    return f"attempt {attempt} of {job.max_attempts}{parked}"


def _version_text(job: JobTrace) -> str:
    shown = "- (not started)" if job.version is None else str(job.version)
    return f"{shown}  parked by a worker of a newer version" if job.parked else shown


def _when(text: str | None) -> str:
    """A time of the row as every screen prints one; a dependant's far future in words."""
    if not text:
        return "-"
    when = datetime.fromisoformat(text)
    return "runs after its dependencies" if after_dependencies(when) else format_time(when)


def _control_lines(job: JobTrace) -> list[str]:
    """The job controls a job uses (issue 29); none for a job that uses none."""
    lines = []
    if job.progress:
        lines.append(f"  progress   {progress_text(job.progress)}  (at {job.progress['at']})")
    if job.expires_at:
        lines.append(f"  expires    {job.expires_at} (if not started by then)")
    if job.snoozes:
        lines.append(f"  snoozes    {job.snoozes}")
    deps = job.dependencies
    if deps and deps.after:  # issue 32
        waits = f"{deps.waiting_on} not done yet" if deps.waiting_on else "all ended"
        anyway = ", runs anyway" if deps.run_anyway else ""
        lines.append(f"  after      {', '.join(deps.after)}  ({waits}{anyway})")
        if deps.failed:
            lines.append(f"             {deps.failed} did not end done: dependency_failed")
    if deps and deps.dependants:
        lines.append(f"  dependants {', '.join(deps.dependants)}")
    return lines


def _backfill_lines(section: BackfillSection | None) -> list[str]:
    """A backfill pass's ledger row, in one line (and its error in another)."""
    if section is None:
        return []
    where = f" in {section.environment}" if section.environment else ""
    lines = [
        f"  backfill   {section.name}  {section.status or 'not started'}{where}: "
        f"{section.rows} rows, {section.pages} pages, cursor {section.cursor or '-'}"
    ]
    if section.error:
        lines.append(f"             {section.error}")
    return lines


def _attempt_lines(attempts: list[AttemptTrace]) -> list[str]:
    """One line per failed attempt, oldest first, then the newest one's traceback when it left
    one (a lost lease leaves none); the snoozes apart, as snoozes (issue 42)."""
    failed = [a for a in attempts if a["outcome"] != "snoozed"]
    snoozes = [a for a in attempts if a["outcome"] == "snoozed"]
    lines = ["  failed attempts:" if failed else "  failed attempts: none"]
    for a in failed:
        what = " ".join(filter(None, [a["code"], a["exception"]]))
        lines.append(f"    #{a['attempt']:<3} {a['at']}  {a['outcome']:<8} {what}: {a['message']}")
    if failed and failed[-1]["traceback"].strip():
        lines.append(f"  traceback of attempt {failed[-1]['attempt']}:")
        lines += [f"    {line}" for line in failed[-1]["traceback"].rstrip().splitlines()]
    if snoozes:
        lines.append("  snoozes (ctx.snooze, no attempt spent):")
        lines += [f"    during #{a['attempt']:<3} {a['at']}  {a['message']}" for a in snoozes]
    return lines
