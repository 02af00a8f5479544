"""``--health-port``: liveness and readiness probes for the long-running commands (issue 29).

``/livez`` answers from the process alone: the role's loop is running and, for a worker, its
watchdog runs and no blocking section is past its bound. It never touches the database, so a
database outage does not get every pod restarted at once. ``/readyz`` also asks the database
(``SELECT 1``, bounded) and answers 503 once the process drains: a load balancer or an
autoscaler stops counting a pod that is on its way out.

A small ``http.server`` on a daemon thread, bound to loopback unless ``--health-host`` says
otherwise (SPEC HEALTH-01..04).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from django.core.management.base import CommandError, CommandParser

from .. import log

#: how long ``/readyz`` waits for the database to answer before it says not ready
DATABASE_BOUND = 2.0

Check = Callable[[], str | None]
#: what a role adds to ``/readyz``: a note for its reason (or None) and fields for its body
Detail = Callable[[], tuple[str | None, dict[str, Any]]]


class Health:
    """What the probes report for one role: ``wrap_run`` and ``wrap_stop`` go around the
    role's ``run`` and ``stop``; ``checks`` each return a reason the process is not live, or
    None."""

    def __init__(
        self,
        role: str,
        databases: Sequence[str],
        checks: Sequence[Check] = (),
        state: Callable[[], str] | None = None,
        detail: Detail | None = None,
    ) -> None:
        self.role, self.databases, self.checks = role, tuple(databases), tuple(checks)
        #: the role's own state, when it has one: a drain it began itself (a recycle) counts
        self.state = state
        #: what the role says beside readiness (a worker: the suspects it runs in children)
        self.detail = detail
        self._running = threading.Event()
        self.draining = threading.Event()

    def wrap_run(self, run: Callable[[], object]) -> Callable[[], Any]:
        def running() -> Any:
            self._running.set()
            try:
                return run()
            finally:
                self._running.clear()

        return running

    def wrap_stop(self, stop: Callable[[], None]) -> Callable[[], None]:
        def stopping() -> None:
            self.draining.set()  # SPEC HEALTH-03: not ready from the first signal on
            stop()

        return stopping

    def live(self) -> tuple[bool, str]:
        """SPEC HEALTH-02: from the process alone, never the database."""
        if not self._running.is_set():
            return False, f"the {self.role} loop is not running"
        for check in self.checks:
            reason = check()
            if reason is not None:
                return False, reason
        return True, "live"

    def details(self) -> tuple[str | None, dict[str, Any]]:
        """The role's note and fields for ``/readyz`` (SPEC LEASE-19); never fails a probe."""
        if self.detail is None:
            return None, {}
        try:
            return self.detail()
        except Exception:
            return None, {}

    def ready(self) -> tuple[bool, str]:
        """SPEC HEALTH-03: live, not draining, and every database answers in time."""
        live, reason = self.live()
        if not live:
            return False, reason
        if self.draining.is_set() or (self.state is not None and self.state() == "draining"):
            return False, "draining"
        for alias in self.databases:
            unreachable = _ping(alias, DATABASE_BOUND)
            if unreachable is not None:
                return False, unreachable
        return True, "ready"


def watchdog_fed(worker: Any) -> Check:
    """A worker's liveness check: its watchdog runs and no claim or settle is stuck."""

    def check() -> str | None:
        watchdog = worker.watchdog
        if watchdog is None:
            return None  # not started yet: the loop check speaks for it
        stuck = watchdog.stuck()
        if stuck is not None:
            return f"the {stuck[0]} section is blocked for {stuck[2]:.0f}s"
        # a watchdog made but not yet started (the worker still sets up its listener, which a
        # database outage can hold up) has not ended: only one that ran and stopped has
        if worker.state == "running" and watchdog.ident is not None and not watchdog.is_alive():
            return "the watchdog thread ended"
        return None

    return check


