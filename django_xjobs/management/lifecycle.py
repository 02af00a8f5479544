"""Run a role on a thread until SIGTERM/SIGINT, for the long-running commands.

The signal handler only records the signal. Python runs handlers on the main thread between
bytecodes, so a handler that sets an Event the main thread is waiting on can deadlock on the
Event's own lock; here the main thread notices the signal and calls ``stop()`` itself.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from typing import Any

from .. import log


def run_until_signalled(name: str, run: Callable[[], Any], stop: Callable[[], None]) -> Any:
    received: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
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
    while thread.is_alive():
        thread.join(0.2)
        while handled < len(received):
            signame = signal.Signals(received[handled]).name
            if handled == 0:
                log.event(logging.INFO, f"{name}.signal", signal=signame)
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
    if stopper is not None:
        stopper.join()  # stop() finishes its hand-back (a leader lease, a relay's batch)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
