"""``manage.py xjobs_backfill``: list the declared backfills, gate a deploy on the pending ones,
start a pass and follow it. The reads are ``django_xjobs.operations.backfills``, the start is
``backfills.gate.start_backfill`` and the following is ``backfills.watch.PassWatch``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

from django.core.management.base import CommandError, CommandParser

from ... import conf
from ...backfills import get_backfill
from ...backfills.gate import Started, check_requires, start_backfill
from ...backfills.status import pending_backfills
from ...backfills.watch import PassWatch, ProgressDisplay, pages
from ...errors import BackfillPendingError, InvariantError
from ...operations.answers import BackfillPass, BackfillReport, json_default
from ...operations.backfills import describe_backfills
from ...worker.preflight import preflight
from ..command import XJobsCommand

#: the shell's exit status after Ctrl-C: the watch stopped, the pass did not
EXIT_INTERRUPTED = 130


class PassReport(TypedDict):
    """``--json``'s report of one pass: as queued, and with ``--wait`` how it ended."""

    backfill: str
    job: str
    force: bool
    live: bool
    state: NotRequired[str]
    rows: NotRequired[int]
    pages: NotRequired[int]
    last_error: NotRequired[str | None]


class Command(XJobsCommand):
    help = (
        "Backfills: --list them, --pending (exits 1 while one declared for this environment "
        "has no completed pass: a deploy gate), NAME [--force] [--wait] to start one's pass, "
        "--all [--wait] to start every pending one in name order. --wait follows each pass to "
        "its end, with its progress on stderr. Exit status: 0 when done; 1 with one error line "
        "(CODE: what happened — the fix) for a pending backfill, a refused start or a pass that "
        "did not complete; 130 when --wait is interrupted (the pass goes on)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        what = parser.add_mutually_exclusive_group(required=True)
        what.add_argument("name", nargs="?", metavar="NAME", help="the backfill to start")
        what.add_argument(
            "--list", action="store_true", help="every declared backfill and its latest pass"
        )
        what.add_argument(
            "--pending",
            action="store_true",
            help="the backfills this environment still needs; exit 1 while there is one",
        )
        what.add_argument(
            "--all", action="store_true", help="start every pending backfill, in name order"
        )
        parser.add_argument(
            "--force", action="store_true", help="run NAME again although it completed here"
        )
        parser.add_argument(
            "--wait",
            action="store_true",
            help="follow each pass until it ends; exit 1 with its error unless it completed",
        )
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"]
        if options["force"] and name is None:
            raise InvariantError(
                "--force goes with a backfill NAME", hint="xjobs_backfill NAME --force"
            )
        if options["wait"] and not (name or options["all"]):
            raise InvariantError("--wait goes with a backfill NAME or --all")
        preflight(conf.get(), table="x_backfills")
        if options["list"]:
            self._list(options)
        elif options["pending"]:
            self._pending(options)
        elif options["all"]:
            self._all(options)
        else:
            self._start(name, options)

    # --- reads --------------------------------------------------------------------------------

    def _list(self, o: Mapping[str, object]) -> None:
        found = describe_backfills()
        lines = []
        for b in found:
            lines += [
                f"{b.name}  {_standing(b)}",
                f"  batch {b.batch}  rate {b.rate:g}/s  queue {b.queue}  "
                f"environments {', '.join(b.environments or ['any'])}  "
                f"requires {b.requires or '-'}",
                f"  latest pass: {_pass_text(b.latest)}",
            ]
        self._out(o, found, "\n".join(lines) or "no backfill is declared")

    def _pending(self, o: Mapping[str, object]) -> None:
        found = [b for b in describe_backfills() if b.pending]
        lines = [f"{b.name}  latest pass: {_pass_text(b.latest)}" for b in found]
        self._out(o, found, "\n".join(lines) or f"no backfill is pending in {_here()}")
        if found:
            raise BackfillPendingError(
                f"{len(found)} backfill(s) declared for {_here()} have no completed pass here: "
                f"{', '.join(b.name for b in found)}",
                hint="python manage.py xjobs_backfill --all --wait runs them in turn (a worker "
                "watching their queues runs each pass)",
            )

    # --- starts -------------------------------------------------------------------------------

    def _start(self, name: str, o: dict[str, Any]) -> None:
        [report] = self._start_each(o, [name], force=o["force"], join_live=False)
        if o["json"]:
            self.stdout.write(json.dumps(report, indent=2))
        if o["wait"]:
            _raise_unless_done(report)

    def _all(self, o: Mapping[str, object]) -> None:
        pending = pending_backfills()
        for spec in pending:  # refused before any pass is queued, not halfway through
            check_requires(spec)
        # a pass already live is followed, not refused: a deploy that retries joins it
        names = [spec.name for spec in pending]
        reports = self._start_each(o, names, force=False, join_live=True)
        if o["json"]:
            self.stdout.write(json.dumps(reports, indent=2))
        elif not pending:
            self.stdout.write(f"no backfill is pending in {_here()}")
        if o["wait"] and reports:
            _raise_unless_done(reports[-1])

    def _start_each(
        self, o: Mapping[str, object], names: list[str], *, force: bool, join_live: bool
    ) -> list[PassReport]:
        """Start each pass in turn; with --wait, follow each to its end before the next, and
        stop at one that did not complete (the next ones may need its data)."""
        reports = []
        for name in names:
            started = start_backfill(name, force=force, join_live=join_live)
            self._say(o, _started_text(started))
            if not o["wait"]:
                reports.append(_started(started))
                continue
            report = self._follow(started)
            self._say(o, _ended_text(report))
            reports.append(report)
            if report["state"] != "done":
                break
        return reports

    def _follow(self, started: Started) -> PassReport:
        spec = get_backfill(started.backfill)
        assert spec is not None  # start_backfill found it
        display = ProgressDisplay(self._progress, tty=self.stderr.isatty())
        try:
            job, progress = PassWatch(spec, started.job_id).run(display.show)
        except KeyboardInterrupt:
            self._progress("\n")
            raise CommandError(
                f"stopped watching job {started.job_id}; the pass goes on — python manage.py "
                f"xjobs show {started.job_id} shows where it is",
                returncode=EXIT_INTERRUPTED,
            ) from None
        return {
            **_started(started),
            "state": job.state,
            "rows": progress.rows,
            "pages": progress.pages,
            "last_error": job.last_error,
        }

    # --- output -------------------------------------------------------------------------------

    def _progress(self, text: str) -> None:
        """The progress line as it is: no newline added, no error colour, flushed now."""
        self.stderr.write(text, style_func=_plain, ending="")
        self.stderr.flush()

    def _out(self, o: Mapping[str, object], result: object, text: str) -> None:
        self.stdout.write(json.dumps(result, indent=2, default=json_default) if o["json"] else text)

    def _say(self, o: Mapping[str, object], text: str) -> None:
        """A line of text output; with --json only the JSON is printed."""
        if not o["json"]:
            self.stdout.write(text)


def _plain(text: str) -> str:
    return text


def _here() -> str:
    environment = conf.get().environment
    return (
        f"environment {environment!r}"
        if environment
        else 'this environment (no XJOBS["ENVIRONMENT"])'
    )


def _standing(b: BackfillReport) -> str:
    if not b.runs_here:
        return f"not for {_here()}"
    return "pending" if b.pending else "completed here"


def _pass_text(p: BackfillPass | None) -> str:
    if p is None:
        return "none"
    where = f" in {p.environment}" if p.environment else ""
    text = (
        f"{p.status}{where}: {p.rows:,} rows, {pages(p.pages)}, started "
        f"{p.started_at}, job {p.job_id}"
    )
    if p.completed_at:
        text += f", ended {p.completed_at}"
    return text + (f"\n    {p.error}" if p.error else "")


def _started(started: Started) -> PassReport:
    return {
        "backfill": started.backfill,
        "job": str(started.job_id),
        "force": started.force,
        "live": started.live,
    }


def _started_text(started: Started) -> str:
    if started.live:
        return f"{started.backfill}: its pass is already live, job {started.job_id}"
    again = " (forced)" if started.force else ""
    return f"{started.backfill}: queued its pass{again}, job {started.job_id}"


def _ended_text(report: PassReport) -> str:
    if report["state"] == "done":
        return (
            f"{report['backfill']}: completed, {report['rows']:,} rows in "
            f"{pages(report['pages'])} (job {report['job']})"
        )
    return f"{report['backfill']}: the pass ended {report['state']} (job {report['job']})"


def _raise_unless_done(report: PassReport) -> None:
    """A pass that did not complete ends the command with its error line."""
    if report["state"] == "done":
        return
    error = report["last_error"] or "no error was recorded"
    if error.startswith("X_"):
        raise CommandError(error)
    raise CommandError(
        f"the pass of backfill {report['backfill']!r} (job {report['job']}) ended "
        f"{report['state']}: {error}"
    )
