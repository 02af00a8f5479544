"""``manage.py xjobs_scheduler``: parse arguments, wire signals, run a ``Scheduler``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ... import conf, tasks
from ...errors import XJobsError
from ...scheduler.role import Scheduler
from ...worker.preflight import preflight
from ..lifecycle import run_until_signalled
from .xjobs_worker import _duration, _log_to_console


class Command(BaseCommand):
    help = "Dispatch cron tasks: one leader across all schedulers fires each occurrence once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tick-interval", help='pause between rounds (default "1s")')
        parser.add_argument("--leader-ttl", help='leadership lease (default "30s")')
        parser.add_argument("--holder", help="this scheduler's name (default scheduler-<uuid>)")

    def handle(self, *args: Any, **options: Any) -> None:
        _log_to_console(options["verbosity"])
        try:
            tick = _duration(options["tick_interval"], "--tick-interval") or 1.0
            ttl = _duration(options["leader_ttl"], "--leader-ttl") or 30.0
            preflight(conf.get(), table="x_scheduler_state")
        except XJobsError as error:
            raise CommandError(str(error)) from None
        if ttl < 2 * tick:
            raise CommandError(
                "X_INVARIANT: --leader-ttl must be at least two ticks, or leadership lapses between rounds"
            )
        if not tasks.registered_tasks():
            self.stderr.write("no tasks are declared; the scheduler will idle")
        scheduler = Scheduler(tick_interval=tick, leader_ttl=ttl, holder=options["holder"])
        run_until_signalled("xjobs.scheduler", scheduler.run, scheduler.stop)
        self.stdout.write(f"scheduler {scheduler.holder} stopped")
