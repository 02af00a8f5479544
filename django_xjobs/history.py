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

#: ``parked`` and ``restarted``: what a worker of a newer version of the job did with a run of an
#: older one (``job(old_runs=...)``, issue 44); never a failure of the run
Ending = Literal[
    "retried", "dead", "failed", "timeout", "crashed", "lapsed", "snoozed", "parked", "restarted"
]


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


#: what a claim records for the run before it when that run's lease lapsed unsettled and its
#: worker is gone (SIGKILL, OOM, a hung process); no traceback survives a dead process. Not
#: counted against the job: every run that worker held died with it, and nothing says which
#: one caused it, so the job runs next alone in a child process, where a death is its own
#: (issue 39: a job that shared a process with a crash is a victim until it dies alone)
LAPSED = Failure(
    code=LeaseLostError.code,
    message="the lease lapsed before the run settled: its worker died or stalled with the run "
    "in flight; not counted against the job, whose next run is isolated in a child process",
    exception=_class_path(LeaseLostError),
    traceback="",
    outcome="lapsed",
)
#: the same, when its worker was still present (it renewed its presence row after the lease ran
#: out): the database or the network was away, the worker was not gone
LAPSED_PRESENT = Failure(
    code=LeaseLostError.code,
    message="the lease lapsed before the run settled while its worker stayed present "
    "(the database or the network was away): not counted as a crash",
    exception=_class_path(LeaseLostError),
    traceback="",
    outcome="lapsed",
)


#: the same, when its worker marked its presence stopped: the process was told to stop and
#: exited past its --shutdown-timeout with the run still in flight (issue 23: it read as an
#: outage). Not a crash, and the job is no suspect (issue 39 item 2)
EXITED = Failure(
    code=LeaseLostError.code,
    message="the lease lapsed before the run settled: its worker was told to stop and exited "
    "past its --shutdown-timeout with the run still in flight; not counted as a crash",
    exception=_class_path(LeaseLostError),
    traceback="",
    outcome="lapsed",
)


#: what a worker records for a run it gave up at its lease's local deadline because the database
#: did not answer its renewals, and handed back once it did (issue 39 item 1, SPEC LEASE-20)
CUT_SHORT = Failure(
    code=LeaseLostError.code,
    message="the database did not answer the run's lease renewals: its worker gave it up at the "
    "lease's local deadline and handed it back once the database answered; not counted as a crash",
    exception=_class_path(LeaseLostError),
    traceback="",
    outcome="lapsed",
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
