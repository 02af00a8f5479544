"""``manage.py xjobs <action>``: see and act on jobs from a shell. Every action goes through
``django_xjobs.operations`` (the admin's and the tests' path too) and takes ``--json``."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypedDict

from django.core.management.base import CommandParser

from ... import conf, operations
from ...drivers.contract import QueueState
from ...drivers.reading import reading
from ...durations import format_seconds, format_time, parse_command_line
from ...errors import InvariantError, JobNotFoundError
from ...limits.operator import inspect_job_pauses as paused
from ...limits.operator import inspect_limits, limit_lines, parse_cap, set_queue_limit
from ...operations import manifest
from ...operations.answers import (
    Answer,
    JobSummary,
    QueueDepthRow,
    json_default,
)
from ...run.controls import progress_text
from ...states import FINISHED_STATES, shown_attempt
from ...text import printable
from ...worker.preflight import preflight
from .. import bulk_text as bulk_commands
from .. import cron_text as cron_commands
from .. import data_text, events_text, history_text, moves_text, show_text, versions_text
from ..command import XJobsCommand, accept_global_options, sentences_only
from ..data_text import erase_tenant_action, rotate_keys_action


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
    encrypt_clear: bool  # rotate-keys
    restart: bool
    verb: str
    key: str | None
    concurrency: str
    batch_id: str | None
    action_id: str | None
    cancel: bool
    write: str | None
    check: str | None
    older_than: str
    dry_run: bool


class _LsOptions(_Options, total=False):
    queue: str | None
    name: str | None
    state: str | None  # one state here, repeatable in prune
    error_code: str | None
    input: str | None


class _QueueOptions(_Options, total=False):
    queue: str  # positional in pause, resume and limit
    until: str | None
    for_: str | None


class _CronOptions(_Options, total=False):
    name: str


class _EventsOptions(TypedDict):
    event_id: str | None
    name: str | None
    tenant: str | None
    limit: str  # checked by events_text, for a coded line rather than argparse's
    reveal: bool


class _PartitionsOptions(TypedDict):
    ahead: str | None  # checked by history_text, for a coded line
    move: bool
    drop: bool


class _PruneOptions(_Options, total=False):
    state: list[str] | None  # repeatable (prune)


class _RotateOptions(_Options, total=False):
    batch: int  # rotate-keys, erase-tenant
    tenant: str  # erase-tenant
    yes: bool
    force: bool
    encrypt_clear: bool  # rotate-keys


class Command(XJobsCommand):
    help = (
        "Inspect and operate jobs: ls, show, why, cancel, retry, delete, requeue, run-now, dead, "
        "queues, pause, pause-jobs, resume, resume-jobs, crons, cron, limit, outbox, workers, "
        "versions, "
        "manifest, prune, partitions, batch, audit, events, rotate-keys, erase-tenant, move-queue."
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
        bulk_commands.add_filter_flags(ls, bulk_verb=False)
        show = action("show", "one job: its row, step trace and retry schedule")
        show.add_argument("job_id")
        show.add_argument(
            "--reveal",
            action="store_true",
            help="print values under XJOBS['REDACT_KEYS'] in clear (masked by default)",
        )
        why = action("why", "why a job is not running: each cause that holds, checked now")
        why.add_argument("job_id")
        cancel = action("cancel", "cancel a job, or every live job a filter admits")
        cancel.add_argument("job_id", nargs="?", help="one job (or give filter flags)")
        cancel.add_argument("--reason")
        retry = action("retry", "run a dead or failed job again, or every one a filter admits")
        retry.add_argument("job_id", nargs="?", help="one job (or give filter flags)")
        retry.add_argument("--from-step", help="re-run this step and every later one")
        retry.add_argument("--force", action="store_true", help="also retry a cancelled job")
        retry.add_argument(
            "--restart",
            action="store_true",
            help="delete every step and start again under this code (also a parked run)",
        )
        delete = action("delete", "delete every finished job a filter admits, with its steps")
        requeue = action("requeue", "move every job a filter admits to another queue")
        requeue.add_argument("--to", required=True, help="the queue to move them to")
        for sub in (cancel, retry, delete, requeue):
            bulk_commands.add_filter_flags(sub)
        audit = action("audit", "the operators' audit trail, newest first (ID: one, its progress)")
        audit.add_argument("action_id", nargs="?", help="one record: a bulk action's progress")
        audit.add_argument("--limit", type=int, default=50)
        audit.add_argument("--verb", help="only this verb, e.g. retry_jobs")
        run_now = action("run-now", "make a delayed or scheduled job due now (it keeps its place)")
        run_now.add_argument("job_id")
        dead = action("dead", "dead-lettered jobs, newest first")
        dead.add_argument("--limit", type=int, default=50)
        action("queues", "per-queue counts, the oldest ready job's age, and whether it is paused")
        pause = action("pause", "stop every worker claiming from a queue (runs in flight finish)")
        pause.add_argument("queue")
        ends = pause.add_mutually_exclusive_group()
        ends.add_argument("--until", help="ISO 8601 with its zone: the pause ends by itself then")
        ends.add_argument("--for", dest="for_", metavar="D", help='a duration: "30m", "2h"')
        bulk_commands.add_pause_jobs(action("pause-jobs", "start no run of a job or its key"))
        bulk_commands.add_resume_jobs(action("resume-jobs", "lift a job's or its key's pause"))
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
        action("versions", "live runs per job and version, and what this code's workers do")
        check = action("check", "gate a deploy: exit 1 if live runs would be stranded")
        check.add_argument(
            "--deploy",
            action="store_true",
            required=True,
            help="list live runs this code would park or leave to no worker",
        )
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
        history_text.add_arguments(
            action("partitions", "the finished jobs' history by day; --move, --drop on demand")
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
        data_text.add_arguments(action)
        moves_text.add_arguments(action)

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
            queue=o["queue"],
            name=o["name"],
            state=o["state"],
            limit=o["limit"],
            error_code=o["error_code"],
            input=o["input"],
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
        return job, show_text.job_text(job)

    def _cancel(self, o: _Options) -> tuple[object, str]:
        if _by_filter(o):
            return bulk_commands.bulk_action("cancel", o)
        job = operations.cancel_job(o["job_id"], reason=o["reason"], by=bulk_commands.operator())
        return job, f"cancelled {job['id']} ({job['name']})"

    def _delete(self, o: _Options) -> tuple[object, str]:
        return bulk_commands.bulk_action("delete", o)

    def _requeue(self, o: _Options) -> tuple[object, str]:
        return bulk_commands.bulk_action("requeue", o)

    def _audit(self, o: _Options) -> tuple[object, str]:
        if o["action_id"]:
            return bulk_commands.audit_one(o["action_id"])
        return bulk_commands.audit_report(o["limit"], o["verb"])

    def _retry(self, o: _Options) -> tuple[object, str]:
        if _by_filter(o):
            if o["from_step"] or o["restart"]:
                raise InvariantError(
                    "--from-step and --restart retry one job: give its id, not a filter",
                    hint="python manage.py xjobs retry ID --from-step NAME",
                )
            return bulk_commands.bulk_action("retry", o)
        job = operations.retry_job(
            o["job_id"],
            from_step=o["from_step"],
            force=o["force"],
            restart=o["restart"],
            by=bulk_commands.operator(),
        )
        since = f" from step {o['from_step']!r}" if o["from_step"] else ""
        since = " from the start, its steps discarded" if o["restart"] else since
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
        with reading() as source:  # the depths and the keys from one database (SPEC READ-02)
            report, limits, pauses = operations.inspect_queues(), inspect_limits(), paused()
        header = f"{'queue':<20} {'ready':>7} {'delayed':>8} {'running':>8} {'suspended':>10} {'dead':>6}  oldest ready  limit  paused"
        lines = [header]
        for q in report["queues"]:
            lines.append(
                f"{q['queue']:<20} {q['ready']:>7} {q['delayed']:>8} {q['running']:>8} "
                f"{q['suspended']:>10} {q['dead']:>6}  {q['oldest_ready_seconds']:>11.1f}s  "
                f"{q['limit'] or '-':>5}  {_paused(q)}"
            )
        lines += limit_lines(limits) + bulk_commands.pause_lines(pauses)
        lines += [] if source.note() is None else [f"({source.note()})"]
        keys, jobs = [k.to_json() for k in limits], [p.to_json() for p in pauses]
        return {**report.to_json(), "limits": keys, "paused_jobs": jobs}, "\n".join(lines)

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
        until = bulk_commands.pause_end(o["until"], o["for_"])
        state = operations.pause_queue(o["queue"], by=_operator(), until=until)
        since = state.paused_at.isoformat() if state.paused_at else "-"
        ends = state.paused_until
        return _control(state), (
            f"paused queue {state.queue} since {since} until {ends.isoformat()}: it resumes by "
            f"itself then (or python manage.py xjobs resume {state.queue})"
            if ends is not None
            else f"paused queue {state.queue} since {since}: no worker starts its jobs until "
            f"python manage.py xjobs resume {state.queue}"
        )

    def _pause_jobs(self, o: _Options) -> tuple[object, str]:
        return bulk_commands.pause_jobs_action(o)

    def _resume_jobs(self, o: _Options) -> tuple[object, str]:
        return bulk_commands.resume_jobs_action(o)

    def _resume(self, o: _QueueOptions) -> tuple[object, str]:
        state = operations.resume_queue(o["queue"], by=_operator())
        return _control(state), f"resumed queue {state.queue}: workers claim from it again"

    def _versions(self, o: Mapping[str, object]) -> tuple[object, str]:
        return versions_text.versions_report()

    def _check(self, o: Mapping[str, object]) -> tuple[object, str]:
        result, text, error = versions_text.deploy_check()
        if error is None:
            return result, text
        self.stdout.write(
            json.dumps(result, indent=2, default=_json_default) if o["json"] else text
        )
        raise error  # exit 1: one coded line, after the list

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

    def _partitions(self, o: _PartitionsOptions) -> tuple[object, str]:
        return history_text.partitions_report(o["ahead"], move=o["move"], drop=o["drop"])

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
        if not o["dry_run"]:  # SPEC AUDIT-04: the audit trail past XJOBS["AUDIT_RETENTION"] too
            result["audit_pruned"] = operations.prune_audit()
            text += f"\ndeleted {result['audit_pruned']} audit record(s) past AUDIT_RETENTION"
        return result, text

    def _rotate_keys(self, o: _RotateOptions) -> tuple[object, str]:
        return rotate_keys_action(o, _operator())

    def _erase_tenant(self, o: _RotateOptions) -> tuple[object, str]:
        return erase_tenant_action(o)

    def _move_queue(self, o: _RotateOptions) -> tuple[object, str]:
        return moves_text.move_queue_action(o)


def _json_default(value: object) -> object:
    """An operator answer as the JSON it reads as; anything else JSON has no form for as text."""
    return json_default(value) if isinstance(value, Answer) else str(value)


_operator = bulk_commands.operator


def _paused(row: QueueDepthRow) -> str:
    """The queues line's last column: paused, and until when when the pause has an end."""
    if not row.paused:
        return "-"
    return f"paused until {row.paused_until}" if row.paused_until else "paused"


def _by_filter(o: Mapping[str, object]) -> bool:
    """Whether a retry or cancel names one job or a filter (one of the two, never both)."""
    flags = bulk_commands.filter_of(o)
    if bool(flags) == bool(o["job_id"]):
        raise InvariantError(
            "give one job id, or filter flags (--state, --queue, ...), not both"
            if flags
            else "give a job id, or filter flags (--state, --queue, ...) for every job they admit",
            hint="look first: python manage.py xjobs retry --state dead --queue emails --dry-run",
        )
    return bool(flags)


def _control(state: QueueState) -> dict[str, object]:
    return {
        "queue": state.queue,
        "paused": state.paused,
        "paused_at": state.paused_at.isoformat() if state.paused_at else None,
        "paused_by": state.paused_by,
        "paused_until": state.paused_until.isoformat() if state.paused_until else None,
    }


def _row_line(row: JobSummary) -> str:
    started = row.started_at is not None
    attempt = f"{shown_attempt(row.state, row.attempt, started)}/{row.max_attempts}"
    line = _columns(row.id, row.name, row.queue, row.state, attempt, str(row.updated_at))
    progress = progress_text(row.progress)
    return f"{line}  {progress}" if progress else line


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
