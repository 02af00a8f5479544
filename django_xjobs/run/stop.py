"""A run's stop signal (``ctx.signal``): set once, with the reason, when the run must end.

Its own module, below the run's context: the step runner waits on the signal and never needs the
context that carries it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..errors import JobAbortedError, JobInterrupt


class StopSignal:
    """A run's stop signal: set once, with the reason, when the run must end.

    Long handlers check it between units of work (``ctx.signal.raise_if_set()``) or wait on it
    instead of sleeping (``ctx.signal.wait(5)`` returns True early when the run is stopped)::

        for page in pages:
            ctx.signal.raise_if_set()  # cancelled or timed out: stop here
            export(page)
    """

    def __init__(self) -> None:
        #: made only when someone waits: most runs end without a wait, or a stop
        self._event: threading.Event | None = None
        self._reason: BaseException | None = None
        self._lock = threading.Lock()
        self._children: list[StopSignal] = []
        self._deadline: Callable[[], float] | None = None
        self._on_deadline: Callable[[], None] | None = None
        self._now: Callable[[], float] = time.monotonic

    def bind_deadline(
        self,
        deadline: Callable[[], float],
        expire: Callable[[], None],
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        """Read ``deadline()`` (monotonic seconds) whenever the signal is read: past it,
        ``expire()`` sets the signal there and then. A process resumed after a freeze must not
        run on for a moment until a timer thread gets its turn (SPEC LEASE-15)."""
        self._deadline, self._on_deadline, self._now = deadline, expire, now

    def _check_deadline(self) -> None:
        if (
            self._deadline is not None
            and self._on_deadline is not None
            and self._reason is None
            and self._now() >= self._deadline()
        ):
            self._on_deadline()

    def abort(self, reason: BaseException) -> bool:
        """Set the signal; the first reason wins. True when this call set it."""
        with self._lock:
            if self._reason is not None:
                return False
            self._reason = reason
            children, self._children = self._children, []
            event = self._event
        if event is not None:
            event.set()
        for child in children:
            child.abort(reason)
        return True

    def child(self) -> StopSignal:
        """A signal set when this one is, that can also be set on its own (a step deadline)."""
        child = StopSignal()
        with self._lock:
            if self._reason is None:
                self._children.append(child)
                return child
        child.abort(self._reason)
        return child

    def is_set(self) -> bool:
        """True once the run must stop (cancelled, timed out, lease lost, worker stopping)."""
        self._check_deadline()
        return self._reason is not None

    def _waitable(self) -> threading.Event:
        with self._lock:
            if self._event is None:
                self._event = threading.Event()
                if self._reason is not None:
                    self._event.set()
            return self._event

    @property
    def reason(self) -> BaseException | None:
        """Why the signal was set (a ``JobInterrupt`` or ``JobTimeoutError``), or None."""
        return self._reason

    def wait(self, seconds: float | None = None) -> bool:
        """Wait up to ``seconds`` for the signal; True when it is set (early, if so)."""
        event = self._waitable()
        if self._deadline is None:
            return event.wait(seconds)
        end = None if seconds is None else self._now() + seconds
        while not self.is_set():
            now = self._now()
            if end is not None and now >= end:
                return False
            step = self._deadline() - now  # the deadline may move on as renewals land
            if end is not None:
                step = min(step, end - now)
            event.wait(max(step, 0.001))
        return True

    def raise_if_set(self) -> None:
        """Raise if the run must stop: always a ``JobInterrupt``, which ``except Exception``
        does not catch, even when the reason is a timeout."""
        self._check_deadline()
        if isinstance(self._reason, JobInterrupt):
            raise self._reason
        if self._reason is not None:
            raise JobAbortedError(f"the run was stopped: {self._reason}") from self._reason
