"""Real ``manage.py`` subprocesses against the test database, for the process-level tests.

Waits are polls with a deadline (``wait_for``), never a fixed sleep.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from django.db import connection

from django_xjobs.testing.postgres import database_url, url_for_database
from tests.models import Ledger

ROOT = Path(__file__).resolve().parents[2]
MANAGE = ROOT / "example_project" / "manage.py"


def worker_env(url: str | None = None) -> dict[str, str]:
    """The environment of a child process: the test database (or ``url``), this checkout
    importable, output unbuffered so a test can read a log line as soon as it is written."""
    env = dict(os.environ)
    env["DATABASE_URL"] = url or url_for_database(database_url(), connection.settings_dict["NAME"])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def manage_argv(command: str, *args: str) -> list[str]:
    return [sys.executable, str(MANAGE), command, "--settings=tests.settings", *args]


def run_manage(
    *argv: str, url: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``manage.py <argv>`` to the end (``--settings`` is the caller's to place)."""
    return subprocess.run(
        [sys.executable, str(MANAGE), *argv],
        env=worker_env(url),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class ManageProcess:
    """``manage.py <command> --settings=tests.settings ...`` running in the background.

    Its output is read as it comes (a thread per pipe), so a test can poll the log and a chatty
    process never blocks on a full pipe. faulthandler is on: a process that does not exit in time
    is sent SIGABRT and its threads' stacks end up in the failure message.
    """

    def __init__(self, command: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.start(manage_argv(command, *args), env or worker_env())

    def start(self, argv: list[str], env: dict[str, str]) -> None:
        """Run ``argv`` (any command line, not only manage.py) and read its output as it comes."""
        self.proc = subprocess.Popen(
            argv,
            env={**env, "PYTHONFAULTHANDLER": "1"},
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self.readers = [
            threading.Thread(target=_drain, args=(stream, lines), daemon=True)
            for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for reader in self.readers:
            reader.start()

    def saw(self, text: str) -> bool:
        """True once a line of stderr (where the log goes) contains ``text``."""
        return any(text in line for line in list(self.err))

    def send(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def finish(self, timeout: float = 30) -> tuple[int, str, str]:
        """Wait for the exit: ``(exit code, stdout, stderr)``; past ``timeout``, fail with the
        process's thread stacks."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)  # faulthandler: every thread's stack
            self.proc.wait(timeout=30)
            self._join()
            raise AssertionError(
                f"{self.proc.args[2:]} did not exit within {timeout}s; its threads:\n"
                f"{''.join(self.err)}\nstdout:\n{''.join(self.out)}"
            ) from None
        self._join()
        return self.proc.returncode, "".join(self.out), "".join(self.err)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # SIGKILL ends a SIGSTOPped process too
        self.proc.wait()
        self._join()

    def _join(self) -> None:
        for reader in self.readers:
            reader.join(timeout=5)


class WorkerProcess(ManageProcess):
    """``manage.py xjobs_worker ...``."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        super().__init__("xjobs_worker", *args, env=env)


def wait_for(condition: Callable[[], object], timeout: float = 30, what: str = "") -> object:
    """``condition()``'s first truthy value, polled every 50 ms; fail past ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")


def wait_while_progressing(
    condition: Callable[[], object],
    progress: Callable[[], object],
    stall: float = 60,
    what: str = "",
) -> object:
    """``condition()``'s first truthy value, polled every 50 ms; fail once ``progress()`` (a
    count of finished work, a snapshot of states) has not changed for ``stall`` seconds.

    For a wait on a body of work whose length depends on the machine's load: a slow machine
    that still gets work done is waited for (the test's own timeout is the outer bound), a
    stuck one fails, and the failure says where the work stood."""
    last = progress()
    moved = time.monotonic()
    while True:
        value = condition()
        if value:
            return value
        now = progress()
        if now != last:
            last, moved = now, time.monotonic()
        elif time.monotonic() - moved > stall:
            raise AssertionError(
                f"no progress in {stall}s waiting for {what or condition}; it stood at {last}"
            )
        time.sleep(0.05)


def ledger(token: str, phase: str) -> list[Ledger]:
    """The rows ``tests.jobs.ledger`` and its kin wrote for ``token`` at ``phase``."""
    return list(Ledger.objects.filter(token=token, phase=phase))


def _drain(stream: IO[str], lines: list[str]) -> None:
    for line in iter(stream.readline, ""):
        lines.append(line)
    stream.close()
