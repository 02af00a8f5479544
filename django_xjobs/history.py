"""A job's failure history: what ended each failed attempt, bounded so a row stays small.

The settle of a failed attempt carries a ``Failure``; the driver stamps it with the attempt
number and the time, appends it to the row's ``errors`` and keeps the last ``KEEP`` — in the
same fenced statement, so a stale settle writes no history either. ``inspect_job()``, ``xjobs
show`` and the admin read it back as ``FailedAttempt`` values, oldest first.
"""

from __future__ import annotations

import json
import traceback as tb
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Literal

from .errors import JobInterrupt, LeaseLostError, XJobsError
from .redact import redact
from .text import MESSAGE_LIMIT, TRACEBACK_LIMIT, storable

#: failed attempts kept per job; older ones are dropped as new ones arrive
KEEP = 10

Ending = Literal["retried", "dead", "failed", "timeout", "crashed", "lapsed", "snoozed"]


@dataclass(frozen=True)
class Failure:
    """What ended one attempt. ``outcome`` is how it ended: ``timeout`` or ``crashed`` when
    that is what happened, else what the job became (``retried``, ``dead``, ``failed``)."""

    code: str | None
    message: str
    exception: str
    traceback: str
    outcome: Ending

    def to_json(self) -> str:
        return json.dumps(asdict(self))


@dataclass(frozen=True)
class FailedAttempt:
    """One stored entry of a job's failure history (``JobSnapshot.errors``)."""

    attempt: int
    at: datetime
    code: str | None
    message: str
    exception: str
    traceback: str
    outcome: str

    @classmethod
    def stamped(cls, failure: Failure, *, attempt: int, at: datetime) -> FailedAttempt:
        return cls(attempt=attempt, at=at, **asdict(failure))

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> FailedAttempt:
        """An entry as PostgreSQL stores it: ``at`` is ``now()`` as ISO 8601 text."""
        return cls(
            attempt=entry["attempt"],
            at=datetime.fromisoformat(entry["at"]),
            code=entry.get("code"),
            message=entry.get("message", ""),
            exception=entry.get("exception", ""),
            traceback=entry.get("traceback", ""),
            outcome=entry.get("outcome", ""),
        )


def _class_path(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


#: what a claim records for the run before it when that run's lease lapsed unsettled: it died
#: with its worker (SIGKILL, OOM, a hung process); no traceback survives a dead process
LAPSED = Failure(
    code=LeaseLostError.code,
    message="the lease lapsed before the run settled: its worker died or stalled",
    exception=_class_path(LeaseLostError),
    traceback="",
    outcome="crashed",
)
#: the same, when its worker was still present (it renewed its presence row): the database or
#: the network was away, the worker was not gone, and the lapse is not counted as a crash
LAPSED_PRESENT = Failure(
    code=LeaseLostError.code,
    message="the lease lapsed before the run settled while its worker stayed present "
    "(the database or the network was away): not counted as a crash",
    exception=_class_path(LeaseLostError),
    traceback="",
    outcome="lapsed",
)


#: the same, when its worker marked its presence stopped: the process exited past its
#: --shutdown-timeout with the run still in flight (issue 23: it read as an outage)
EXITED = Failure(
    code=LeaseLostError.code,
    message="the lease lapsed before the run settled: its worker exited past its "
    "--shutdown-timeout with the run still in flight",
    exception=_class_path(LeaseLostError),
    traceback="",
    outcome="crashed",
)


def failure(error: BaseException, outcome: Ending, secrets: Iterable[str] | None = None) -> Failure:
    """The history entry for ``error`` ending an attempt: its code (ours only), message, the
    class path ``django.tasks`` reports (``builtins.ValueError``) and a capped traceback, each
    scrubbed of the run's ``secrets`` (default: the current run's) before it is cut."""
    code = error.code if isinstance(error, XJobsError | JobInterrupt) else None
    message = str(error) if code is None else str(error).removeprefix(f"{code}: ")
    return Failure(
        code=code,
        message=storable(redact(message, secrets), MESSAGE_LIMIT),
        exception=_class_path(type(error)),
        traceback=storable(redact("".join(tb.format_exception(error)), secrets), TRACEBACK_LIMIT),
        outcome=outcome,
    )
