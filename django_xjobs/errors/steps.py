"""What a step gets wrong (``ctx.step``): a name used twice, too many steps, an output that is
not JSON, an atomic block in the wrong transaction, a replay that is not the recorded call, and
child jobs that failed or nest too deep."""

from __future__ import annotations

from typing import Any

from .base import XJobsError


class StepDuplicateError(XJobsError):
    """A step name was used twice in one attempt."""

    code = "X_STEP_DUPLICATE"
    retry = "terminal"  # SPEC CLASS-02: the same code would fail the same way again
    default_hint = "give each step its own name; a loop can add its index: f'fetch:{page}'"


class StepPatchError(XJobsError):
    """``ctx.step.patched`` was asked outside a running job's steps, or twice for one name in
    one run."""

    code = "X_STEP_PATCH"
    retry = "terminal"  # the same code asks the same way again
    default_hint = (
        "ask ctx.step.patched(name) inside the job's handler, once per patch; give each change "
        "its own name"
    )


class StepLimitError(XJobsError):
    """A run started more steps than ``XJOBS["MAX_STEPS_PER_RUN"]`` allows."""

    code = "X_STEP_LIMIT"
    retry = "terminal"
    default_hint = (
        'split the work into child jobs (ctx.step.call_many), or raise XJOBS["MAX_STEPS_PER_RUN"]'
    )


class StepOutputInvalidError(XJobsError):
    """A step returned a value that cannot be stored as JSON."""

    code = "X_STEP_OUTPUT_INVALID"
    default_hint = "return JSON data from the step (dict, list, str, number, bool, None)"


class StepAtomicAliasError(XJobsError):
    """An atomic step's block wrote to a database other than the jobs database."""

    code = "X_STEP_ATOMIC_ALIAS"
    retry = "terminal"  # the same block would write there again
    default_hint = (
        "only writes on the jobs database (XJOBS['DATABASE']) commit with the step; "
        "move the other write to a step.run step of its own"
    )


class StepAtomicNestedError(XJobsError):
    """An atomic step was opened inside a transaction already open on the jobs database."""

    code = "X_STEP_ATOMIC_NESTED"
    retry = "terminal"  # the same code opens the same transaction again
    default_hint = (
        "the step must own its transaction to commit it with its record: open "
        "ctx.step.atomic(...) outside transaction.atomic() and outside another atomic step"
    )


class StepReplayMismatchError(XJobsError):
    """A replayed ``ctx.step.call``/``call_many`` is not the call its step recorded: another
    job, the other kind of call, or another number of inputs. The record is what ran (its
    children exist), so the step refuses rather than resume with children it no longer asks
    for."""

    code = "X_STEP_REPLAY_MISMATCH"
    retry = "terminal"  # every replay reads the same record
    default_hint = (
        "a deploy changed this step while runs were parked in it: keep the call as recorded "
        "until those runs end, or give the changed call a new name= (it then starts afresh)"
    )


class ChildJobFailedError(XJobsError):
    """A child job called from a step (``ctx.step.call``/``call_many``) ended without a result.

    ``children`` lists each child that ended dead, failed or cancelled, in input order, as
    ``{"index", "id", "state", "stop_reason", "last_error"}``; ``child_id``, ``state`` and
    ``last_error`` are the first of them. The parent catches it like any error; uncaught, it
    ends the parent at once (a retry would replay the same children)::

        try:
            label = ctx.step.call(make_label, {"order_id": order_id})
        except ChildJobFailedError as error:
            label = fallback_label(order_id, error.last_error)
    """

    code = "X_CHILD_FAILED"
    retry = "terminal"
    default_hint = "catch ChildJobFailedError in the parent, or fix the child and retry both"

    def __init__(self, message: str, *, children: list[dict[str, Any]], **meta: Any) -> None:
        super().__init__(message, children=children, **meta)
        self.children = children
        first = children[0] if children else {}
        self.child_id: str | None = first.get("id")
        self.state: str | None = first.get("state")
        self.last_error: str | None = first.get("last_error")


class ChildDepthError(XJobsError):
    """A step asked for child jobs (``ctx.step.call``/``call_many``) from a job already
    ``MAX_CHILD_DEPTH`` generations below a job nobody called: its children would nest one
    deeper than the bound. Nothing is recorded or enqueued; a retry would ask the same, so it
    is terminal. A handler that calls its own job as a child hits it instead of filling the
    table one generation per run."""

    code = "X_CHILD_DEPTH"
    retry = "terminal"
    default_hint = (
        "let the parent loop over ctx.step.call instead of each child calling the next, or "
        "enqueue the next job instead of calling it"
    )
