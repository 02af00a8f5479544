"""What a published event does to the declared jobs (issue 43): the live runs its ``cancel_on``
declarations name are cancelled and its ``on_event`` declarations are started, then the event
is stored with what was done — all in the publisher's transaction.

The jobs database's transaction holds it all: the caller's, when the caller is in
``transaction.atomic()`` there, else one opened here. A declaration whose job cannot be made
from the event's data is refused with its coded error and recorded on the event (SPEC EVT-08);
its write, if it got that far, is undone by a savepoint of its own, so the publish and the
other declarations still commit. An event stored in another database (``publish_event(using=
...)``) starts its jobs by the ordinary enqueue route: staged in the outbox of the database
whose ``atomic()`` block the caller is in, else published directly (SPEC EVT-07).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from uuid import UUID

from django.db import DatabaseError, transaction

from .. import log, redact
from ..declarations.registry import DeclaredJob, EventDeclarations
from ..drivers.contract import EventRecord, EventStore, JobDriver
from ..errors import InputInvalidError, XJobsError
from ..run import enqueue
from ..text import storable
from .children import cancel_children


@dataclass(frozen=True)
class Published:
    """The event a publish stores: what ``EventStore.publish`` is given besides its outcome."""

    id: UUID
    name: str
    payload: object
    correlation_key: str | None
    ttl: float
    tenant_id: str | None


def publish(
    event: Published, declared: EventDeclarations, store: EventStore, driver: JobDriver, alias: str
) -> EventRecord:
    """Cancel, start, then store ``event`` (in ``alias``'s ``store``) with how many it cancelled
    and started and which declarations it refused, in one transaction (SPEC EVT-07..11)."""
    direct = alias == driver.steps().using
    # the event's database: the jobs' too, or the one whose outbox stages them (SPEC EVT-07)
    with transaction.atomic(using=alias):
        cancelled = sum(_cancel(event, h, fields, driver) for h, fields in declared.cancels)
        started, refused = 0, []
        for handle in declared.starts:
            try:
                started += _start(event, handle, direct=direct, driver=driver)
            except XJobsError as error:
                refused.append(_refusal(handle, error.code, error.message))
                log.event(
                    logging.WARNING,
                    "xjobs.event.refused",
                    event=event.name,
                    id=event.id,
                    job=handle.name,
                    code=error.code,
                    error=error.message,
                )
        return store.publish(
            id=event.id,
            name=event.name,
            payload=event.payload,
            correlation_key=event.correlation_key,
            ttl=event.ttl,
            tenant_id=event.tenant_id,
            started=started,
            cancelled=cancelled,
            refused=refused,
        )


def _cancel(
    event: Published, handle: DeclaredJob, fields: tuple[str, ...], driver: JobDriver
) -> int:
    """SPEC EVT-09: the live runs of ``handle`` of the event's tenant whose inputs equal the
    event's data on ``fields``; an event whose data lacks one of them cancels none."""
    data = event.payload
    if not isinstance(data, Mapping) or any(field not in data for field in fields):
        return 0
    reason = storable(redact.redact(f"cancelled by event {event.name!r} ({event.id})"))
    match = {field: data[field] for field in fields}
    count, parked = driver.events().cancel(
        handle.name, tenant_id=event.tenant_id, match=match, reason=reason
    )
    for parent in parked:  # SPEC CANCEL-07: cancel goes down, as cancel_job's does (CHILD-06)
        row = driver.reads().get_job(parent)
        if row is not None:
            cancel_children(driver, row.id, row.run_id)
    return count


def _start(event: Published, handle: DeclaredJob, *, direct: bool, driver: JobDriver) -> int:
    """SPEC EVT-07: one job of ``handle``, the event's data as its inputs, for the event's
    tenant; 1 when it was enqueued, 0 when a live job held its key (deduplicated)."""
    if not isinstance(event.payload, Mapping):
        raise InputInvalidError(
            f"job {handle.name!r}: the data of event {event.name!r} is "
            f"{type(event.payload).__name__}, not an object of inputs",
            hint="publish the event with a dict of the job's inputs as its data",
        )
    made = handle.using(tenant_id=event.tenant_id, enqueued_by=f"event:{event.id}")
    try:
        request = made.build_request(event.payload)
    except XJobsError:
        raise
    except Exception as error:  # a key or tenant callable the data does not suit: refused too
        raise InputInvalidError(
            f"job {handle.name!r}: its key or tenant could not be made from the data of event "
            f"{event.name!r} ({type(error).__name__}: {error})",
            hint="make the callable take every field the event carries (**_ for the rest)",
        ) from error
    if not direct:  # the event is in another database: the ordinary route (SPEC EVT-07)
        result = enqueue.submit(request, outbox=None, on_conflict="dedupe")
        return 0 if result.deduped else 1
    try:
        # its own savepoint: a refused write leaves the publisher's transaction usable
        with transaction.atomic(using=driver.steps().using):
            # never staged: straight to the jobs table, in the transaction it just opened
            result = enqueue.submit(request, outbox=False, on_conflict="dedupe")
    except DatabaseError as error:
        raise InputInvalidError(
            f"job {handle.name!r}: its row was refused: {type(error).__name__}"
        ) from error
    return 0 if result.deduped else 1


def _refusal(handle: DeclaredJob, code: str, message: str) -> dict[str, str]:
    return {"job": handle.name, "code": code, "message": storable(redact.redact(message))}
