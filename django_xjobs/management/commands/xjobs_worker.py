"""``manage.py xjobs_worker``: parse arguments, wire signals, run a ``Worker``."""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ... import conf, registry
from ...connections import as_role, bound_connections
from ...durations import parse_command_line
from ...worker.preflight import preflight
from ...worker.worker import Worker
from ..command import XJobsCommand
from ..lifecycle import run_until_signalled


class Command(XJobsCommand):
    help = "Run jobs: claim due jobs from the given queues and run them on a pool of threads."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queues",
            help="comma-separated queue names (default: every queue a registered job declares)",
        )
        parser.add_argument(
            "--concurrency", type=int, help='threads running jobs (default: XJOBS["CONCURRENCY"])'
        )
        parser.add_argument(
            "--burst", action="store_true", help="run what is due, then exit once idle"
        )
        parser.add_argument("--visibility-timeout", help='lease length: seconds, or "30s", "5m"')
        parser.add_argument("--poll-interval", help='idle re-check interval: seconds, or "500ms"')
        parser.add_argument("--worker-id", help="name in claimed_by (default: worker-<uuid>)")
        parser.add_argument(
            "--with-scheduler",
            action="store_true",
            help="also run a scheduler in this process (leadership still picks one dispatcher)",
        )
        parser.add_argument(
            "--with-relay", action="store_true", help="also run the outbox relay in this process"
        )
        parser.add_argument(
            "--shutdown-timeout",
            default="30",
            help="after SIGTERM/SIGINT, exit (code 75) if the drain takes longer (default 30s)",
        )
        parser.add_argument(
            "--stall-timeout",
            help="exit (code 70) when a claim or a settle blocks this long "
            '(default: XJOBS["STALL_TIMEOUT"])',
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            metavar="PORT",
            help="serve Prometheus metrics on http://0.0.0.0:PORT/ (needs django-xjobs[metrics])",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        _log_to_console(options["verbosity"])
        settings = conf.get()
        known = registry.known_queues(settings.queues)
        queues = _parse_queues(options["queues"], known)
        concurrency = options["concurrency"]
        if concurrency is not None and concurrency < 1:
            raise CommandError("X_INVARIANT: --concurrency must be at least 1")
        visibility = parse_command_line(options["visibility_timeout"], flag="--visibility-timeout")
        poll = parse_command_line(options["poll_interval"], flag="--poll-interval")
        shutdown = parse_command_line(options["shutdown_timeout"], flag="--shutdown-timeout")
        stall = parse_command_line(options["stall_timeout"], flag="--stall-timeout")
        bound_connections([settings.database, *settings.outbox_databases])
        preflight(settings)
        worker = Worker(
            queues=queues,
            concurrency=concurrency,
            visibility_timeout=visibility,
            poll_interval=poll,
            worker_id=options["worker_id"],
            burst=options["burst"],
            stall_timeout=stall,
        )
        server = _metrics_server(options["metrics_port"])
        companions = _companions(options, settings)
        for _, thread in companions:
            thread.start()
        try:
            stats = run_until_signalled("xjobs.worker", worker.run, worker.stop, shutdown)
        finally:
            for role, thread in companions:
                role.stop()
                thread.join()
            if server is not None:
                server.shutdown()
                server.server_close()
        summary = ", ".join(f"{k} {v}" for k, v in sorted(stats.outcomes.items())) or "no jobs"
        self.stdout.write(f"worker {stats.worker_id} stopped: {summary}")


def _metrics_server(port: int | None) -> Any:
    """Start the ``--metrics-port`` endpoint on its own thread; ``None`` without the flag."""
    if port is None:
        return None
    if not 0 < port < 65536:
        raise CommandError(f"X_INVARIANT: --metrics-port {port} is not a TCP port (1-65535)")
    from ... import metrics

    try:
        import prometheus_client
    except ImportError:
        raise CommandError(f"--metrics-port: {metrics.MISSING}") from None
    try:
        # each scrape is served on a fresh thread: close its database connection after the read
        started = prometheus_client.start_http_server(
            port, registry=metrics.registry(close_connections=True)
        )
    except OSError as error:
        raise CommandError(
            f"--metrics-port {port}: cannot serve metrics there ({error.strerror or error})"
        ) from None
    return started[0] if isinstance(started, tuple) else None  # (server, thread) since 0.20


def _companions(options: dict[str, Any], settings: Any) -> list[tuple[Any, threading.Thread]]:
    """The scheduler and relay a small deployment runs inside its worker process."""
    roles: list[Any] = []
    if options["with_scheduler"]:
        from ...scheduler.role import Scheduler

        roles.append(Scheduler())
    if options["with_relay"]:
        from ...outbox.postgres import PostgresOutboxStore
        from ...outbox.relay import Relay

        for alias in settings.outbox_databases:
            roles.append(Relay(store=PostgresOutboxStore(alias), database=alias))
    return [
        (role, threading.Thread(target=as_role(role.run), name=type(role).__name__))
        for role in roles
    ]


def _parse_queues(raw: str | None, known: set[str]) -> list[str]:
    if raw is None:
        return sorted(known)
    queues = [q.strip() for q in raw.split(",") if q.strip()]
    if not queues:
        raise CommandError("X_INVARIANT: --queues is empty — name at least one queue")
    unknown = [q for q in queues if q not in known]
    if unknown:
        raise CommandError(
            f"X_QUEUE_UNKNOWN: no job declares queue(s) {', '.join(unknown)} — known queues: "
            f"{', '.join(sorted(known))}; declare it with job(queue=...) or list it in "
            'XJOBS["QUEUES"]'
        )
    return queues


def _log_to_console(verbosity: int) -> None:
    """Show the worker's events on stderr unless the project configured django_xjobs logging."""
    logger = logging.getLogger("django_xjobs")
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel({0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG))
