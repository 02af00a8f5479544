"""``manage.py xjobs_worker``: parse arguments, wire signals, run a ``Worker``."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ... import conf, log, metrics
from ...conf.concurrency import parse_concurrency
from ...declarations import registry
from ...drivers.connections import as_role, bound_connections
from ...durations import parse_command_line
from ...metrics import shared as metrics_shared
from ...text import did_you_mean
from ...worker.heap import settle_heap
from ...worker.pools import shares_for
from ...worker.preflight import preflight
from ...worker.recycle import ChildLimits, Recycler, parse_size
from ...worker.supervisor import Supervisor, child_argv, rerun_argv
from ...worker.worker import Worker
from .. import health
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
            "--concurrency",
            metavar="N|QUEUE=N,...",
            help="threads running jobs: one pool every queue shares, or threads per queue "
            '("default=8,emails=2") (default: XJOBS["CONCURRENCY"])',
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
            help="serve Prometheus metrics on http://HOST:PORT/ (needs django-xjobs[metrics])",
        )
        parser.add_argument(
            "--metrics-host",
            default="127.0.0.1",
            metavar="HOST",
            help="the address --metrics-port binds (default 127.0.0.1, this host only; "
            "0.0.0.0 for every interface)",
        )
        parser.add_argument(
            "--processes",
            type=int,
            metavar="N",
            help="run N child worker processes with these options and replace any that ends",
        )
        parser.add_argument(
            "--max-jobs-per-child",
            type=int,
            metavar="N",
            help="a child drains and is replaced after N runs",
        )
        parser.add_argument(
            "--max-memory-per-child",
            metavar="SIZE",
            help='a child drains and is replaced above this resident memory ("300MB")',
        )
        parser.add_argument(
            "--max-abandoned-per-child",
            type=int,
            metavar="N",
            help="a child drains and is replaced once more than N timed-out bodies still run",
        )
        parser.add_argument(
            "--recycle-abandoned-after",
            metavar="D|off",
            help="drain and start afresh once bodies past their timeout have held half a pool's "
            'threads this long (default: XJOBS["ABANDONED_RECYCLE_AFTER"], 10s)',
        )
        health.add_arguments(parser)
        # set by the supervisor on its children: a child whose supervisor is gone drains
        parser.add_argument("--supervisor-pid", type=int, help=argparse.SUPPRESS)

    def handle(self, *args: Any, **options: Any) -> None:
        _log_to_console(options["verbosity"])
        settings = conf.get()
        known = registry.known_queues(settings.queues)
        concurrency = options["concurrency"]
        if concurrency is not None:
            concurrency = parse_concurrency(concurrency, field="--concurrency")
        pools = settings.concurrency if concurrency is None else concurrency
        if options["queues"] is None and not isinstance(pools, int):
            # threads per queue name the queues this worker works, unless --queues does
            queues = _parse_queues(",".join(pools), known)
        else:
            queues = _parse_queues(options["queues"], known)
        if isinstance(concurrency, dict):  # refused here, not in each --processes child
            shares_for(queues, concurrency, strict=True)
        visibility = parse_command_line(options["visibility_timeout"], flag="--visibility-timeout")
        poll = parse_command_line(options["poll_interval"], flag="--poll-interval")
        shutdown = parse_command_line(options["shutdown_timeout"], flag="--shutdown-timeout")
        stall = parse_command_line(options["stall_timeout"], flag="--stall-timeout")
        limits = _child_limits(options, settings)
        processes = options["processes"]
        if processes is not None and options["supervisor_pid"] is None:
            self._supervise(processes, options)  # holds no database connection
            return
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
        server = _metrics_server(options["metrics_port"], options["metrics_host"])
        probes = health.Health(
            "worker",
            [settings.database],
            [health.watchdog_fed(worker)],
            state=lambda: worker.state,
            detail=worker.readiness,
        )
        probe_server = health.start(options, probes)
        publisher = metrics_shared.publisher()  # a child of a supervisor that serves metrics
        companions = _companions(options, settings)
        for _, thread in companions:
            thread.start()
        recycler = None
        if limits.any or options["supervisor_pid"] is not None:
            recycler = Recycler(worker, limits, supervisor_pid=options["supervisor_pid"])
            recycler.start()
        _carry_recycles()
        settle_heap()  # everything the process holds by now lives until it exits
        signals: list[int] = []
        try:
            stats = run_until_signalled(
                "xjobs.worker",
                probes.wrap_run(worker.run),
                probes.wrap_stop(worker.stop),
                shutdown,
                exiting=worker.exiting,
                received=signals,
            )
        finally:
            if recycler is not None:
                recycler.stop()
            for role, thread in companions:
                role.stop()
                thread.join()
            if server is not None:
                server.shutdown()
                server.server_close()
            health.stop(probe_server)
            if publisher is not None:
                publisher.stop()
        summary = ", ".join(f"{k} {v}" for k, v in sorted(stats.outcomes.items())) or "no jobs"
        self.stdout.write(f"worker {stats.worker_id} stopped: {summary}")
        if recycler is not None and recycler.reason:
            if recycler.reason == "abandoned_held" and not signals:
                _start_afresh(options["supervisor_pid"] is None)
            sys.exit(recycler.exit_code)  # the supervisor reads the reason from the code

    def _supervise(self, processes: int, options: dict[str, Any]) -> None:
        if processes < 1:
            raise CommandError("X_INVARIANT: --processes must be at least 1")
        if options["health_port"] is not None:
            raise CommandError(
                "X_INVARIANT: --health-port cannot be shared by --processes children — run one "
                "worker per container and probe each"
            )
        if "xjobs_worker" not in sys.argv[1:3]:  # call_command(): no command line to re-run
            raise CommandError(
                "X_INVARIANT: --processes re-runs this command line, and this process was not "
                "started as `manage.py xjobs_worker` — run it from the shell or a process manager"
            )
        # The line was checked above. The supervisor opens no database connection: a child that
        # cannot reach the database exits, and is restarted after a growing pause.
        shutdown = options.get("shutdown_timeout")  # the worker's drain bound, when it has one
        if isinstance(shutdown, str):
            shutdown = parse_command_line(shutdown, flag="--shutdown-timeout")
        supervisor = Supervisor(
            child_argv(rerun_argv(sys.argv)),
            processes,
            worker_id=options["worker_id"],
            shutdown_timeout=shutdown if shutdown is not None else 30.0,
        )
        # one endpoint for every child: they write their numbers to files the scrape adds up
        shared = _shared_metrics(options["metrics_port"], options["metrics_host"])
        try:
            code = supervisor.run()
        finally:
            if shared is not None:
                server, directory = shared
                if server is not None:
                    server.shutdown()
                    server.server_close()
                shutil.rmtree(directory, ignore_errors=True)
        if code:
            sys.exit(code)


#: how many times this worker replaced its own process image: the recycles counter goes on
#: from there, so a scrape after the restart still sees them
_RECYCLES_ENV = "XJOBS_WORKER_RECYCLES"


def _start_afresh(unsupervised: bool) -> None:
    """Issue 25 item 3: bodies past their timeout held this worker's threads too long, and only
    the end of the process ends them. Run from a command line with no supervisor, the worker
    replaces its own process image with the same command line (same pid: a process manager sees
    no exit, and one that is not there is not needed); the drain has handed back or settled every
    other run. A supervised child, or one started by ``call_command``, exits with code 85."""
    if not unsupervised or "xjobs_worker" not in sys.argv[1:3]:
        return
    argv = [sys.executable, *rerun_argv(sys.argv)]
    count = int(os.environ.get(_RECYCLES_ENV, "0")) + 1
    log.event(logging.WARNING, "xjobs.worker.restarting", pid=os.getpid(), recycles=count)
    for handler in (*logging.getLogger("django_xjobs").handlers, *logging.getLogger().handlers):
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, {**os.environ, _RECYCLES_ENV: str(count)})


def _carry_recycles() -> None:
    carried = os.environ.get(_RECYCLES_ENV)
    if carried and carried.isdigit():
        metrics.inc("xjobs_worker_recycles_total", int(carried), reason="abandoned_held")


def _child_limits(options: dict[str, Any], settings: Any) -> ChildLimits:
    """The ``--max-*-per-child`` flags and the recycle bound, checked before anything starts."""
    for flag in ("max_jobs_per_child", "max_abandoned_per_child"):
        value = options[flag]
        least = 1 if flag == "max_jobs_per_child" else 0
        if value is not None and value < least:
            name = "--" + flag.replace("_", "-")
            raise CommandError(f"X_INVARIANT: {name} must be at least {least}")
    memory = options["max_memory_per_child"]
    max_memory = parse_size(memory, flag="--max-memory-per-child") if memory else None
    held = options["recycle_abandoned_after"]
    if held is None:
        held_for = settings.abandoned_recycle_after
    elif held.strip().lower() == "off":
        held_for = None
    else:
        held_for = parse_command_line(held, flag="--recycle-abandoned-after")
    return ChildLimits(
        max_jobs=options["max_jobs_per_child"],
        max_memory=max_memory,
        max_abandoned=options["max_abandoned_per_child"],
        abandoned_held_for=held_for,
    )


def _shared_metrics(port: int | None, host: str) -> tuple[Any, str] | None:
    """``--processes N --metrics-port P``: the supervisor serves P for all its children, which
    find the directory to write to in their environment (metrics/shared.py)."""
    if port is None:
        return None
    directory = tempfile.mkdtemp(prefix="xjobs-metrics-")
    os.environ[metrics_shared.ENV] = directory  # the children inherit it
    collector = metrics_shared.SharedCollector(Path(directory))
    return _metrics_server(port, host, collector=collector), directory


def _metrics_server(port: int | None, host: str = "127.0.0.1", *, collector: Any = None) -> Any:
    """Start the ``--metrics-port`` endpoint on its own thread; ``None`` without the flag.
    Loopback by default: the metrics name queues and jobs, not for every network to read."""
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
        if collector is None:
            registry = metrics.registry(close_connections=True)
        else:
            registry = prometheus_client.CollectorRegistry()
            registry.register(collector)
        started = prometheus_client.start_http_server(port, addr=host, registry=registry)
    except OSError as error:
        raise CommandError(
            f"--metrics-port {port} --metrics-host {host}: cannot serve metrics there "
            f"({error.strerror or error})"
        ) from None
    return started[0] if isinstance(started, tuple) else None  # (server, thread) since 0.20


def _companions(options: Mapping[str, object], settings: Any) -> list[tuple[Any, threading.Thread]]:
    """The scheduler and relay a small deployment runs inside its worker process."""
    roles: list[Any] = []
    if options["with_scheduler"]:
        from ...scheduler.role import Scheduler

        roles.append(Scheduler())
    if options["with_relay"]:
        from ...drivers import get_driver
        from ...outbox.relay import Relay

        for alias in settings.outbox_databases:
            roles.append(Relay(store=get_driver().outbox(alias), database=alias))
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
        guesses = [f"{q!r}: {guess}" for q in unknown if (guess := did_you_mean(q, known))]
        raise CommandError(
            f"X_QUEUE_UNKNOWN: no job declares queue(s) {', '.join(unknown)} — "
            + "".join(f"{g}; " for g in guesses)
            + f"known queues: {', '.join(sorted(known))}; declare it with job(queue=...) or "
            'list it in XJOBS["QUEUES"]'
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
    _one_line_per_task_event()


def _one_line_per_task_event() -> None:
    """Django 6 logs each task's start and end on ``django.tasks``, which its default logging
    prints through the ``django`` console (with DEBUG on); the worker's own events tell the
    same runs, so every task event printed twice (issue 23). With no logging of the project's
    own, the worker's console is the one that speaks; the backport (``django_tasks``) is silent
    by default already. A project that configures logging decides for itself."""
    from ...declarations.registry import tasks_api

    name = tasks_api()  # its logger is named after its module in both
    tasks_logger = logging.getLogger(name) if name else None
    if tasks_logger is not None and not tasks_logger.handlers:
        tasks_logger.addHandler(logging.NullHandler())  # not Python's last-resort handler
        tasks_logger.propagate = False
