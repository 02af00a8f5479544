"""The operator's view of batches (issue 32): one batch with its members, cancelling one, and
``xjobs batch``'s text. Declaring a batch and joining it live in ``declarations.workflows``."""

from __future__ import annotations

from dataclasses import replace
from uuid import UUID

from .. import redact
from ..declarations.workflows import batch_state
from ..drivers import get_driver
from ..drivers.contract import BatchRecord
from ..drivers.reading import read_driver, reading_primary
from ..errors import BatchNotFoundError, InvariantError
from ..text import storable
from . import audit
from .answers import BatchCallbackReport, BatchMember, BatchReport
from .shared import check_by, iso


def inspect_batch(batch_id: UUID | str, *, members: int = 100) -> BatchReport:
    """A batch's counts, its state and its callbacks' job ids, with up to ``members`` of its
    members' ids and states (a ``BatchReport``)::

        >>> inspect_batch(batch.id)["state"], inspect_batch(batch.id)["pending"]
        ('open', 3)

    ``state`` is ``open`` (members may join), ``closed`` (waiting for ``pending`` members) or
    ``completed`` (its callbacks queued). Raises ``BatchNotFoundError`` for an unknown id.
    """
    driver = read_driver()[0]  # SPEC READ-09
    record = driver.batches().get(_batch_id(batch_id))
    if record is None and driver is not get_driver():
        driver = get_driver()  # just made: not on the read database yet
        record = driver.batches().get(_batch_id(batch_id))
    if record is None:
        raise BatchNotFoundError(f"no batch has id {batch_id}")
    listed = []
    for job_id in driver.batches().members(record.id, limit=members):
        row = driver.reads().get_job(job_id)
        listed.append(
            BatchMember(
                id=str(job_id),
                name=None if row is None else row.name,
                state=None if row is None else row.state,
            )
        )
    return describe(record, members=listed)


def cancel_batch(
    batch_id: UUID | str, *, reason: str | None = None, by: str | None = None
) -> BatchReport:
    """Close the batch and cancel every member still live (a running one stops at its next
    heartbeat), each counted as cancelled; the last one queues the callbacks (``on_failure``,
    ``on_complete``). Cancel goes down to the members, never up. Returns ``inspect_batch``'s
    answer with ``cancelled_now``, how many this call cancelled::

        >>> cancel_batch(batch.id, reason="import aborted")["cancelled_now"]
        9980
    """
    if reason is not None and not isinstance(reason, str):
        raise InvariantError(f"reason={reason!r} must be a string or None")
    driver = get_driver()
    found = _batch_id(batch_id)
    if driver.batches().get(found) is None:
        raise BatchNotFoundError(f"no batch has id {batch_id}")
    # stored as every member's last_error: the two functions cancel_job's reason passes (issue 40)
    stored = storable(redact.redact(reason)) if reason else None
    check_by(by)
    cancelled = driver.batches().cancel(found, stored)
    audit.record("cancel_batch", by=by, target=str(found), reason=reason)
    with reading_primary():  # the answer after its own write (SPEC READ-01)
        return replace(inspect_batch(found, members=0), cancelled_now=cancelled)


def batch_report(batch_id: str | None, *, limit: int = 50) -> tuple[object, str]:
    """``xjobs batch [ID]``: one batch (``inspect_batch``), or the newest batches, as JSON and
    as text."""
    if batch_id is None:
        rows = [describe(r) for r in read_driver()[0].batches().recent(limit=limit)]
        lines = [f"{'batch':<36}  {'state':<9} {'total':>6} {'pending':>7} {'done':>6} {'dead':>5}"]
        lines += [
            f"{r.id:<36}  {r.state:<9} {r.total:>6} {r.pending:>7} {r.done:>6} {r.dead:>5}"
            for r in rows
        ]
        return rows, "\n".join(lines) if rows else "no batches"
    trace = inspect_batch(batch_id, members=limit)
    members = trace.members or []
    lines = [
        f"batch {trace.id}  {trace.state}",
        f"  members    {trace.total}: {trace.pending} pending, {trace.done} done, "
        f"{trace.dead} dead, {trace.failed} failed, {trace.cancelled} cancelled",
        f"  created    {trace.created_at}",
        f"  closed     {trace.closed_at or '-'}",
        f"  completed  {trace.completed_at or '-'}",
        "  callbacks:" if trace.callbacks else "  callbacks: none",
        *(f"    on {c.on:<9} {c.name}  {c.job_id}" for c in trace.callbacks),
        "  members:" if members else "  members: none",
        *(f"    {m.id}  {m.state or '-':<9} {m.name or '-'}" for m in members),
    ]
    return trace, "\n".join(lines)


def describe(record: BatchRecord, *, members: list[BatchMember] | None = None) -> BatchReport:
    """A batch row as the operator surfaces show it (JSON-ready)."""
    return BatchReport(
        id=str(record.id),
        state=batch_state(record),
        total=record.total,
        pending=record.pending,
        done=record.done,
        dead=record.dead,
        failed=record.failed,
        cancelled=record.cancelled,
        # a payload: values under secret keys masked, as a job's input is shown (issue 40)
        input=redact.mask(record.input),
        created_at=record.created_at.isoformat(),
        closed_at=iso(record.closed_at),
        completed_at=iso(record.completed_at),
        callbacks=[
            BatchCallbackReport(on=c.kind, name=c.name, job_id=str(c.id), queue=c.queue)
            for c in record.callbacks
        ],
        members=members,
    )


def _batch_id(value: UUID | str) -> UUID:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except ValueError:
        raise BatchNotFoundError(
            f"{value!r} is not a batch id", hint="a batch id is a UUID"
        ) from None
