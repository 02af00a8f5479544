"""The step runner (``ctx.step``): memoized steps that replay from storage, durable sleeps and
event waits, step deadlines, and the write fence.

A step's result is stored before the next step starts, so an attempt that fails at step 3 runs
step 3 again and replays 1 and 2 from their records. Sleeps and waits park the run (no process
held, no attempt burned) by raising ``StepSuspension``.

Every time is on the store's clock (``store.now()``: the database's ``now()`` on PostgreSQL),
never this process's: an event's ``published_at`` and a wait's ``started_at`` are compared on one
clock even when the publisher and the worker run on two machines (issue 11).

``Steps`` is the face a handler sees, in parts: ``record.py`` (the recorder: names, records
and the fenced write every step ends in), ``waits.py`` (sleeps and event waits),
``children.py`` (child jobs), ``atomic.py`` (atomic steps), ``patches.py`` (``patched``, the
markers that let one declaration serve old and new runs); ``asynchronous.py`` holds its
awaitable twin and ``events.py`` ``publish_event``.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from django.db import connections

from ..durations import format_seconds
from ..errors import JobTimeoutError
from .children import Children
from .patches import Patches
from .waits import Waits

if TYPE_CHECKING:
    from .atomic import Atomic

T = TypeVar("T")


class Steps(Waits, Children, Patches):
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

    # --- run --------------------------------------------------------------------------------

    def run(self, name: str, fn: Callable[..., T]) -> T:
        """Run ``fn`` once for this run, ever; later attempts get its stored result back.

        ``fn()`` or ``fn(signal)``: the signal is set when the run is stopped or the step passes
        the job's ``step_timeout``. The result must be JSON::

            charge = ctx.step.run("charge", lambda signal: gateway.charge(order, signal=signal))
        """
        done, stored = self.begin(name)
        if done:
            # replayed: what fn returned on the run's first pass, stored as JSON
            return cast(T, stored)
        try:
            value = self._call(name, fn)
        except BaseException as error:
            self.fail(name, error)
            raise
        return self.finish(name, value)

    def _call(self, name: str, fn: Callable[..., T]) -> T:
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
        return cast(T, outcome.get("value"))  # the thread stored fn's result under "value"

    # --- atomic ---------------------------------------------------------------------------

    @overload
    def atomic(self, name: str) -> Atomic: ...

    @overload
    def atomic(self, name: str, fn: Callable[[], T]) -> T: ...

    def atomic(self, name: str, fn: Callable[[], object] | None = None) -> object:
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


def _takes_argument(fn: Callable[..., object]) -> bool:
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
