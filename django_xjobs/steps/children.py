"""Child jobs from a step: ``ctx.step.call`` and ``call_many`` (issue 32).

A child's id is recorded in the step before it is enqueued, and its idempotency key names its
parent, the step and its place in the inputs, so a replay finds the same children and never
adds a second one (SPEC CHILD-01). The parent is parked while they run and resumes with their
results in input order, or a ``ChildJobFailedError`` naming those that ended without one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from ..drivers.contract import ClaimedJob, JobDriver, StepRecord
from ..errors import (
    ChildDepthError,
    ChildJobFailedError,
    InvariantError,
    JobNotCancellableError,
    StepReplayMismatchError,
    StepSuspension,
)
from ..states import FINISHED_STATES, LIVE_STATES
from .record import StepRecorder, _seconds

#: generations of child jobs below a job nobody called: a job this deep calls no children
#: (``ChildDepthError``), so a handler that calls its own job ends there instead of adding a
#: generation each run for ever (SPEC CHILD-09)
MAX_CHILD_DEPTH = 16


class Children(StepRecorder):
    """The steps that run child jobs and wait for them: part of ``Steps``."""

    # --- child jobs -------------------------------------------------------------------------

    def call(
        self, handle: object, input: Mapping[str, object] | None = None, *, name: str | None = None
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
        self, handle: object, inputs: Sequence[Mapping[str, object]], *, name: str | None = None
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
            rows = [driver.reads().get_job(i) for i in ids]
        if any(row is None for row in rows):
            # Each child is inserted under the id recorded for it, so enqueueing it again is a
            # no-op whatever its state: a replay never adds a second child.
            missing = [i for i, row in enumerate(rows) if row is None]
            results = driver.jobs().enqueue_many(
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


def cancel_children(driver: JobDriver, parent: UUID, run_id: UUID) -> None:
    """Cancel goes down: the live children a waiting ``call``/``call_many`` step of the
    cancelled job ``parent`` waits for are cancelled too, and theirs in turn (SPEC CHILD-06).
    The one walk every cancel takes: ``cancel_job``, a cancel by filter (BULK-05) and a cancel
    by event (CANCEL-07). Each child is its own cancel, in the caller's transaction when it has
    one: cancelling the parent again finishes a propagation a crash cut short. A child may live
    in another jobs database (its queue routes it there): the driver cancels it where it is."""
    for record in driver.steps().list(run_id):
        output = record.output
        if record.status != "waiting" or not isinstance(output, dict):
            continue
        for child_id in output.get("children") or ():
            child = driver.reads().get_job(UUID(str(child_id)))
            if child is None or child.state not in LIVE_STATES:
                continue
            try:
                cancelled = driver.jobs().cancel(child.id, f"parent {parent} was cancelled")
            except JobNotCancellableError:  # it ended meanwhile
                continue
            cancel_children(driver, cancelled.id, cancelled.run_id)


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
        row = driver.reads().get_job(parent)
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
