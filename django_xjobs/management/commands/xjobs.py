"""``manage.py xjobs <action>``: see and act on jobs from a shell. Every action goes through
``django_xjobs.operations`` (the admin's and the tests' path too) and takes ``--json``."""

from __future__ import annotations

import getpass
import json
from argparse import ArgumentParser
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypedDict

from django.core.management.base import CommandParser

from ... import conf, operations
from ...drivers.contract import QueueState
from ...durations import format_seconds, format_time, parse_command_line
from ...errors import InvariantError, JobNotFoundError
from ...limits.operator import inspect_limits, limit_lines, parse_cap, set_queue_limit
from ...operations import manifest
from ...operations.answers import (
    Answer,
    AttemptTrace,
    BackfillSection,
    JobSummary,
    JobTrace,
    json_default,
)
from ...run.controls import progress_text
from ...states import FINISHED_STATES, after_dependencies, shown_attempt
from ...text import printable
from ...worker.preflight import preflight
from .. import cron_text as cron_commands
from .. import events_text
from ..command import XJobsCommand, accept_global_options, sentences_only


class _Options(TypedDict, total=False):
    """What ``add_arguments`` parses, by destination: an action reads only its own."""

    action: str
    json: bool
    limit: int
    job_id: str
    reveal: bool
    reason: str | None
    from_step: str | None
    force: bool
    verb: str
    key: str | None
    concurrency: str
    batch_id: str | None
    cancel: bool
    write: str | None
    check: str | None
    older_than: str
    dry_run: bool


class _LsOptions(_Options, total=False):
    queue: str | None
    name: str | None
    state: str | None  # one state here, repeatable in prune


class _QueueOptions(_Options, total=False):
    queue: str  # positional in pause, resume and limit


class _CronOptions(_Options, total=False):
    name: str


class _EventsOptions(TypedDict):
    event_id: str | None
    name: str | None
    tenant: str | None
    limit: str  # checked by events_text, for a coded line rather than argparse's
    reveal: bool


class _PruneOptions(_Options, total=False):
    state: list[str] | None  # repeatable (prune)


