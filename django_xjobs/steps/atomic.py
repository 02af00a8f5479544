"""``ctx.step.atomic(name)``: a step whose database writes happen exactly once.

The block runs inside ``transaction.atomic()`` on the jobs database. When it ends, the step's
completed record and ``step.result`` are written in that same transaction by the step store's
fenced write, which locks the job's row for as long as the transaction lasts — so the block's
writes, the record and the result commit together while this run provably holds the job, or
roll back together. On replay the step is ``done``: the block stops at its first database
statement and ``step.result`` is the stored result.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from asgiref.sync import sync_to_async
from django.db import connections, transaction

from .. import conf
from ..errors import JobAbortedError, LeaseLostError, StepAtomicAliasError, StepAtomicNestedError
from .output import check_output

if TYPE_CHECKING:
    from .record import StepRecorder

T = TypeVar("T")


#: the statements another database may still run inside the block: reads write nothing
READS = frozenset({"SELECT", "SHOW", "EXPLAIN"})


class _Replayed(BaseException):
    """Internal: ends a replayed block at its first database statement. Not an ``Exception``,
    so a handler's ``except Exception`` inside the block cannot keep it running."""


@dataclass(eq=False)
class AtomicStep:
    """What ``with ctx.step.atomic(name) as step`` binds.

    ``done`` is True when the step completed in an earlier attempt: the block's first database
    statement then ends it quietly and, after the block, ``result`` is the stored result.
    """

    name: str
    done: bool
    #: set it in the block: stored with the step record, in the same transaction (JSON)
    result: Any = None


class Atomic:
    """The context manager ``ctx.step.atomic(name)`` returns (issue 17)."""

    def __init__(self, steps: StepRecorder, name: str) -> None:
        self._steps, self._name = steps, name
        self._guards = ExitStack()
        self._transaction: transaction.Atomic | None = None
        self._step = AtomicStep(name, done=False)
        self._stored: Any = None

    def __enter__(self) -> AtomicStep:
        steps, name = self._steps, self._name
        alias = steps.store.alias(steps.job.id)  # SPEC SHARD-05: the job's own database
        _refuse_nested(alias, name)
        done, self._stored = steps.begin(name)
        if done:  # the block's writes already committed, with the record
            self._step = AtomicStep(name, done=True, result=self._stored)
            for each in connections:
                self._guards.enter_context(connections[each].execute_wrapper(_replayed))
            return self._step
        self._transaction = transaction.atomic(using=alias)
        self._transaction.__enter__()
        steps.inside_atomic = name
        for other in connections:
            if other != alias:  # a write there would not commit with the step
                refuse = _WriteRefusal(other, name, alias)
                self._guards.enter_context(connections[other].execute_wrapper(refuse))
        return self._step

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        self._guards.close()
        if self._step.done:
            self._step.result = self._stored  # whatever the replayed block set
            return isinstance(error, _Replayed)
        assert self._transaction is not None
        self._steps.inside_atomic = None
        if error is not None:  # the rollback takes every write of the block
            self._transaction.__exit__(kind, error, traceback)
            self._steps.fail(self._name, error)
            return False
        try:
            self._record()
        except BaseException as failure:
            self._transaction.__exit__(type(failure), failure, failure.__traceback__)
            self._steps.fail(self._name, failure)
            raise
        try:
            self._transaction.__exit__(None, None, None)  # the commit
        except BaseException as failure:
            self._steps.fail(self._name, failure)  # the record went with the rollback
            raise
        return False

    def _record(self) -> None:
        """The completed record, in the block's transaction, fenced on the lease."""
        steps = self._steps
        check_output(self._name, self._step.result)
        try:
            steps.complete(self._name, self._step.result)
        except JobAbortedError:
            if not isinstance(steps.signal.reason, LeaseLostError):
                raise
            raise LeaseLostError(
                f"atomic step {self._name!r} rolled back: job {steps.job.id} is no longer "
                "held by this run",
                hint="its lease lapsed, it was cancelled or another run claimed it; nothing "
                "the block wrote was committed",
            ) from None


class AsyncAtomic:
    """``async with ctx.step.atomic(name) as step`` in an ``async def`` handler.

    The transaction is opened and closed through ``sync_to_async``, on the thread where the
    async ORM (``acreate``, ``aupdate``...) runs its queries, so they join it.
    """

    def __init__(self, block: Atomic) -> None:
        self._block = block

    async def __aenter__(self) -> AtomicStep:
        return await sync_to_async(self._block.__enter__)()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        return await sync_to_async(self._block.__exit__)(kind, error, traceback)


def call(block: Atomic, fn: Callable[[], T]) -> T:
    """``ctx.step.atomic(name, fn)``: ``fn()`` inside the block, skipped on replay."""
    with block as step:
        if not step.done:
            step.result = fn()
    return cast(T, step.result)  # fn's result, or on replay the one it stored as JSON


async def acall(block: AsyncAtomic, fn: Callable[[], Awaitable[T] | T]) -> T:
    """``await ctx.step.atomic(name, fn)``: a sync ``fn`` runs through ``sync_to_async``."""
    async with block as step:
        if not step.done:
            if inspect.iscoroutinefunction(fn):
                step.result = await fn()
            else:
                step.result = await sync_to_async(fn)()
    return cast(T, step.result)  # fn's result, or on replay the one it stored as JSON


def _refuse_nested(alias: str, name: str) -> None:
    # a test's own wrapping transaction (TestCase, pytest-django's db) is not the caller's: the
    # step nests in it as a savepoint, as it runs on the worker's autocommit connection
    blocks = connections[alias].atomic_blocks
    if any(not getattr(block, "_from_testcase", False) for block in blocks):
        raise StepAtomicNestedError(
            f"atomic step {name!r} was opened inside a transaction on database {alias!r}"
        )


def _replayed(execute: Callable[..., object], sql: object, *args: Any) -> Any:
    raise _Replayed


class _WriteRefusal:
    """An ``execute_wrapper`` for a database other than the job's own, ``home``."""

    def __init__(self, alias: str, step: str, home: str) -> None:
        self.alias, self.step, self.home = alias, step, home

    def __call__(self, execute: Callable[..., object], sql: object, *args: Any) -> Any:
        text = sql.decode() if isinstance(sql, bytes) else str(sql)
        verb = text.lstrip().split(None, 1)[0].upper() if text.strip() else ""
        if verb not in READS:
            raise self.refusal(text)
        return execute(sql, *args)

    def refusal(self, text: str) -> StepAtomicAliasError:
        wrote = f"wrote to database {self.alias!r}: {text[:60]!r}"
        if self.home == conf.get().database:
            return StepAtomicAliasError(f"atomic step {self.step!r} {wrote}")
        # a job routed to another database (SPEC SHARD-57): its own database is the one that
        # commits with the step, not XJOBS["DATABASE"], which the default hint names
        return StepAtomicAliasError(
            f"atomic step {self.step!r} of a job in database {self.home!r} {wrote}",
            hint=f"the job's queue is routed to {self.home!r} (XJOBS['QUEUE_DATABASES'] or "
            f"ROUTER), and only writes on {self.home!r} commit with the step: move the write "
            f"on {self.alias!r} to a step.run step of its own, or route the queue to "
            f"{self.alias!r}",
        )
