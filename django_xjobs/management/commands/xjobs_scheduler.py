"""``manage.py xjobs_scheduler``: parse arguments, wire signals, run a ``Scheduler``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ... import conf
from ...declarations.cron import registered_crons
from ...drivers.connections import as_role, bound_connections
from ...durations import parse_command_line
from ...scheduler.role import Scheduler
from ...worker.preflight import preflight
from .. import health
from ..command import XJobsCommand
from ..lifecycle import run_until_signalled
from .xjobs_worker import _log_to_console


class Command(XJobsCommand):
    help = "Dispatch crons: one leader across all schedulers fires each occurrence once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--tick-interval", help='pause between rounds: seconds, or "500ms" (default 1)'
        )
        parser.add_argument("--leader-ttl", help='leadership lease: seconds, or "1m" (default 30)')
        parser.add_argument(
            "--shutdown-timeout",
            default="30",
            help="after SIGTERM/SIGINT, exit (code 75) if the drain takes longer (default 30s)",
        )
        parser.add_argument("--holder", help="this scheduler's name (default scheduler-<uuid>)")
        health.add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        _log_to_console(options["verbosity"])
        tick = parse_command_line(options["tick_interval"], flag="--tick-interval") or 1.0
        ttl = parse_command_line(options["leader_ttl"], flag="--leader-ttl") or 30.0
        shutdown = parse_command_line(options["shutdown_timeout"], flag="--shutdown-timeout")
        bound_connections([conf.get().database])
        preflight(conf.get(), table="x_scheduler_state")
        if ttl < 2 * tick:
            raise CommandError(
                "X_INVARIANT: --leader-ttl must be at least two ticks, or leadership lapses between rounds"
            )
        if not registered_crons():
            self.stderr.write(
                "no cron is declared (@cron in an installed app's jobs.py); the scheduler will idle"
            )
        scheduler = Scheduler(tick_interval=tick, leader_ttl=ttl, holder=options["holder"])
        probes = health.Health("scheduler", [conf.get().database], state=lambda: scheduler.state)
        server = health.start(options, probes)
        try:
            run_until_signalled(
                "xjobs.scheduler",
                probes.wrap_run(as_role(scheduler.run)),
                probes.wrap_stop(scheduler.stop),
                shutdown,
            )
        finally:
            health.stop(server)
        self.stdout.write(f"scheduler {scheduler.holder} stopped")