class Command(XJobsCommand):
    help = (
        "Inspect and operate jobs: ls, show, why, cancel, retry, run-now, dead, queues, pause, "
        "resume, crons, cron, limit, outbox, workers, manifest, prune, batch, events."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

        def action(name: str, help_text: str) -> ArgumentParser:
            sub = actions.add_parser(name, help=help_text)
            sub.add_argument("--json", action="store_true", help="print JSON instead of text")
            accept_global_options(parser, sub)
            return sub

        ls = action("ls", "list jobs, newest first")
        ls.add_argument("--queue")
        ls.add_argument("--name")
        ls.add_argument(
            "--state", choices=["ready", "delayed", "running", "suspended", *FINISHED_STATES]
        )
        ls.add_argument("--limit", type=int, default=50)
        show = action("show", "one job: its row, step trace and retry schedule")
        show.add_argument("job_id")
        show.add_argument(
            "--reveal",
            action="store_true",
            help="print values under XJOBS['REDACT_KEYS'] in clear (masked by default)",
        )
        why = action("why", "why a job is not running: each cause that holds, checked now")
        why.add_argument("job_id")
        cancel = action("cancel", "cancel a job (a running one stops at its next heartbeat)")
        cancel.add_argument("job_id")
        cancel.add_argument("--reason")
        retry = action("retry", "run a dead or failed job again")
        retry.add_argument("job_id")
        retry.add_argument("--from-step", help="re-run this step and every later one")
        retry.add_argument("--force", action="store_true", help="also retry a cancelled job")
        run_now = action("run-now", "make a delayed or scheduled job due now (it keeps its place)")
        run_now.add_argument("job_id")
        dead = action("dead", "dead-lettered jobs, newest first")
        dead.add_argument("--limit", type=int, default=50)
        action("queues", "per-queue counts, the oldest ready job's age, and whether it is paused")
        pause = action("pause", "stop every worker claiming from a queue (runs in flight finish)")
        pause.add_argument("queue")
        resume = action("resume", "let every worker claim from a paused queue again")
        resume.add_argument("queue")
        action("crons", "every cron: schedule, paused or not, last firing, next 5 fire times")
        cron = action("cron", "pause or resume one cron, or run one extra occurrence of it now")
        cron.add_argument("verb", choices=["pause", "resume", "run"])
        cron.add_argument("name", help="the cron's name (python manage.py xjobs crons)")
        cron.add_argument(
            "--key", help="run: a token; the same token again enqueues nothing (default: fresh)"
        )
        cap = action("limit", "cap a queue's runs at once across the fleet (off: no cap)")
        cap.add_argument("queue")
        cap.add_argument("concurrency", help='the most runs at once, or "off"')
        outbox = action(
            "outbox", "the outbox: pending rows and quarantined ones (list, retry ID, discard ID)"
        )
        outbox.add_argument("verb", nargs="?", choices=["list", "retry", "discard"], default="list")
        outbox.add_argument("entry_id", nargs="?", help="a quarantined row's id (retry, discard)")
        outbox.add_argument("--limit", type=int, default=100)
        action("workers", "worker processes: host, pid, queues, runs in flight, alive or lapsed")
        batch = action("batch", "one batch: its counts, callbacks and members (none: recent ones)")
        batch.add_argument("batch_id", nargs="?")
        batch.add_argument("--limit", type=int, default=50, help="members (or batches) shown")
        batch.add_argument(
            "--cancel", action="store_true", help="close it and cancel its live members"
        )
        batch.add_argument("--reason", help="with --cancel: recorded on each member")
        events_text.add_arguments(action("events", "recent events and what each publish did"))
        to_file = action(
            "manifest", "every declared job, cron and backfill"
        ).add_mutually_exclusive_group()
        to_file.add_argument(
            "--write", metavar="FILE", help="write the committed manifest (stable JSON) to FILE"
        )
        to_file.add_argument(
            "--check",
            metavar="FILE",
            help="exit 1 with a diff when the code no longer matches FILE (the CI step)",
        )
        prune = action(
            "prune", "delete finished jobs and their steps (dead ones only with --state dead)"
        )
        prune.add_argument(
            "--older-than", required=True, help='seconds, or with a unit: "90m", "30d"'
        )
        prune.add_argument(
            "--state",
            action="append",
            choices=FINISHED_STATES,
            help="repeatable (default: done, failed, cancelled; dead only when named)",
        )
        prune.add_argument(
            "--dry-run", action="store_true", help="print what would be deleted; delete nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] != "manifest":  # the manifest is code, not rows
            preflight(conf.get())
        with sentences_only():
            result, text = getattr(self, f"_{options['action'].replace('-', '_')}")(options)
        if options["json"]:
            self.stdout.write(json.dumps(result, indent=2, default=_json_default))
        else:  # stored texts (errors, reasons, names) reach a terminal: no escape sequences
            self.stdout.write(printable(text))

    # --- actions: each returns (json-able result, text) ----------------------------------

    def _ls(self, o: _LsOptions) -> tuple[object, str]:
        rows = operations.list_jobs(
            queue=o["queue"], name=o["name"], state=o["state"], limit=o["limit"]
        )
        lines = [LS_HEADER, *(_row_line(r) for r in rows)] if rows else ["no jobs"]
        return rows, "\n".join(lines)

    def _show(self, o: _Options) -> tuple[object, str]:
        job = operations.inspect_job(o["job_id"], reveal=o["reveal"])
        if job is None:
            raise JobNotFoundError(
                f"no job {o['job_id']} exists",
                hint="an id enqueue() returned inside atomic() names a job once that transaction "
                "commits; python manage.py xjobs ls lists recent jobs",
            )
        lines = [f"{job['name']}  {job['id']}"]
        if "collapsed_from" in job:
            lines.append(
                f"  (asked for {job['collapsed_from']}: that enqueue was staged and, at publish, "
                "collapsed into this live job with the same idempotency key)"
            )
        lines += [
            f"  state      {job['state']}  ({_attempt_text(job)})",
            f"  queue      {job['queue']}  priority {job['priority']}",
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
        return job, "\n".join(lines)

    def _cancel(self, o: _Options) -> tuple[object, str]:
        job = operations.cancel_job(o["job_id"], reason=o["reason"])
        return job, f"cancelled {job['id']} ({job['name']})"

    def _retry(self, o: _Options) -> tuple[object, str]:
        job = operations.retry_job(o["job_id"], from_step=o["from_step"], force=o["force"])
        since = f" from step {o['from_step']!r}" if o["from_step"] else ""
        return job, f"queued {job['id']} ({job['name']}) again{since}"

    def _run_now(self, o: _Options) -> tuple[object, str]:
        job = operations.run_job_now(o["job_id"], by=_operator())
        return (
            job,
            f"{job['id']} ({job['name']}) is due now: the next claim on queue {job['queue']} takes it",
        )

    def _dead(self, o: _Options) -> tuple[object, str]:
        rows = operations.inspect_dead_letters(limit=o["limit"])
        if not rows:
            return rows, "no dead jobs"
        lines = [DEAD_HEADER]
        for r in rows:
            failed = format_time(datetime.fromisoformat(r["failed_at"]))
            lines.append(
                _dead_columns(
                    r["id"], r["name"], str(r["attempt"]), r["stop_reason"] or "-", failed
                )
            )
            lines.append(f"    {r['last_error'] or '-'}")
        return rows, "\n".join(lines)

    def _queues(self, o: Mapping[str, object]) -> tuple[object, str]:
        report = operations.inspect_queues()
        header = f"{'queue':<20} {'ready':>7} {'delayed':>8} {'running':>8} {'suspended':>10} {'dead':>6}  oldest ready  limit  paused"
        lines = [header]
        for q in report["queues"]:
            lines.append(
                f"{q['queue']:<20} {q['ready']:>7} {q['delayed']:>8} {q['running']:>8} "
                f"{q['suspended']:>10} {q['dead']:>6}  {q['oldest_ready_seconds']:>11.1f}s  "
                f"{q['limit'] or '-':>5}  {'paused' if q['paused'] else '-'}"
            )
        limits = inspect_limits()
        lines += limit_lines(limits)
        return {**report.to_json(), "limits": [k.to_json() for k in limits]}, "\n".join(lines)

    def _why(self, o: _Options) -> tuple[object, str]:
        from ...operations.why import why_job

        found = why_job(o["job_id"])
        return found.to_json(), "\n".join(found.lines())

    def _limit(self, o: _QueueOptions) -> tuple[object, str]:
        cap = parse_cap(o["concurrency"])
        state = set_queue_limit(o["queue"], cap, by=_operator())
        text = (
            f"queue {state.queue}: at most {cap} runs at once across the fleet, from each "
            "worker's next claim"
            if cap is not None
            else f"queue {state.queue}: no cap on its runs at once"
        )
        return {**_control(state), "limit": state.limit}, text

    def _pause(self, o: _QueueOptions) -> tuple[object, str]:
        state = operations.pause_queue(o["queue"], by=_operator())
        since = state.paused_at.isoformat() if state.paused_at else "-"
        return _control(state), (
            f"paused queue {state.queue} since {since}: no worker starts its jobs until "
            f"python manage.py xjobs resume {state.queue}"
        )

    def _resume(self, o: _QueueOptions) -> tuple[object, str]:
        state = operations.resume_queue(o["queue"], by=_operator())
        return _control(state), f"resumed queue {state.queue}: workers claim from it again"

    def _crons(self, o: Mapping[str, object]) -> tuple[object, str]:
        return cron_commands.crons_report()

    def _cron(self, o: _CronOptions) -> tuple[object, str]:
        return cron_commands.cron_action(o["verb"], o["name"], key=o["key"], by=_operator())

    def _outbox(self, o: dict[str, Any]) -> tuple[object, str]:
        verb, entry = o["verb"], o["entry_id"]
        if verb != "list" and not entry:
            raise InvariantError(
                f"xjobs outbox {verb} needs the id of a quarantined row",
                hint="list them: python manage.py xjobs outbox",
            )
        if verb == "retry":
            report = operations.retry_outbox_entry(entry)
            return report, f"{entry} handed back to the relay: its next pass publishes it"
        if verb == "discard":
            report = operations.discard_outbox_entry(entry)
            return report, f"{entry} discarded: it never becomes a job"
        report = operations.inspect_outbox(limit=o["limit"])
        lines = [
            f"pending {report['pending']} (oldest {report['oldest_pending_seconds']:.1f}s), "
            f"quarantined {report['quarantined']}"
        ]
        for e in report["entries"]:
            tenant = "-" if e["tenant_bytes"] is None else f"{e['tenant_bytes']:,}B"
            lines += [
                f"{e['id']}  {e['job']:<32} {e['error_code']:<8} key {e['key_bytes']:,}B "
                f"tenant {tenant}  quarantined {e['quarantined_at']}",
                f"    {e['error']}",
            ]
        if report["entries"]:
            lines.append("retry (after fixing) or discard: python manage.py xjobs outbox retry ID")
        return report, "\n".join(lines)

    def _batch(self, o: _Options) -> tuple[object, str]:
        from ...operations.batches import batch_report

        if o["cancel"] and o["batch_id"]:
            from ...operations.batches import cancel_batch

            done = cancel_batch(o["batch_id"], reason=o["reason"])
            return done, f"cancelled {done['cancelled_now']} member(s) of batch {done['id']}"
        return batch_report(o["batch_id"], limit=o["limit"])

    def _events(self, o: _EventsOptions) -> tuple[object, str]:
        return events_text.events_report(
            o["event_id"], name=o["name"], tenant=o["tenant"], limit=o["limit"], reveal=o["reveal"]
        )

    def _workers(self, o: Mapping[str, object]) -> tuple[object, str]:
        rows = operations.inspect_workers()
        lines = [
            f"{'worker':<44} {'host':<20} {'pid':>7} {'in flight':>9}  {'state':<7} "
            f"{'last seen':<32} queues"
        ]
        for w in rows:
            state = w["state"]
            lines.append(
                f"{w['id']:<44} {w['host']:<20} {w['pid']:>7} {w['in_flight']:>9}  {state:<7} "
                f"{w['last_seen']:<32} {','.join(w['queues'])}"
            )
        return rows, "\n".join(lines) if rows else "no workers"

    def _manifest(self, o: _Options) -> tuple[object, str]:
        if o["write"]:
            written = manifest.write(o["write"])
            counts: dict[str, int] = {kind: len(written[kind]) for kind in manifest.KINDS}
            each = ", ".join(f"{n} {kind}" for kind, n in counts.items())
            return {"file": o["write"], **counts}, f"wrote {o['write']}: {each}"
        if o["check"]:
            return self._manifest_check(o["check"], o["json"])
        found = {**operations.inspect_manifest(), "backfills": manifest.backfills()}
        lines = [
            f"job  {j['name']}  queue={j['queue']} attempts={j['retry']['attempts']}"
            for j in found["jobs"]
        ]
        lines += [
            f"cron {c['name']}  schedule={c['schedule']!r} tz={c['tz']} catch_up={c['catch_up']} next={c['next_run']}"
            for c in found["crons"]
        ]
        lines += [
            f"backfill {b['name']}  queue={b['queue']} batch={b['batch']} rate={b['rate']:g}"
            for b in found["backfills"]
        ]
        return found, "\n".join(lines)

    def _manifest_check(self, path: str, as_json: bool) -> tuple[object, str]:
        lines, diff = manifest.check(path)
        if not lines:
            return {"file": path, "drift": []}, f"{path} matches the code"
        if as_json:
            self.stdout.write(json.dumps({"file": path, "drift": lines}, indent=2))
        else:
            self.stdout.write("\n".join(lines) + "\n\n" + diff)
        raise manifest.drift_error(path, lines)  # exit 1: CommandError, after the diff

    def _prune(self, o: _PruneOptions) -> tuple[object, str]:
        seconds = parse_command_line(o["older_than"], flag="--older-than") or 0.0  # required
        counts = operations.prune_jobs(older_than=seconds, states=o["state"], dry_run=o["dry_run"])
        total = sum(counts.values())
        verb = "would delete" if o["dry_run"] else "deleted"
        each = ", ".join(f"{state} {n}" for state, n in counts.items())
        text = f"{verb} {total} job(s) older than {format_seconds(seconds)}: {each}"
        if "dead" not in counts:
            text += "\ndead jobs are kept for an operator; add --state dead to delete them too"
        result = {"dry_run": o["dry_run"], "older_than": seconds, "states": counts, "total": total}
        return result, text


def _json_default(value: object) -> object:
    """An operator answer as the JSON it reads as; anything else JSON has no form for as text."""
    return json_default(value) if isinstance(value, Answer) else str(value)


def _operator() -> str:
    """Who paused a queue from a shell: the login, as far as the process knows it."""
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no login name (no passwd entry): still say where
        return "cli"


def _control(state: QueueState) -> dict[str, object]:
    return {
        "queue": state.queue,
        "paused": state.paused,
        "paused_at": state.paused_at.isoformat() if state.paused_at else None,
        "paused_by": state.paused_by,
    }


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


def _attempt_text(job: JobTrace) -> str:
    started = job.started_at is not None
    attempt = shown_attempt(job.state, job.attempt, started)
    parked = ", parked: it spends no attempt" if job.state == "suspended" and started else ""
    return f"attempt {attempt} of {job.max_attempts}{parked}"


def _when(text: str | None) -> str:
    """A time of the row as every screen prints one; a dependant's far future in words."""
    if not text:
        return "-"
    when = datetime.fromisoformat(text)
    return "runs after its dependencies" if after_dependencies(when) else format_time(when)


def _row_line(row: JobSummary) -> str:
    started = row.started_at is not None
    attempt = f"{shown_attempt(row.state, row.attempt, started)}/{row.max_attempts}"
    line = _columns(row.id, row.name, row.queue, row.state, attempt, str(row.updated_at))
    progress = progress_text(row.progress)
    return f"{line}  {progress}" if progress else line


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


def _columns(*cells: str) -> str:
    job_id, name, queue, state, attempt, updated = cells
    return f"{job_id:<36}  {name:<32} {queue:<10} {state:<9} {attempt:>7}  {updated}"


def _dead_columns(*cells: str) -> str:
    job_id, name, attempt, stop, failed = cells
    return f"{job_id:<36}  {name:<32} {attempt:>7}  {stop:<18}  {failed}"


#: the columns of ``xjobs dead``, each row's last error on the line below it
DEAD_HEADER = _dead_columns("id", "name", "attempt", "stop reason", "failed at")

#: the columns of ``xjobs ls``: the time is when the row last changed (``updated_at``)
LS_HEADER = _columns("id", "name", "queue", "state", "attempt", "updated")
