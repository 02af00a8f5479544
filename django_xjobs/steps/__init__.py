"""The step runner (``ctx.step``): memoized steps that replay from storage, durable sleeps and
event waits, step deadlines, and the write fence.

A step's result is stored before the next step starts, so an attempt that fails at step 3 runs
step 3 again and replays 1 and 2 from their records. Sleeps and waits park the run (no process
held, no attempt burned) by raising ``StepSuspension``.

Every time is on the store's clock (``store.now()``: the database's ``now()`` on PostgreSQL),
never this process's: an event's ``published_at`` and a wait's ``started_at`` are compared on one
clock even when the publisher and the worker run on two machines (issue 11).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, overload
from uuid import UUID

from django.db import connections

from .. import conf, log
from ..drivers.contract import ClaimedJob, EventStore, StepRecord, StepStore
from ..durations import Duration, format_seconds, parse_duration
from ..errors import (
    ChildDepthError,
    ChildJobFailedError,
    InvariantError,
    JobAbortedError,
    JobInterrupt,
    JobTimeoutError,
    LeaseLostError,
    StepAtomicNestedError,
    StepDuplicateError,
    StepLimitError,
    StepReplayMismatchError,
    StepSuspension,
    describe_error,
)
from ..redact import redact
from ..run.stop import StopSignal
from ..states import FINISHED_STATES
from ..text import check_name, storable
from .output import check_output

if TYPE_CHECKING:
    from .atomic import Atomic

MAX_TRACE_NAMES = 200  # SPEC STEP-05
#: generations of child jobs below a job nobody called: a job this deep calls no children
#: (``ChildDepthError``), so a handler that calls its own job ends there instead of adding a
#: generation each run for ever (SPEC CHILD-09)
MAX_CHILD_DEPTH = 16
DEFAULT_EVENT_POLL = 30.0  # SPEC JOB-06
SCALARS = (str, int, float, bool, type(None))


class Steps:
    """``ctx.step``: every method takes a step name that is unique within the run.

    A step's outcome is stored the moment it ends; a later attempt of the same run replays it
    from storage instead of doing it again, so the handler reads as straight-line code::

        @job(idempotency_key="fulfil:{order_id}")
        def fulfil(ctx, order_id: int):
            label = ctx.step.run("label", lambda: carrier.create_label(order_id))
            ctx.step.wait_for_event("shipped", "order.shipped", match={"order_id": order_id})
            ctx.step.sleep("settle", "2d")  # parks the run; no worker waits
            ctx.step.run("review", lambda: ask_for_review(order_id))
            return {"label": label}
    """

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
    ) -> None:
        self.job, self.store, self.events, self.signal = job, store, events, signal
        self.step_timeout = step_timeout
        self.event_poll = event_poll or DEFAULT_EVENT_POLL
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

    # --- run --------------------------------------------------------------------------------

    def run(self, name: str, fn: Callable[..., Any]) -> Any:
        """Run ``fn`` once for this run, ever; later attempts get its stored result back.

        ``fn()`` or ``fn(signal)``: the signal is set when the run is stopped or the step passes
        the job's ``step_timeout``. The result must be JSON::

            charge = ctx.step.run("charge", lambda signal: gateway.charge(order, signal=signal))
        """
        done, value = self.begin(name)
        if done:
            return value
        try:
            value = self._call(name, fn)
        except BaseException as error:
            self.fail(name, error)
            raise
        return self.finish(name, value)

    def begin(self, name: str) -> tuple[bool, Any]:
        """Claim ``name`` for this attempt; ``(True, output)`` when it already completed."""
        self._claim_name(name)
        record = self._records.get(name)
        if record is not None and record.status == "completed":
            self._replayed.append(name)  # SPEC STEP-01
            return True, record.output
        self._began[name] = time.monotonic()
        return False, None

    def finish(self, name: str, value: Any) -> Any:
        """Store ``value`` as the step's result before the run goes on (SPEC STEP-02)."""
        try:
            check_output(name, value)
        except Exception as error:
            self.fail(name, error)
            raise
        return self.complete(name, value)

    def complete(self, name: str, value: Any) -> Any:
        """Write the completed record of a checked ``value``, fenced on the run's lease."""
        previous = self._records.get(name)
        self._write(  # the store stamps started_at and completed_at on its own clock
            StepRecord(
                run_id=self.job.run_id,
                name=name,
                status="completed",
                output=value,
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

    def _call(self, name: str, fn: Callable[..., Any]) -> Any:
        takes_signal = _takes_argument(fn)
        if self.step_timeout is None:
            return fn(self.signal) if takes_signal else fn()
        step_signal = self.signal.child()
        outcome: dict[str, Any] = {}

        def target() -> None:
            try:
                outcome["value"] = fn(step_signal) if takes_signal else fn()
            except BaseException as error:
                outcome["error"] = error
            finally:
                connections.close_all()  # this thread's, if the step used the database

        thread = threading.Thread(target=target, name=f"xjobs-step-{name}", daemon=True)
        thread.start()
        thread.join(self.step_timeout)
        if thread.is_alive():
            error = JobTimeoutError(
                f"step {name!r} passed its step_timeout of {format_seconds(self.step_timeout)}",
                hint="make the step faster, split it, or raise step_timeout",
            )
            step_signal.abort(error)  # SPEC STEP-15, SE-20: abort first, then fail
            raise error
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")

    # --- atomic ---------------------------------------------------------------------------

    @overload
    def atomic(self, name: str) -> Atomic: ...

    @overload
    def atomic(self, name: str, fn: Callable[[], Any]) -> Any: ...

    def atomic(self, name: str, fn: Callable[[], Any] | None = None) -> Any:
        """A step whose writes on the jobs database commit exactly once, with its record::

            with ctx.step.atomic("reserve-stock") as step:
                Stock.objects.filter(sku=sku).update(qty=F("qty") - 1)
                step.result = {"reserved": 1}

        The block, the step's record and ``step.result`` (JSON) commit in one transaction,
        only while this run holds the job; otherwise nothing the block wrote exists. On replay
        ``step.done`` is True, the block stops at its first database statement and
        ``step.result`` is the stored result. ``ctx.step.atomic(name, fn)`` runs ``fn()`` in
        the block instead, skipped entirely on replay, and returns the result.
        """
        from .atomic import Atomic, call

        block = Atomic(self, name)
        return block if fn is None else call(block, fn)

    # --- sleep ------------------------------------------------------------------------------

    def sleep(self, name: str | Duration, duration: Duration | None = None) -> None:
        """Park the run for ``duration`` (``sleep("cool-off", "1h")``, or ``sleep("1h")``).

        The one-argument form is named ``sleep:<duration>``, numbered ``#2``, ``#3``... when
        repeated, so a loop of sleeps needs no names (SPEC STEP-09). No worker waits: the run is
        parked and claimed again when it is due::

            ctx.step.run("welcome", lambda: send_welcome(user_id))
            ctx.step.sleep("a-day-later", "1d")
            ctx.step.run("tips", lambda: send_tips(user_id))
        """
        if duration is None:
            duration, label = name, f"sleep:{name}"
            self._sleeps[label] += 1
            if self._sleeps[label] > 1:
                label = f"{label}#{self._sleeps[label]}"
        else:
            label = name  # type: ignore[assignment]
        seconds = parse_duration(duration, field=f"sleep {label!r}")
        self._park(label, lambda now: now + timedelta(seconds=seconds))

    def sleep_until(self, name: str, when: datetime) -> None:
        """Park the run until ``when`` (an aware datetime); at once if it has passed::

            ctx.step.sleep_until("at-renewal", subscription.renews_at - timedelta(days=3))

        Like ``sleep``, no attempt is spent and no worker waits.
        """
        if not isinstance(when, datetime) or when.tzinfo is None:
            raise InvariantError(
                f"sleep_until {name!r}: {when!r} must be an aware datetime",
                hint="use django.utils.timezone.now() + timedelta(...)",
            )
        self._park(name, lambda now: when)

    def _park(self, name: str, wake: Callable[[datetime], datetime]) -> None:
        self._claim_name(name)
        record = self._records.get(name)
        if record is not None and record.status == "completed":
            self._replayed.append(name)
            return
        now = self.store.now()
        if record is None:
            wake_at = wake(now)
            if wake_at <= now:
                self._write(self._sleep_record(name, now, wake_at, completed=True))
                return
            self._write(self._sleep_record(name, now, wake_at))  # SPEC STEP-07
            raise StepSuspension(name, wake_at, "sleep", _seconds(wake_at - now))
        wake_at = record.wake_at or now
        if wake_at > now:  # SPEC STEP-08: nothing written
            raise StepSuspension(name, wake_at, "sleep", _seconds(wake_at - now))
        self._write(self._sleep_record(name, now, wake_at, completed=True))

    def _sleep_record(
        self, name: str, now: datetime, wake_at: datetime, completed: bool = False
    ) -> StepRecord:
        return StepRecord(
            run_id=self.job.run_id,
            name=name,
            status="completed" if completed else "sleeping",
            started_at=now,  # a first write only: the upsert keeps the first start
            completed_at=now if completed else None,
            wake_at=wake_at,
            position=self._position,
        )

    # --- events -----------------------------------------------------------------------------

    def wait_for_event(
        self,
        name: str,
        event: str,
        *,
        match: dict[str, Any] | None = None,
        timeout: Duration = "24h",
        required: bool = False,
        correlation_key: str | None = None,
        any_tenant: bool = False,
    ) -> Any:
        """Park until an event named ``event`` (whose payload has ``match``'s fields) is
        published, and return its payload; ``None`` at the timeout, or ``JobTimeoutError``
        when ``required`` (SPEC STEP-11..14, EVT-02/03). Only events published for this run's
        tenant match (``publish_event(..., tenant_id=...)``; a run without a tenant matches
        events without one); ``any_tenant=True`` matches an event of any tenant. The run is
        parked meanwhile::

            shipped = ctx.step.wait_for_event(
                "shipped", "order.shipped", match={"order_id": order_id}, timeout="7d"
            )
            if shipped is None:
                ...  # seven days and no shipment

        ``publish_event("order.shipped", {"order_id": 7, "carrier": "ups"})`` wakes it.
        """
        if not isinstance(event, str) or not event:
            raise InvariantError(
                f"wait_for_event {name!r}: event={event!r} must be a non-empty string"
            )
        _check_match(name, match)
        if correlation_key is not None and not isinstance(correlation_key, str):
            raise InvariantError(f"wait_for_event {name!r}: correlation_key must be a string")
        check_name(event, f"wait_for_event {name!r}: event")
        check_name(correlation_key, f"wait_for_event {name!r}: correlation_key")
        seconds = parse_duration(timeout, field=f"wait_for_event {name!r} timeout")
        self._claim_name(name)
        record = self._records.get(name)
        if record is not None and record.status == "completed":
            self._replayed.append(name)
            return record.output
        now = self.store.now()  # SPEC EVT-02/03: the clock the event's published_at is on
        started = record.started_at if record and record.started_at else now
        deadline = started + timedelta(seconds=seconds)
        hit = self.events.find(
            event,
            after=started,
            correlation_key=correlation_key,
            match=match,
            tenant_id=self.job.tenant_id,
            any_tenant=bool(any_tenant),
        )
        if hit is not None or now >= deadline:
            if hit is None and required:
                raise JobTimeoutError(
                    f"no {event!r} event arrived within {format_seconds(seconds)} (step {name!r})",
                    hint="publish_event(...) the event, or raise the step's timeout",
                )
            if hit is None:
                log.event(
                    logging.WARNING,
                    "xjobs.step.wait_timeout",
                    job=self.job.name,
                    step=name,
                    event=event,
                )
            self._write(
                StepRecord(
                    run_id=self.job.run_id,
                    name=name,
                    status="completed",
                    started_at=started,
                    output=None if hit is None else hit.payload,
                    completed_at=now,
                    event=event,
                    correlation_key=correlation_key,
                    position=self._position,
                )
            )
            return None if hit is None else hit.payload
        wake_at = min(deadline, now + timedelta(seconds=self.event_poll))  # SPEC STEP-12/14
        # what it waits for, kept on the waiting record for `why` (issue 42): wake_at is only the
        # next look, the deadline is the timeout's
        waits = {"match": match, "until": deadline.isoformat(), "required": bool(required)}
        self._write(
            StepRecord(
                run_id=self.job.run_id,
                name=name,
                status="waiting",
                started_at=started,
                output=waits,
                wake_at=wake_at,
                event=event,
                correlation_key=correlation_key,
                position=self._position,
                match=match,  # SPEC EVT-06: what a publish releases the run by
                any_tenant=bool(any_tenant),
            )
        )
        raise StepSuspension(name, wake_at, "event", _seconds(wake_at - now))

    # --- child jobs -------------------------------------------------------------------------

    def call(
        self, handle: Any, input: dict[str, Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Run ``handle`` as a child job with ``input`` and return its result::

            label = ctx.step.call(make_label, {"order_id": order_id})

        The child is enqueued once (its id is recorded in the step before it is enqueued, so a
        replay finds it again), the parent is parked while it runs (no worker waits) and
        resumes with the child's result. A child that ended dead, failed or cancelled raises
        ``ChildJobFailedError`` here. The step is named ``call:<job name>`` (``#2``, ``#3``...
        when repeated) unless ``name`` is given.
        """
        label = self._child_step_name(handle, name)
        return self._children(label, handle, [{} if input is None else input], "call")[0]

    def call_many(
        self, handle: Any, inputs: list[dict[str, Any]], *, name: str | None = None
    ) -> list[Any]:
        """Fan out: one child job of ``handle`` per element of ``inputs``; fan in: their results
        in input order, once every child ended::

            totals = ctx.step.call_many(count_rows, [{"tenant": t} for t in tenants])

        ``ChildJobFailedError`` names every child that ended dead, failed or cancelled. An
        empty ``inputs`` returns ``[]`` at once. Named ``call_many:<job name>`` by default.
        """
        if isinstance(inputs, dict | str | bytes) or not hasattr(inputs, "__iter__"):
            raise InvariantError(
                f"call_many takes a list of input dicts, got {type(inputs).__name__}",
                hint="ctx.step.call_many(handle, [{...}, {...}])",
            )
        label = self._child_step_name(handle, name, kind="call_many")
        return self._children(label, handle, list(inputs), "call_many")

    def _child_step_name(self, handle: Any, name: str | None, kind: str = "call") -> str:
        if getattr(handle, "build_request", None) is None:
            raise InvariantError(
                f"{kind}: {handle!r} is not a job", hint="pass a function decorated with @job"
            )
        if name is not None:
            return name
        label = f"{kind}:{handle.name}"
        self._sleeps[label] += 1  # SPEC STEP-09's ordinal names, as anonymous sleeps get
        return label if self._sleeps[label] == 1 else f"{label}#{self._sleeps[label]}"

    def _children(self, name: str, handle: Any, inputs: list[Any], kind: str) -> list[Any]:
        from ..drivers import get_driver
        from ..ids import uuid7_many

        for index, given in enumerate(inputs):
            if not isinstance(given, dict):
                raise InvariantError(
                    f"step {name!r}: inputs[{index}]={given!r} must be a dict of the child's inputs"
                )
        self._claim_name(name)
        call = {"kind": kind, "job": handle.name}
        record = self._records.get(name)
        if record is not None:
            _check_replay(name, record, call, len(inputs))  # SPEC CHILD-08
        if record is not None and record.status == "completed":
            self._replayed.append(name)
            return _child_outcome(name, record.output)
        driver = get_driver()
        recorded = record.output["children"] if record is not None else None
        # every input is checked before anything is written: a bad one enqueues no child
        requests = [handle.build_request(given) for given in inputs]
        now = self.store.now()
        wake_at = now + timedelta(seconds=self.event_poll)
        if recorded is None:
            if requests:  # asked once, before anything is written: a replay never asks again
                _check_depth(name, self.job, driver)
            # The ids are written before any child exists: a crash after this write enqueues
            # the same ids again (a no-op for those already inserted), one before it leaves none.
            ids = uuid7_many(len(requests))
            rows: list[Any] = [None] * len(ids)
            if ids:
                self._write(self._children_record(name, now, wake_at, ids, call))
        else:
            ids = [UUID(i) for i in recorded]
            rows = [driver.get_job(i) for i in ids]
        if any(row is None for row in rows):
            # Each child is inserted under the id recorded for it, so enqueueing it again is a
            # no-op whatever its state: a replay never adds a second child.
            missing = [i for i, row in enumerate(rows) if row is None]
            results = driver.enqueue_many(
                [
                    replace(
                        requests[i], id=ids[i], idempotency_key=_child_key(self.job.id, name, i)
                    )
                    for i in missing
                ]
            )
            # A live child of an earlier pass holds the key (an operator retried the parent
            # from this step): that child is adopted, so the step waits for a job that exists.
            adopted = {i: r.id for i, r in zip(missing, results, strict=True) if r.id != ids[i]}
            if adopted:
                ids = [adopted.get(i, child) for i, child in enumerate(ids)]
                began = record.started_at if record and record.started_at else now
                self._write(self._children_record(name, began, wake_at, ids, call))
                record = self._records[name]
        if any(row is None or row.state not in FINISHED_STATES for row in rows):
            if record is not None and recorded is not None:
                self._write(replace(record, wake_at=wake_at, position=self._position))
            # the children still live: the settle of the last one makes the run due at once
            # (SPEC CHILD-07); wake_at stays as the fallback look
            live = tuple(
                child
                for child, row in zip(ids, rows, strict=True)
                if row is None or row.state not in FINISHED_STATES
            )
            raise StepSuspension(name, wake_at, "children", _seconds(wake_at - now), live)
        failed = [
            {
                "index": i,
                "id": str(row.id),
                "state": row.state,
                "stop_reason": row.stop_reason,
                "last_error": row.last_error,
            }
            for i, row in enumerate(rows)
            if row is not None and row.state != "done"
        ]
        output = {
            **call,
            "children": [str(i) for i in ids],
            "results": [None if failed else row.result for row in rows if row is not None],
        }
        if failed:
            output = {**call, "children": output["children"], "failed": failed}
        self._write(
            StepRecord(
                run_id=self.job.run_id,
                name=name,
                status="completed",
                started_at=record.started_at if record else now,
                output=output,
                completed_at=now,
                position=self._position,
            )
        )
        return _child_outcome(name, output)

    def _children_record(
        self, name: str, now: datetime, wake_at: datetime, ids: list[UUID], call: dict[str, str]
    ) -> StepRecord:
        return StepRecord(
            run_id=self.job.run_id,
            name=name,
            status="waiting",
            started_at=now,
            wake_at=wake_at,
            output={**call, "children": [str(i) for i in ids]},
            position=self._position,
        )

    # --- bookkeeping ------------------------------------------------------------------------

    def _claim_name(self, name: Any) -> None:
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


CHILD_KEY_PREFIX = "xjobs.child:"


def _child_key(parent: UUID, step: str, index: int) -> str:
    """A child's idempotency key: its parent's job, the step and its place in the inputs."""
    return f"{CHILD_KEY_PREFIX}{parent}:{step}:{index}"


def _parent_of(key: str | None) -> UUID | None:
    """The parent job a child's idempotency key names, or None for a job no step called."""
    if not key or not key.startswith(CHILD_KEY_PREFIX):
        return None
    start = len(CHILD_KEY_PREFIX)
    try:
        return UUID(key[start : start + 36]) if key[start + 36 : start + 37] == ":" else None
    except ValueError:
        return None


def _check_depth(name: str, job: ClaimedJob, driver: Any) -> None:
    """Refuse children of ``job`` when it is ``MAX_CHILD_DEPTH`` generations below a job no
    step called (SPEC CHILD-09). A row has no parent column: each child's key names its parent,
    so the walk reads one ancestor's key a generation, at most ``MAX_CHILD_DEPTH - 1`` point
    reads, and a root's children cost none. An ancestor no longer stored ends the walk."""
    depth, key = 0, job.idempotency_key
    while depth < MAX_CHILD_DEPTH:
        parent = _parent_of(key)
        if parent is None:
            return
        depth += 1
        if depth == MAX_CHILD_DEPTH:
            break
        row = driver.get_job(parent)
        if row is None:
            return
        key = row.idempotency_key
    raise ChildDepthError(
        f"step {name!r}: job {job.id} ({job.name[:80]!r}) is a child job {depth} "
        f"generation{'s' if depth > 1 else ''} deep; its children would be {depth + 1}, past "
        f"MAX_CHILD_DEPTH ({MAX_CHILD_DEPTH})",
        depth=depth + 1,
        limit=MAX_CHILD_DEPTH,
    )


def _check_replay(name: str, record: StepRecord, call: dict[str, str], count: int) -> None:
    """Refuse a replay that is not the call the step recorded (SPEC CHILD-08): its children
    were enqueued for that call, and resuming with them would hand back results of another
    job, or of other inputs, without a word."""
    output = record.output if isinstance(record.output, dict) else {}
    children = output.get("children")
    if not isinstance(children, list):
        differs = [f"it was recorded as a {record.status} step that is not a child call"]
    else:
        # records written before the call was recorded name neither: their count still holds
        differs = [
            f"{key} {output[key]!r} was recorded, {call[key]!r} is called now"
            for key in ("kind", "job")
            if output.get(key, call[key]) != call[key]
        ]
        if len(children) != count:
            differs.append(f"{len(children)} input(s) were recorded, {count} are given now")
    if differs:
        raise StepReplayMismatchError(
            f"step {name!r} does not replay as recorded: " + "; ".join(differs),
            step=name,
        )


def _child_outcome(name: str, output: dict[str, Any]) -> list[Any]:
    """The results a completed child step holds, or its failed children raised (replayed the
    same way every time: the step never reads the children again)."""
    failed = output.get("failed")
    if failed:
        listed = ", ".join(f"{c['id']} ({c['state']})" for c in failed)
        raise ChildJobFailedError(
            f"step {name!r}: {len(failed)} of {len(output['children'])} child job(s) ended "
            f"without a result: {listed}",
            children=failed,
        )
    return list(output["results"])


def _seconds(delta: timedelta) -> float:
    return max(0.0, delta.total_seconds())


def _takes_argument(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(
        p.kind is inspect.Parameter.VAR_POSITIONAL
        or (p.kind in positional and p.default is inspect.Parameter.empty)
        for p in params
    )


def _check_match(name: str, match: Any) -> None:
    if match is None:
        return
    if not isinstance(match, dict) or not all(isinstance(k, str) for k in match):
        raise InvariantError(
            f"wait_for_event {name!r}: match={match!r} must be a dict of payload fields",
            hint='e.g. match={"order_id": 42}',
        )
    for key, value in match.items():
        bad_float = isinstance(value, float) and not math.isfinite(value)
        if not isinstance(value, SCALARS) or bad_float:
            raise InvariantError(
                f"wait_for_event {name!r}: match[{key!r}]={value!r} is not a plain value",
                hint="match compares top-level fields with str, number, bool or None values",
            )
