"""A suspect's run in a child process (issue 39 item 2; SPEC LEASE-17/19).

Every run a dead worker held died with it, and nothing says which one killed it: each comes back
marked (``ClaimedJob.died_with``), and a run that died alone before comes back counted
(``lease_expiries``). Such a suspect runs alone, in a child process this worker starts for it, on
the pool thread that took it: the worker's other threads keep claiming and running every queue,
and a death in the child is the suspect's own, seen by the worker that watched it.

The worker keeps the run: its lease, its slot and its settle. The child only runs the body (its
steps and progress are fenced on the same lease token) and sends back the execution it ended
with; a stop the worker decides (a lost lease, a cancel) is sent to the child's signal. A child
that dies once its body started, without an answer, is the run's crash: counted, and the job is
dead-lettered at ``MAX_LEASE_EXPIRIES`` (``run.verdicts.crashed_alone``). A child that cannot
start, or dies before its body starts, says nothing about the job: the run goes back unstarted.

The child is a fresh interpreter started with this one's executable, ``sys.path`` and
environment, never a fork of this threaded process (nor ``multiprocessing``'s spawn, which runs
the parent's main script again in the child, and a worker started from a script without a
``__main__`` guard would start itself again). It sets Django up from the same settings module,
on the databases this process uses, logs to the same stderr, and talks to its worker over a
socket pair (``multiprocessing.connection``). It ignores SIGINT and SIGTERM (its worker decides
when the run stops) and exits when its worker's end closes, so it never outlives its worker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from typing import Any, cast

from .. import log, metrics
from ..errors import XJobsError
from ..run.execution import Execution
from ..run.verdicts import crashed_alone, failure, stopped
from .run import Run

#: the gauge of runs this process has in children now (docs/reference/metrics.md)
GAUGE = "xjobs_worker_isolated_runs"
#: how often the watching thread looks at its child, its signal and the clock
_LOOK = 0.1
#: how long a child may take to set Django up before it counts as unable to start
_START_BOUND = 120.0
#: the exit code of a child whose worker went away (its pipe closed)
EXIT_ORPHANED = 86


@dataclass
class Child:
    """One run in a child process, as ``/readyz`` and the logs name it."""

    run: Run
    process: Any
    since: float = field(default_factory=time.monotonic)
    pid: int | None = None

    def describe(self) -> dict[str, Any]:
        job = self.run.job
        return {
            "job": job.name,
            "id": str(job.id),
            "attempt": job.attempt,
            "pid": self.pid,
            "seconds": round(time.monotonic() - self.since, 1),
        }


class Isolation:
    """Runs suspects in child processes for one worker; ``running()`` lists them."""

    def __init__(self, *, worker_id: str, visibility_timeout: float) -> None:
        self.worker_id = worker_id
        #: a run told to stop whose child has not ended by then is killed
        self.stop_grace = max(1.0, visibility_timeout / 3)
        self._lock = threading.Lock()
        self._children: dict[Any, Child] = {}

    def running(self) -> list[dict[str, Any]]:
        with self._lock:
            return [child.describe() for child in self._children.values()]

    def readiness(self) -> tuple[str | None, dict[str, Any]]:
        """What ``/readyz`` adds for the worker (SPEC LEASE-19): the suspects it runs alone in
        child processes now, beside its other runs, which it keeps claiming."""
        isolated = self.running()
        if not isolated:
            return None, {"isolated": []}
        names = ", ".join(f"{c['job']} {c['id'][:8]} (pid {c['pid']})" for c in isolated)
        runs = "run" if len(isolated) == 1 else "runs"
        return f"{len(isolated)} suspect {runs} alone in a child process: {names}", {
            "isolated": isolated
        }

    def run(self, run: Run) -> Execution | None:
        """Run ``run``'s body in a child process until it answers; None when no child got as
        far as its body (it could not start, or died setting up): the run is unstarted."""
        job = run.job
        mine, theirs = socket.socketpair()
        ours = Connection(mine.detach())
        fd = theirs.detach()
        process: subprocess.Popen[bytes] | None = None
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _ENTRY, str(fd)],
                pass_fds=(fd,),
                env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
                stdin=subprocess.DEVNULL,
            )
            ours.send(_payload(run))
        except Exception as error:
            _cannot_start(self.worker_id, run, error)
            ours.close()
            if process is not None:
                process.kill()
                process.wait()
            return None
        finally:
            os.close(fd)  # the child's end: ours reads EOF once the child is gone
        child = Child(run, process, pid=process.pid)
        reason = {"died_with": job.died_with, "crashes": job.lease_expiries}
        with self._lock:
            self._children[job.lease_token] = child
        metrics.gauge_add(GAUGE, 1)
        log.event(
            logging.INFO,
            "xjobs.worker.isolating",
            worker=self.worker_id,
            job=job.name,
            id=job.id,
            attempt=job.attempt,
            pid=process.pid,
            **{k: v for k, v in reason.items() if v},
        )
        try:
            return self._watch(child, ours)
        finally:
            with self._lock:
                self._children.pop(job.lease_token, None)
            metrics.gauge_add(GAUGE, -1)
            ours.close()  # the child exits on its own once it answered, or on this EOF
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()  # never left behind
                process.wait()

    def _watch(self, child: Child, pipe: Connection) -> Execution | None:
        run, process = child.run, child.process
        job, handle = run.job, run.handle
        began = time.monotonic()
        started: float | None = None
        told, kill_at, killed = False, None, None  # killed: why this worker ended the child
        while True:
            ready = wait([pipe], timeout=_LOOK)
            if pipe in ready:
                try:
                    kind, value = pipe.recv()
                except (EOFError, OSError):
                    kind, value = "gone", None
                if kind == "started":
                    started = time.monotonic()
                    continue
                if kind == "ended":
                    return cast(Execution | None, value)  # "ended" carries the child's outcome
                if kind == "error":  # the body ended, and its execution could not be sent
                    return failure(job, XJobsError(value), time.monotonic() - began, handle=handle)
            if process.poll() is not None or (pipe in ready and kind == "gone"):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=5)
                break
            now = time.monotonic()
            if started is None and now - began > _START_BOUND:
                process.kill()
                killed = "start"
            if run.signal.is_set() and not told:
                told, kill_at = True, now + self.stop_grace
                with contextlib.suppress(Exception):
                    pipe.send(("stop", _reason(run.signal.reason)))
            timeout = None if handle is None else handle.timeout
            if (
                started is not None
                and timeout is not None
                and now - started > timeout + self.stop_grace
            ):
                process.kill()  # past its timeout and deaf to its signal: a child can be ended
                killed = killed or "timeout"
            if kill_at is not None and now > kill_at and killed is None:
                process.kill()
                killed = "stopped"
        duration = time.monotonic() - began
        code = process.returncode
        if started is None or killed == "start":
            _cannot_start(self.worker_id, run, f"the child {_how(code)} before its body began")
            return None
        if killed == "timeout":
            return failure(job, _timeout(job.name, timeout), duration, handle=handle)
        if killed == "stopped" or run.signal.is_set():
            return stopped(job, run.signal.reason, duration, handle=handle)
        return crashed_alone(job, handle, _how(code), duration)


#: what says where a database is: the child connects where this process does
_WHERE = ("NAME", "HOST", "PORT", "USER", "PASSWORD")


def _payload(run: Run) -> dict[str, Any]:
    """What the child needs: the claimed job, and where this process's databases are (a test
    run's are renamed, and its server chosen, at run time: the settings module does not say)."""
    from django.db import connections

    return {
        "job": run.job,
        "databases": {
            alias: {key: connections[alias].settings_dict.get(key) for key in _WHERE}
            for alias in connections
        },
        "log_level": logging.getLogger("django_xjobs").getEffectiveLevel(),
        "worker_id": run.worker_id,
    }


