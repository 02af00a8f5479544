"""Batches: many jobs, and a callback that runs once after the last of them ended (issue 32).

::

    with Batch(on_complete=send_report, input={"import_id": 7}) as batch:
        for row in rows:
            import_row.enqueue(row_id=row.pk)  # a member of the batch

    @job()
    def send_report(ctx, import_id: int, batch: dict): ...  # batch: id, total, done, dead, ...

Each member's final state (done, dead, failed, cancelled) is counted in its batch in the same
write that settles it, and the write that counts the last member of a closed batch inserts the
callbacks: they exist exactly when every member has ended, once, whatever crashes in between
(docs/concepts/workflows.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import ContextVar, Token
from datetime import datetime
from functools import partial
from typing import Any, Protocol
from uuid import UUID

from django.db import transaction

from .. import conf
from ..drivers import get_driver
from ..drivers.contract import BatchCallback, EnqueueRequest, EnqueueResult, JobDriver
from ..errors import BatchClosedError, InputInvalidError, InvariantError
from ..ids import uuid7
from ..payload import NotJSON, check_json, encode

#: the batch whose ``with`` block the caller is in: its enqueues join it
_current: ContextVar[Batch | None] = ContextVar("xjobs_batch", default=None)

#: the counts a callback receives under ``batch``, as a sample to check its signature with
_SAMPLE = {"id": "", "total": 0, "done": 0, "dead": 0, "failed": 0, "cancelled": 0}


def current_batch() -> Batch | None:
    """The batch an enqueue made now joins (inside ``with batch:``), or None."""
    return _current.get()


class Batch:
    """Jobs that end together: once every member reached a final state (done, dead, failed,
    cancelled) and the batch is closed, ``on_complete`` is queued, and ``on_success`` (every
    member done) or ``on_failure`` (any other end), exactly once, with ``input`` and the
    members' counts as ``batch={"id", "total", "done", "dead", "failed", "cancelled"}``::

        batch = Batch(on_success=ship, on_failure=refund, input={"order_id": 7})
        with batch:                      # enqueues in the block join it; the exit closes it
            charge.enqueue(order_id=7)
            batch.add(reserve, order_id=7)

    Inside ``atomic()`` the batch and its members commit with the caller's transaction and
    vanish with a rollback. Members are added until ``close()`` (the end of the ``with``
    block); an enqueue whose key a live job holds returns that job and is not a member.
    """

    def __init__(
        self,
        on_complete: object = None,
        *,
        on_success: object = None,
        on_failure: object = None,
        input: Mapping[str, object] | None = None,
    ) -> None:
        self.id: UUID = uuid7()
        self.input = {} if input is None else input
        if not isinstance(self.input, dict):
            raise InvariantError(f"Batch input={input!r} must be a dict of the callbacks' inputs")
        if "batch" in self.input:
            raise InvariantError(
                "Batch input may not name 'batch'", hint="the callbacks receive the counts there"
            )
        # stored on the batch row whatever its callbacks take: checked as a job's input is
        # (depth, JSON, the payload cap), not only through a callback's signature (issue 40)
        try:
            check_json(self.input, "input")
        except NotJSON as error:
            raise InputInvalidError(
                f"Batch {error.path}: {error.reason}",
                hint="a batch's input is stored as JSON; pass ids and plain values",
            ) from None
        encode(self.input, limit=conf.get().max_payload_bytes, what="the Batch input")
        given = (("complete", on_complete), ("success", on_success), ("failure", on_failure))
        self.callbacks = tuple(
            self._callback(kind, handle) for kind, handle in given if handle is not None
        )
        self._opened = False
        self._closed = False
        #: members waiting for another database's commit (``_defer``), and whether to close then
        self._staged: list[EnqueueRequest] | None = None
        self._close_at_commit = False
        self._tokens: list[Token[Batch | None]] = []

    def __repr__(self) -> str:
        return f"<Batch {self.id}{' closed' if self._closed else ''}>"

    def _callback(self, kind: str, handle: object) -> BatchCallback:
        build = getattr(handle, "build_request", None)
        if build is None:
            raise InvariantError(
                f"on_{kind}={handle!r} is not a job", hint="pass a function decorated with @job"
            )
        # checked now against the callback's signature, with the counts it will receive
        request: EnqueueRequest = build({**self.input, "batch": _SAMPLE})
        return BatchCallback(
            kind=kind,
            id=uuid7(),
            run_id=uuid7(),
            name=request.name,
            queue=request.queue,
            key=f"xjobs.batch:{self.id}:{kind}",
            max_attempts=request.max_attempts,
            priority=request.priority,
            tenant_id=request.tenant_id,
        )

    # --- members ----------------------------------------------------------------------------

    def add(self, handle: Any, /, **inputs: Any) -> EnqueueResult:
        """Enqueue one run of ``handle`` with ``inputs`` as a member of this batch."""
        return self.submit([handle.build_request(inputs)])[0]

    def submit(self, requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
        """Insert ``requests`` as members: in the caller's transaction when it is on the jobs
        database, at its commit when it is on another one, else at once."""
        if self._closed:
            raise BatchClosedError(f"batch {self.id} is closed: no member was added")
        if not requests:
            return []
        driver = get_driver()
        if self._deferred(driver):
            staged = [r if r.id else r.with_id(uuid7()) for r in requests]
            self._staged = [*(self._staged or []), *staged]
            return [
                EnqueueResult(id=r.id or self.id, run_id=None, deduped=None, staged=True)
                for r in staged
            ]
        self._open(driver)
        return driver.batches().add(self.id, requests)

    def close(self) -> None:
        """No member joins from now on; if every member has already ended, the callbacks are
        queued now (in the caller's transaction, as the members were)."""
        if self._closed:
            return
        self._closed = True
        driver = get_driver()
        if self._deferred(driver):
            self._close_at_commit = True
            return
        self._open(driver)
        driver.batches().close(self.id)

    def __enter__(self) -> Batch:
        self._tokens.append(_current.set(self))
        return self

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._tokens.pop())
        # closed on an error too: the members already enqueued still run and end, and an open
        # batch would never queue its callbacks (inside atomic() the rollback takes it all)
        self.close()

    # --- where the writes go ----------------------------------------------------------------

    def _open(self, driver: JobDriver) -> None:
        if not self._opened:
            driver.batches().open(self.id, input=self.input, callbacks=self.callbacks)
            self._opened = True

    def _deferred(self, driver: JobDriver) -> bool:
        """Whether the caller is in a transaction on a database other than the jobs' own:
        the batch is then written when that transaction commits (and never, on a rollback)."""
        if self._staged is not None:
            return True
        settings = conf.get()
        # as a plain enqueue: with the outbox off, nothing waits for the caller's commit
        alias = None if settings.outbox == "off" else conf.atomic_alias(settings)
        if alias is None or alias == driver.database:
            return False
        self._staged = []
        transaction.on_commit(partial(self._publish, driver), using=alias)
        return True

    def _publish(self, driver: JobDriver) -> None:
        staged, self._staged = self._staged or [], None
        self._open(driver)
        if staged:
            driver.batches().add(self.id, staged)
        if self._close_at_commit:
            driver.batches().close(self.id)


class _Closes(Protocol):
    """A batch row (``BatchRecord``, the admin's ``JobBatch``): when it closed and completed."""

    @property
    def closed_at(self) -> datetime | None: ...

    @property
    def completed_at(self) -> datetime | None: ...


def batch_state(record: _Closes) -> str:
    """open, closed or completed, from a batch's ``closed_at`` and ``completed_at``."""
    if record.completed_at is not None:
        return "completed"
    return "open" if record.closed_at is None else "closed"