def _ping(alias: str, bound: float) -> str | None:
    """None when ``alias`` answers ``SELECT 1`` within ``bound`` seconds, else why not."""
    outcome: dict[str, Any] = {}

    def ask() -> None:
        from django.db import connections

        try:
            with connections[alias].cursor() as cursor:
                cursor.execute("SELECT 1")
                cursor.fetchone()
            outcome["ok"] = True
        except Exception as error:
            outcome["error"] = error
        finally:
            connections[alias].close()  # this thread's own connection: never left open

    thread = threading.Thread(target=ask, name="xjobs-health-db", daemon=True)
    thread.start()
    thread.join(bound)
    if outcome.get("ok"):
        return None
    if "error" in outcome:
        return f"database {alias} unreachable: {type(outcome['error']).__name__}"
    return f"database {alias} did not answer within {bound:g}s"


#: seconds a probe connection may stay silent before the server closes it: a probe sends its
#: request at once, and an idle connection held a thread for as long as its peer kept it open
IDLE_TIMEOUT = 2.0
#: probe connections served at once; one past it is closed at once rather than given a thread
MAX_CONNECTIONS = 16


class _Handler(BaseHTTPRequestHandler):
    health: Health
    # read per connection when it is set up: each blocking read on it gives up after this long
    timeout = IDLE_TIMEOUT

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/livez":
            ok, reason = self.health.live()
        elif path == "/readyz":
            ok, reason = self.health.ready()
            note, fields = self.health.details()
            body = {
                "status": "ok" if ok else "fail",
                "reason": f"{reason}; {note}" if note else reason,
            }
            self._answer(200 if ok else 503, {**body, **fields})
            return
        else:
            self._answer(404, {"status": "unknown", "paths": ["/livez", "/readyz"]})
            return
        self._answer(200 if ok else 503, {"status": "ok" if ok else "fail", "reason": reason})

    def _answer(self, code: int, body: Mapping[str, object]) -> None:
        data = json.dumps({"role": self.health.role, **body}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a probe every few seconds is no log line


class _ProbeServer(ThreadingHTTPServer):
    """A thread per connection, at most ``MAX_CONNECTIONS`` at once (issue 40: 40 idle sockets
    held 40 threads until their peers closed them); each connection's reads time out."""

    daemon_threads = True
    # the listen backlog: connections the kernel holds until accepted (socketserver's 5 made
    # a burst of probes wait on SYN retries)
    request_queue_size = 64

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)  # every slot busy: no thread for this one
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def serve(health: Health, port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """Serve ``/livez`` and ``/readyz`` on ``host:port`` from a daemon thread (0: any free
    port; the bound one is logged as ``xjobs.health.listening``). A connection that sends
    nothing for ``IDLE_TIMEOUT`` seconds is closed, and at most ``MAX_CONNECTIONS`` are served
    at once (SPEC HEALTH-06)."""
    handler = type("HealthHandler", (_Handler,), {"health": health, "timeout": IDLE_TIMEOUT})
    server = _ProbeServer((host, port), handler)
    thread = threading.Thread(target=server.serve_forever, name="xjobs-health", daemon=True)
    thread.start()
    log.event(
        logging.INFO,
        "xjobs.health.listening",
        role=health.role,
        host=host,
        port=server.server_address[1],
    )
    return server


# --- the command-line flags, shared by xjobs_worker, xjobs_relay and xjobs_scheduler ------------


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--health-port",
        type=int,
        metavar="PORT",
        help="serve /livez and /readyz on http://HOST:PORT/ (0: any free port, logged)",
    )
    parser.add_argument(
        "--health-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the address --health-port binds (default 127.0.0.1, this host only; 0.0.0.0 for "
        "a probe from outside the pod's network namespace)",
    )


def start(options: dict[str, Any], health: Health) -> ThreadingHTTPServer | None:
    """The ``--health-port`` server for ``health``; None without the flag."""
    port = options.get("health_port")
    if port is None:
        return None
    if not 0 <= port < 65536:
        raise CommandError(f"X_INVARIANT: --health-port {port} is not a TCP port (0-65535)")
    host = options.get("health_host") or "127.0.0.1"
    try:
        return serve(health, port, host)
    except OSError as error:
        raise CommandError(
            f"--health-port {port} --health-host {host}: cannot serve probes there "
            f"({error.strerror or error})"
        ) from None


def stop(server: ThreadingHTTPServer | None) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()
