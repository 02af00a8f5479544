"""Notice a worker thread stuck in a call that never returns, and end the process.

A connection whose peer stops answering without closing (a dead NAT, a stalled proxy) blocks a
``cursor.execute`` forever: no timeout of the server's fires, and TCP may never tell. The claim
loop and the settler mark each blocking section; when one stays open past ``bound``, the process
logs which and where, then exits with ``EXIT_STUCK`` for its supervisor to restart it
(SPEC HANG-04). Its runs are left to their leases.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .. import log

#: EX_SOFTWARE: an internal thread stopped making progress
EXIT_STUCK = 70


class Watchdog(threading.Thread):
    def __init__(
        self,
        bound: float,
        *,
        worker_id: str,
        exit: Callable[[int], object] = os._exit,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name="xjobs-watchdog", daemon=True)
        self.bound, self.worker_id = bound, worker_id
        self.exit, self.monotonic = exit, monotonic
        self._open: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()
        self._halt = threading.Event()

    @contextmanager
    def section(self, name: str) -> Iterator[None]:
        """A blocking stretch of ``name`` (one per thread) that must end within the bound."""
        with self._lock:
            self._open[name] = (threading.get_ident(), self.monotonic())
        try:
            yield
        finally:
            with self._lock:
                self._open.pop(name, None)

    def stuck(self) -> tuple[str, int, float] | None:
        """The section open longest past the bound: (name, thread ident, seconds open)."""
        now = self.monotonic()
        with self._lock:
            late = [(name, ident, now - t) for name, (ident, t) in self._open.items()]
        late = [entry for entry in late if entry[2] >= self.bound]
        return max(late, key=lambda entry: entry[2]) if late else None

    def check(self) -> bool:
        """One look: report and exit when a section is stuck (the one-shot entry, for tests)."""
        found = self.stuck()
        if found is None:
            return False
        name, ident, seconds = found
        frame = sys._current_frames().get(ident)
        where = "".join(traceback.format_stack(frame)[-4:]) if frame is not None else "?"
        log.event(
            logging.CRITICAL,
            "xjobs.worker.stuck",
            worker=self.worker_id,
            section=name,
            stuck=f"{seconds:.1f}s",
            bound=f"{self.bound:g}s",
            where=where.strip().replace("\n", " | "),
            hint="a database call never returned (a silently dropped connection?); "
            "exiting so the supervisor restarts the worker; its jobs return by lease",
        )
        for handler in logging.getLogger("django_xjobs").handlers:
            handler.flush()
        self.exit(EXIT_STUCK)
        return True

    def run(self) -> None:
        tick = min(1.0, self.bound / 4)
        while not self._halt.wait(tick):
            if self.check():
                return

    def stop(self) -> None:
        self._halt.set()