def _reason(reason: BaseException | None) -> tuple[str, str]:
    """A stop reason as the child can rebuild it: its class name and its message."""
    if reason is None:
        return ("JobAbortedError", "the run was stopped")
    return (type(reason).__name__, getattr(reason, "message", str(reason)))


def _how(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _timeout(name: str, timeout: float | None) -> BaseException:
    from ..durations import format_seconds
    from ..errors import JobTimeoutError

    return JobTimeoutError(
        f"job {name!r} passed its timeout of {format_seconds(timeout or 0.0)}",
        hint="the body was told to stop (ctx.signal); make it faster or raise timeout=",
    )


def _cannot_start(worker_id: str, run: Run, error: object) -> None:
    log.event(
        logging.ERROR,
        "xjobs.worker.isolation_failed",
        worker=worker_id,
        job=run.job.name,
        id=run.job.id,
        error=error,
        hint="a suspect runs in a child process: this interpreter, started with the worker's "
        "DJANGO_SETTINGS_MODULE and sys.path, must set Django up on its own; the job goes back "
        "unstarted",
    )


# --- the child ------------------------------------------------------------------------------

#: what the child's interpreter runs: this module's ``child_main``, its socket's fd in argv
_ENTRY = "import sys; from django_xjobs.worker.isolation import child_main; child_main(sys.argv[1])"


def child_main(fd: str) -> None:
    """The child's whole life: read its run, set Django up, run the body once, send back how
    it ended, exit."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # its worker decides when the run stops
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pipe = Connection(int(fd))
    try:
        payload = pipe.recv()
    except (EOFError, OSError):
        _exit(EXIT_ORPHANED)
    import django

    django.setup()
    from django.db import connections

    for alias, where in payload["databases"].items():
        if alias in connections:
            connections[alias].settings_dict.update(where)
    _log_to_console(payload["log_level"])

    from .. import errors
    from ..clock import system_clock
    from ..declarations import registry
    from ..drivers import get_driver
    from ..run.execute import execute
    from ..run.stop import StopSignal

    job = payload["job"]
    stop = StopSignal()

    def listen() -> None:
        while True:
            try:
                kind, value = pipe.recv()
            except (EOFError, OSError):
                _exit(EXIT_ORPHANED)  # its worker is gone: so is the run
            if kind == "stop":
                name, message = value
                cause = getattr(errors, name, errors.JobAbortedError)
                stop.abort(cause(message, hint=""))

    threading.Thread(target=listen, name="xjobs-isolated-stop", daemon=True).start()
    handle = registry.get_job(job.name)
    pipe.send(("started", os.getpid()))
    execution = execute(job, stop, driver=get_driver(), clock=system_clock, handle=handle)
    try:
        pipe.send(("ended", replace(execution, abandoned=None)))
    except Exception as error:  # a value that does not travel: the worker fails the attempt
        with contextlib.suppress(Exception):
            pipe.send(("error", f"the run's result could not be sent back: {error}"))
    with contextlib.suppress(Exception):
        connections.close_all()
    _exit(0)  # a body left past its timeout ends here, with its process


def _log_to_console(level: int) -> None:
    """The worker's own console logging, unless the project configured django_xjobs logging."""
    logger = logging.getLogger("django_xjobs")
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)


def _exit(code: int) -> None:
    for handler in logging.getLogger("django_xjobs").handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    os._exit(code)
