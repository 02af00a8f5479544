"""What a running job asks of its own row (issue 29): a snooze, and its progress.

``ctx.snooze`` unwinds the handler (``JobSnooze``) and the executor settles the run back to the
queue with its attempt given back. ``ctx.progress`` writes the row's ``progress``, fenced on the
run's lease token like every write a run makes, at most once a ``PROGRESS_INTERVAL``: a tight
loop reporting every item costs one write a second, and the last value is written when the
body returns, so a finished run shows where it ended.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn
from uuid import UUID

from .. import conf, log, redact
from ..durations import Duration, parse_duration
from ..errors import InvariantError, JobSnooze, SnoozeLimitError, first_line
from ..text import MESSAGE_LIMIT, storable

#: seconds between two progress writes of one run; the last value waits for the body's end
PROGRESS_INTERVAL = 1.0
#: characters of a progress note kept
NOTE_LIMIT = 200

#: the fenced write: (job_id, lease_token, {"done", "total", "note"}) -> still held
Write = Callable[[UUID, UUID, dict[str, Any]], bool]


class RunControls:
    """One run's snooze budget and progress writer; ``ctx`` hands its calls here."""

    def __init__(
        self,
        *,
        job_id: UUID,
        lease_token: UUID,
        snoozes: int,
        write: Write,
        now: Callable[[], float] = time.monotonic,
        secrets: frozenset[str] = redact.NOTHING,
    ) -> None:
        self.job_id, self.lease_token, self.snoozes = job_id, lease_token, snoozes
        #: the run's secrets: a note is scrubbed of them before it is stored (issue 40)
        self.secrets = secrets
        self._write, self._now = write, now
        self._lock = threading.Lock()
        self._last: float | None = None
        self._pending: dict[str, Any] | None = None
        #: progress writes made (tests read it: a tight loop must not write per call)
        self.writes = 0

    def snooze(self, duration: Duration) -> NoReturn:
        seconds = parse_duration(duration, field="snooze")
        limit = conf.get().max_snoozes
        if self.snoozes >= limit:
            raise SnoozeLimitError(
                f"the job already snoozed {self.snoozes} time(s); XJOBS['MAX_SNOOZES'] is {limit}"
            )
        raise JobSnooze(seconds)

    def progress(self, done: float, total: float | None, note: str) -> None:
        value = _progress_value(done, total, note, self.secrets)
        with self._lock:
            now = self._now()
            if self._last is not None and now - self._last < PROGRESS_INTERVAL:
                self._pending = value  # only the latest waits: the flush writes it
                return
            self._last, self._pending = now, None
        self._store(value)

    def flush(self) -> None:
        """Write the value a throttled call left waiting, if any (the run's body has ended)."""
        with self._lock:
            value, self._pending = self._pending, None
        if value is None:
            return
        try:
            self._store(value)
        except Exception as error:  # advisory: a lost last value must not fail a finished run
            log.throttled(
                logging.WARNING,
                "xjobs.job.progress_failed",
                kind=type(error).__name__,
                id=self.job_id,
                error=first_line(error),
            )

    def _store(self, value: dict[str, Any]) -> None:
        self.writes += 1
        self._write(self.job_id, self.lease_token, value)


def _number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvariantError(f"progress {field}={value!r} must be a finite number")
    if value < 0:
        raise InvariantError(f"progress {field}={value!r} must not be negative")
    return value


def _progress_value(
    done: object, total: object, note: object, secrets: frozenset[str] = redact.NOTHING
) -> dict[str, Any]:
    """The stored value, checked: numbers a bar can be drawn from, a short note. The note is
    shown to anyone who may view the job, so it passes the two functions every text a handler
    writes passes (STYLE): the run's secrets and ``XJOBS["REDACT"]`` out, then made storable;
    it is cut after the scrub, so a secret at the cut cannot leave a prefix behind."""
    done = _number(done, "done")
    if total is not None:
        total = _number(total, "total")
        if total == 0:
            raise InvariantError("progress total=0 leaves nothing to measure against")
    if not isinstance(note, str):
        raise InvariantError(f"progress note={note!r} must be a string")
    scrubbed = redact.redact(note[:MESSAGE_LIMIT], secrets) if note else note
    return {"done": done, "total": total, "note": storable(scrubbed[:NOTE_LIMIT], MESSAGE_LIMIT)}


def fraction(progress: dict[str, Any] | None) -> float | None:
    """How far along a stored progress is, from 0 to 1; None without a total."""
    if not progress or not progress.get("total"):
        return None
    return max(0.0, min(1.0, float(progress.get("done") or 0) / float(progress["total"])))


def progress_text(progress: dict[str, object] | None) -> str:
    """``3/10 (30%) copying`` — how the CLI and the admin say a stored progress."""
    if not progress:
        return ""
    done, total = progress.get("done"), progress.get("total")
    text = f"{done:g}" if isinstance(done, int | float) else str(done)
    share = fraction(progress)
    if share is not None and isinstance(total, int | float):
        text += f"/{total:g} ({share:.0%})"
    note = progress.get("note") or ""
    return f"{text} {note}".strip()
