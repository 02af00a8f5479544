"""``manage.py xjobs_relay``: parse arguments, wire signals, run a ``Relay`` per outbox database."""

from __future__ import annotations

import threading
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ... import conf
from ...drivers import get_driver
from ...drivers.connections import as_role, bound_connections
from ...durations import parse_command_line
from ...outbox.relay import Relay
from ...worker.preflight import preflight
from .. import health
from ..command import XJobsCommand
from ..lifecycle import run_until_signalled
from .xjobs_worker import _log_to_console


class Command(XJobsCommand):
    help = "Publish jobs staged in the transactional outbox (x_outbox) to the job store."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--database",
            action="append",
            help='outbox database alias (repeatable; default: XJOBS["OUTBOX_DATABASES"])',
        )
        parser.add_argument("--batch-size", type=int, help="rows per pass (default 100)")
        parser.add_argument("--interval", help='pause between idle passes: seconds, or "200ms"')
        parser.add_argument("--claim-lease", help='how long a claim holds rows: seconds, or "1m"')
        parser.add_argument(
            "--shutdown-timeout",
            default="30",
            help="after SIGTERM/SIGINT, exit (code 75) if the drain takes longer (default 30s)",
        )
        parser.add_argument("--relay-id", help="the name in claimed_by (default relay-<uuid>)")
        parser.add_argument(
            "--once", action="store_true", help="publish everything pending, then exit"
        )
        health.add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        _log_to_console(options["verbosity"])
        settings = conf.get()
        aliases = options["database"] or list(settings.outbox_databases)
        unknown = [a for a in aliases if a not in settings.outbox_databases]
        if unknown:
            raise CommandError(
                f"X_INVARIANT: {', '.join(unknown)} is not an outbox database — "
                f"XJOBS['OUTBOX_DATABASES'] is {list(settings.outbox_databases)}"
            )
        if options["batch_size"] is not None and not 1 <= options["batch_size"] <= conf.MAX_BATCH:
            raise CommandError(f"X_INVARIANT: --batch-size must be from 1 to {conf.MAX_BATCH:,}")
        interval = parse_command_line(options["interval"], flag="--interval")
        claim_lease = parse_command_line(options["claim_lease"], flag="--claim-lease")
        shutdown = parse_command_line(options["shutdown_timeout"], flag="--shutdown-timeout")
        bound_connections([settings.database, *aliases])
        preflight(settings)
        relays = []
        for alias in aliases:
            preflight(settings, database=alias, table="x_outbox")
            store = get_driver().outbox(alias, claim_lease=claim_lease)
            relays.append(
                Relay(
                    store=store,
                    batch_size=options["batch_size"],
                    interval=interval,
                    relay_id=options["relay_id"],
                    database=alias,
                )
            )
        if options["once"]:
            total = sum(_drain(relay) for relay in relays)
            self.stdout.write(f"published {total}")
            return
        threads = [
            threading.Thread(target=as_role(r.run), name=f"xjobs-relay-{r.database}")
            for r in relays
        ]

        def run_all() -> None:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

        def stop_all() -> None:
            for relay in relays:
                relay.stop()

        probes = health.Health("relay", list(dict.fromkeys([settings.database, *aliases])))
        server = health.start(options, probes)
        try:
            run_until_signalled(
                "xjobs.relay", probes.wrap_run(run_all), probes.wrap_stop(stop_all), shutdown
            )
        finally:
            health.stop(server)
        self.stdout.write(f"relay stopped: published {sum(r.published for r in relays)}")


def _drain(relay: Relay) -> int:
    total = 0
    while True:
        done = relay.tick()
        total += done
        if done < relay.batch_size:
            return total
