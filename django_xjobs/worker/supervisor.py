"""``xjobs_worker --processes N``: keep N child worker processes running, replace the ones that
end, and drain them all on SIGTERM. The supervisor itself holds no database connection."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from .. import log
from .recycle import EXIT_CODES, REASONS

#: a child that dies sooner than this after its start is restarted after a growing pause
_QUICK_DEATH = 5.0
_RESTART_BACKOFF = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
#: on top of the children's own shutdown bound before the supervisor SIGKILLs the stragglers
_KILL_GRACE = 5.0
_TICK = 0.1


@dataclass
class Child:
    slot: int
    proc: subprocess.Popen[bytes]
    worker_id: str | None
    started: float = field(default_factory=time.monotonic)


def exit_reason(code: int) -> str:
    """What a child's exit code says about why it ended."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    if code in REASONS:
        return REASONS[code]
    return "drained" if code == 0 else f"exited with code {code}"


class Supervisor:
    """Runs ``argv`` (a worker command line without ``--processes``) ``processes`` times.

    * A child that ends while the supervisor runs is replaced at once (after a growing pause if
      it keeps dying at start), and ``xjobs.supervisor.replaced`` says why.
    * SIGTERM/SIGINT is forwarded to every child, which drains; past ``shutdown_timeout`` plus a
      grace the stragglers are SIGKILLed, leaving their runs to their leases.
    """

    def __init__(
        self,
        argv: Sequence[str],
        processes: int,
        *,
        worker_id: str | None = None,
        shutdown_timeout: float = 30.0,
    ) -> None:
        self.argv = list(argv)
        self.processes = processes
        self.worker_id = worker_id
        self.shutdown_timeout = shutdown_timeout
        self.children: dict[int, Child] = {}
        self._spawned = 0
        self._quick_deaths: dict[int, int] = {}
        self._restart_at: dict[int, float] = {}
        self._signals: list[int] = []

    def run(self) -> int:
        """Supervise until signalled; the exit code is 0 when every child drained cleanly."""
        previous = {
            sig: signal.signal(sig, lambda signum, frame: self._signals.append(signum))
            for sig in (signal.SIGTERM, signal.SIGINT)
        }
        log.event(
            logging.INFO, "xjobs.supervisor.started", pid=os.getpid(), processes=self.processes
        )
        try:
            for slot in range(self.processes):
                self._spawn(slot)
            while not self._signals:
                self._replace_ended()
                time.sleep(_TICK)
            return self._shutdown()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    # --- children ---------------------------------------------------------------------------

    def _spawn(self, slot: int) -> Child:
        self._spawned += 1
        argv = [*self.argv, "--supervisor-pid", str(os.getpid())]
        worker_id = f"{self.worker_id}-{self._spawned}" if self.worker_id else None
        if worker_id:
            argv += ["--worker-id", worker_id]
        proc = subprocess.Popen([sys.executable, *argv])
        child = Child(slot, proc, worker_id)
        self.children[slot] = child
        log.event(
            logging.INFO, "xjobs.supervisor.spawned", slot=slot, pid=proc.pid, worker=worker_id
        )
        return child

    def _replace_ended(self) -> None:
        now = time.monotonic()
        for slot in range(self.processes):
            child = self.children.get(slot)
            if child is None:
                if now >= self._restart_at.get(slot, 0.0):
                    self._spawn(slot)
                continue
            code = child.proc.poll()
            if code is None:
                continue
            del self.children[slot]
            # a child that keeps ending at start (no database, a memory limit below its
            # baseline) is restarted after a growing pause; a fast max_jobs recycle is not that
            quick = now - child.started < _QUICK_DEATH and code != EXIT_CODES["max_jobs"]
            deaths = self._quick_deaths[slot] = self._quick_deaths.get(slot, 0) + 1 if quick else 0
            pause = _RESTART_BACKOFF[min(deaths, len(_RESTART_BACKOFF)) - 1] if deaths else 0.0
            log.event(
                logging.INFO if code in REASONS else logging.WARNING,
                "xjobs.supervisor.replaced",
                slot=slot,
                pid=child.proc.pid,
                code=code,
                reason=exit_reason(code),
                restart_in=pause or None,
            )
            self._restart_at[slot] = now + pause
            if not pause:
                self._spawn(slot)

    def _shutdown(self) -> int:
        signame = signal.Signals(self._signals[0]).name
        log.event(
            logging.INFO, "xjobs.supervisor.signal", signal=signame, children=len(self.children)
        )
        forwarded = 0
        deadline = time.monotonic() + self.shutdown_timeout + _KILL_GRACE
        clean = True
        while self.children:
            for _ in range(forwarded, len(self._signals)):  # a second signal is passed on too
                for child in self.children.values():
                    child.proc.send_signal(signal.SIGTERM)
            forwarded = len(self._signals)
            for slot, child in list(self.children.items()):
                code = child.proc.poll()
                if code is None:
                    continue
                del self.children[slot]
                # a recycle drained too; a child still starting dies of the forwarded SIGTERM
                # itself, before its handler is in place, which is before it could claim a job
                clean = clean and (code in (0, -signal.SIGTERM) or code in REASONS)
                log.event(
                    logging.INFO if code == 0 else logging.WARNING,
                    "xjobs.supervisor.exited",
                    slot=slot,
                    pid=child.proc.pid,
                    code=code,
                    reason=exit_reason(code),
                )
            if self.children and time.monotonic() > deadline:
                self._kill_stragglers()
                clean = False
            time.sleep(_TICK)
        log.event(logging.INFO, "xjobs.supervisor.stopped", pid=os.getpid(), clean=clean)
        return 0 if clean else 1

    def _kill_stragglers(self) -> None:
        for slot, child in list(self.children.items()):
            log.event(
                logging.WARNING,
                "xjobs.supervisor.killed",
                slot=slot,
                pid=child.proc.pid,
                hint="it did not drain within the shutdown bound; its runs go back by lease",
            )
            child.proc.kill()
            child.proc.wait()
            del self.children[slot]


def rerun_argv(argv: Sequence[str], main_spec: object = None) -> list[str]:
    """The interpreter arguments that start this command line again. Started as ``python -m
    package``, argv[0] is the package's ``__main__.py``: run as a script, its directory would
    shadow the standard library (``django/http`` for ``http``), so the child gets ``-m`` too."""
    spec = (
        main_spec if main_spec is not None else getattr(sys.modules["__main__"], "__spec__", None)
    )
    name = getattr(spec, "name", None)
    if name and name.endswith("__main__"):
        return ["-m", name.removesuffix(".__main__"), *argv[1:]]
    return list(argv)


def child_argv(argv: Sequence[str]) -> list[str]:
    """This command line as a child runs it: without ``--processes`` and ``--worker-id`` (each
    child gets its own id), without the supervisor's own ``--supervisor-pid``, and without
    ``--metrics-port`` / ``--metrics-host``, which the supervisor serves for every child."""
    dropped = ("--processes", "--worker-id", "--supervisor-pid", "--metrics-port", "--metrics-host")
    kept: list[str] = []
    skip = False
    for token in argv:
        if skip:
            skip = False
            continue
        if token in dropped:
            skip = True
            continue
        if any(token.startswith(f"{flag}=") for flag in dropped):
            continue
        kept.append(token)
    return kept
