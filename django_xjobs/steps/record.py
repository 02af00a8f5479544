"""The step recorder: a run's step records, read once an attempt, and every write of one.

A step claims its name (unique in the run, within ``XJOBS["MAX_STEPS_PER_RUN"]``, never inside
an open atomic block), is told whether it already completed (then its stored output replays),
and stores how it ended before the run goes on. Every write is fenced on the run's lease: a run
that no longer holds its job writes nothing (SPEC STEP-17, SE-21). The kinds of step
(``steps/waits.py``, ``steps/children.py``, ``steps/atomic.py``) and the face a handler sees
(``Steps``, in ``steps/__init__.py``) are built on it.

Every time is on the store's clock (``store.now()``: the database's ``now()`` on PostgreSQL),
never this process's (issue 11).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import defaultdict, deque
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from .. import conf, crypt, log
from ..drivers.contract import ClaimedJob, EventStore, StepRecord, StepStore
from ..errors import (
    InvariantError,
    JobAbortedError,
    JobInterrupt,
    LeaseLostError,
    StepAtomicNestedError,
    StepDuplicateError,
    StepLimitError,
    describe_error,
)
from ..payload import JSONValue
from ..redact import redact
from ..run.stop import StopSignal
from ..text import check_name, storable
from .output import check_output

MAX_TRACE_NAMES = 200  # SPEC STEP-05
DEFAULT_EVENT_POLL = 30.0  # SPEC JOB-06

T = TypeVar("T")


class StepRecorder:
    """What every kind of step is built on: the run's records, the names it used, and the
    fenced write of each step's outcome. ``Steps`` (``ctx.step``) is one."""

    def __init__(
        self,
        *,
        job: ClaimedJob,
        records: list[StepRecord] | Callable[[], list[StepRecord]],
        store: StepStore,
        events: EventStore,
        signal: StopSignal,
        step_timeout: float | None = None,
        event_poll: float | None = None,
        received: Callable[[float], None] | None = None,
    ) -> None:
        self.job, self.store, self.events, self.signal = job, store, events, signal
        self.step_timeout = step_timeout
        self.event_poll = event_poll or DEFAULT_EVENT_POLL
        #: told the seconds from an event's publication to a parked wait receiving it (the
        #: executor hands the metrics' histogram down: steps import nothing of the metrics)
        self.received: Callable[[float], None] = received or _ignore
        # SPEC STEP-06: one read per attempt, made on the first step call, so a job without
        # steps costs no query at all
        self._load = records if callable(records) else (lambda: records)
        self._loaded: dict[str, StepRecord] | None = None
        self._used: set[str] = set()  # SPEC SE-47: a set, so an old name is still refused
        self._used_trace: deque[str] = deque(maxlen=MAX_TRACE_NAMES)
        self._replayed: deque[str] = deque(maxlen=MAX_TRACE_NAMES)
        self._sleeps: defaultdict[str, int] = defaultdict(int)  # a Counter costs a microsecond
        self._position = -1  # this attempt's place in the run of the step being reached
        #: when each step's body began (monotonic): its record says how long the body ran
        self._began: dict[str, float] = {}
        self._reordered = False
        #: the atomic step whose block is open: another step inside it would commit or
        #: vanish with that block's transaction, so none may start
        self.inside_atomic: str | None = None
        #: set once the attempt has ended: a step asked after it is outside a running job
        self.ended = False

    @property
    def _records(self) -> dict[str, StepRecord]:
        if self._loaded is None:
            self._loaded = {r.name: r for r in self._load()}
        return self._loaded

    @property
    def used_names(self) -> list[str]:
        return list(self._used_trace)

    @property
    def replayed_names(self) -> list[str]:
        return list(self._replayed)

    def begin(self, name: str) -> tuple[bool, Any]:
        """Claim ``name`` for this attempt; ``(True, output)`` when it already completed."""
        self._claim_name(name)
        record = self._records.get(name)
        if record is not None and record.status == "completed":
            self._replayed.append(name)  # SPEC STEP-01
            return True, _opened(record.output)
        self._began[name] = time.monotonic()
        return False, None

    def finish(self, name: str, value: T) -> T:
        """Store ``value`` as the step's result before the run goes on (SPEC STEP-02)."""
        try:
            check_output(name, value)
        except Exception as error:
            self.fail(name, error)
            raise
        return self.complete(name, value)

    def complete(self, name: str, value: T) -> T:
        """Write the completed record of a checked ``value``, fenced on the run's lease."""
        previous = self._records.get(name)
        self._write(  # the store stamps started_at and completed_at on its own clock
            StepRecord(
                run_id=self.job.run_id,
                name=name,
                status="completed",
                output=crypt.seal_value(value),  # SPEC CRYPT-03: clear with no keys set
                attempts=(previous.attempts + 1) if previous else 1,
                position=self._position,
                ran_for=self._ran_for(name),
            )
        )
        return value

    def _ran_for(self, name: str) -> float | None:
        """Seconds since ``name``'s body began; the store dates the start back by that much."""
        began = self._began.pop(name, None)
        return None if began is None else time.monotonic() - began

    def fail(self, name: str, error: BaseException) -> None:
        """Record a failed step (SPEC STEP-03) unless the run was stopped (STEP-17/18)."""
        if isinstance(error, JobInterrupt) or self.signal.is_set():
            return
        previous = self._records.get(name)
        record = StepRecord(
            run_id=self.job.run_id,
            name=name,
            status="failed",
            error=storable(redact(describe_error(error))),  # the run's scope holds its secrets
            attempts=(previous.attempts + 1) if previous else 1,
            position=self._position,
            ran_for=self._ran_for(name),
        )
        with contextlib.suppress(JobInterrupt):  # the caller needs the original error (STEP-17)
            self._write(record)

    def _claim_name(self, name: object) -> None:
        if not isinstance(name, str) or not name:
            raise InvariantError(
                f"step name {name!r} must be a non-empty string",
                hint="name each step for what it does: ctx.step.run('charge', ...)",
            )
        check_name(name, f"step name {name!r}")
        if self.inside_atomic is not None:
            raise StepAtomicNestedError(
                f"step {name!r} was started inside atomic step {self.inside_atomic!r}",
                hint="close the atomic block first, or do the work inside it without a step",
            )
        if name in self._used:
            raise StepDuplicateError(f"step {name!r} is used twice in one run")  # SPEC STEP-04
        limit = conf.get().max_steps_per_run
        if len(self._used) >= limit:  # replayed steps count too: the run holds them all
            raise StepLimitError(f"step {name!r} would be step {limit + 1:,} of this run")
        self._used.add(name)
        self._used_trace.append(name)
        self._position += 1
        self._check_position(name)

    def _check_position(self, name: str) -> None:
        """Say so, once an attempt, when a deploy moved a step: the first step out of place is
        named, and every step still replays by name (DBOS raises here)."""
        record = self._records.get(name)
        recorded = None if record is None else record.position
        if self._reordered or recorded is None or recorded == self._position:
            return
        self._reordered = True
        log.event(
            logging.WARNING,
            "xjobs.step.reordered",
            job=self.job.name,
            id=self.job.id,
            step=name,
            recorded=recorded,
            current=self._position,
        )

    def _write(self, record: StepRecord) -> None:
        """Persist ``record`` only while this run still holds the job (SPEC STEP-17, SE-21)."""
        if self.signal.is_set():
            reason = self.signal.reason
            raise JobAbortedError(
                f"step {record.name!r} was not recorded: the run was stopped"
                + (f" ({getattr(reason, 'code', type(reason).__name__)})" if reason else ""),
            )
        if not self.store.put(record, job_id=self.job.id, lease_token=self.job.lease_token):
            self.signal.abort(
                LeaseLostError(
                    f"job {self.job.id} is no longer held by this run",
                    hint="its lease lapsed or it was cancelled; another run owns it now",
                )
            )
            raise JobAbortedError(f"step {record.name!r} was not recorded: the job moved on")
        self._records[record.name] = record


def _seconds(delta: timedelta) -> float:
    return max(0.0, delta.total_seconds())


def _ignore(seconds: float) -> None:
    """What a ``StepRecorder`` built without a ``received`` does with a wait's latency."""


def _opened(output: JSONValue) -> JSONValue:
    """A replayed step's stored output as its value: opened when sealed (SPEC CRYPT-03); a key
    missing here fails the attempt with ``X_ENCRYPTION_KEY_MISSING``."""
    return crypt.unseal(output) if crypt.is_sealed(output) else output
