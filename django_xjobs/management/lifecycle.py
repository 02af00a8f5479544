"""Run a role on a thread until SIGTERM/SIGINT, for the long-running commands.

The signal handler only records the signal. Python runs handlers on the main thread between
bytecodes, so a handler that sets an Event the main thread is waiting on can deadlock on the
Event's own lock; here the main thread notices the signal and calls ``stop()`` itself.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import log

#: EX_TEMPFAIL: the drain outlived --shutdown-timeout; unsettled runs are left to their leases
EXIT_SHUTDOWN_TIMEOUT = 75
#: how long the exit waits for a role to mark itself stopped (a worker's presence row)
EXITING_BOUND = 3.0


def run_until_signalled(
    name: str,
    run: Callable[[], object],
    stop: Callable[[], None],
    shutdown_timeout: float | None = None,
    exiting: Callable[[], None] | None = None,
    received: list[int] | None = None,
) -> Any:
    """Run ``run`` until a signal, then ``stop()``; past ``shutdown_timeout`` after the first
    signal the process exits with ``EXIT_SHUTDOWN_TIMEOUT`` (SPEC HANG-05), whatever hangs,
    after ``exiting()`` had up to ``EXITING_BOUND`` seconds to say so. The signals that came
    are appended to ``received`` when given."""
    received = [] if received is None else received

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)  # no locks here

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = run()
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=target, name=name)
    thread.start()
    stopper: threading.Thread | None = None
    handled = 0
    give_up: float | None = None
    while thread.is_alive() or (stopper is not None and stopper.is_alive()):
        # stop() finishes its hand-back (a leader lease, a relay's batch) before the exit
        (thread if thread.is_alive() or stopper is None else stopper).join(0.2)
        if give_up is not None and time.monotonic() >= give_up:
            log.event(
                logging.ERROR,
                f"{name}.shutdown_timeout",
                timeout=f"{shutdown_timeout:g}s",
                hint="work in flight did not drain in time; unsettled runs return by their leases "
                "(every thread's stack follows on stderr)",
            )
            _dump_stacks()
            if exiting is not None:
                _bounded(exiting, f"{name}-exiting")
            _exit(EXIT_SHUTDOWN_TIMEOUT)
        while handled < len(received):
            signame = signal.Signals(received[handled]).name
            if handled == 0:
                log.event(logging.INFO, f"{name}.signal", signal=signame)
                if shutdown_timeout is not None:
                    give_up = time.monotonic() + shutdown_timeout
                stopper = threading.Thread(target=stop, name=f"{name}-stop")
                stopper.start()
            else:
                log.event(
                    logging.WARNING,
                    f"{name}.already_draining",
                    signal=signame,
                    hint="waiting for work in flight; SIGKILL abandons it to its lease",
                )
            handled += 1
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _bounded(call: Callable[[], None], name: str) -> None:
    """``call()`` on a thread of its own, waited for ``EXITING_BOUND`` seconds at most: the
    database it writes to may be what the drain hung on, and the exit must still happen."""

    def target() -> None:
        with contextlib.suppress(Exception):
            call()

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join(EXITING_BOUND)


def _dump_stacks() -> None:
    """Every thread's stack on stderr: what the drain was still waiting for."""
    for handler in logging.getLogger("django_xjobs").handlers:
        handler.flush()
    with contextlib.suppress(Exception):  # a closed or odd stderr must not block the exit
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)


def _exit(code: int) -> None:
    """End the process now: threads stuck in a blocking call would keep a clean exit waiting."""
    for handler in logging.getLogger("django_xjobs").handlers:
        handler.flush()
    os._exit(code)
