"""``publish_event``: record an event that waiting steps can receive, in any process."""

from __future__ import annotations

import threading
import time
from functools import partial

from .. import conf
from ..declarations.registry import event_declarations
from ..drivers import get_driver
from ..drivers.contract import EventRecord, EventStore
from ..durations import Duration, parse_duration
from ..errors import InputInvalidError, InvariantError, OutboxNoTxError
from ..ids import uuid7
from ..metrics import events as event_metrics
from ..payload import NotJSON, check_json, encode
from ..run.context import current_job
from ..text import check_name
from . import triggers

_PURGE_EVERY = 60.0  # seconds between sweeps of expired events, per process
_last_purge = [0.0]
_purge_lock = threading.Lock()


def publish_event(
    event: str,
    data: object = None,
    *,
    correlation_key: str | None = None,
    ttl: Duration = "7d",
    using: str | None = None,
    tenant_id: str | None = None,
) -> EventRecord:
    """Store an event; every step waiting for it (now or until ``ttl`` runs out) receives it.

    ::

        publish_event("order.shipped", {"order_id": 42})

    The runs parked on a step it answers are released in the same statement: due at once, and
    the workers of their queues woken (SPEC EVT-06); a waiter's ``event_poll`` is only the
    safety net. Inside ``transaction.atomic()`` on the jobs database, the event and the
    release commit or roll back with the caller: no waiter wakes before the commit. Events are
    not consumed: two waiting runs can both receive one (SPEC EVT-03). Its times come from the
    store's clock (the database's ``now()``), not this machine's, so a publisher whose clock is
    behind still wakes a run that began waiting earlier.

    An event belongs to ``tenant_id`` (default: the tenant of the job publishing it, if a job
    is running, else none) and wakes only waiters of that tenant: a run of tenant A never
    receives tenant B's data unless it waits with ``any_tenant=True``.

    Jobs declared with ``on_event`` for this name are enqueued, its data as their inputs, and
    the live runs of jobs declared with ``cancel_on`` for it whose inputs match are cancelled,
    for its tenant, in the same transaction (docs/concepts/events.md). The record returned
    says how many runs it ``released``, ``started`` and ``cancelled``, and which declarations
    it ``refused``.
    """
    if not isinstance(event, str) or not event:
        raise InvariantError(f"event name {event!r} must be a non-empty string")
    if correlation_key is not None and (
        not isinstance(correlation_key, str) or not correlation_key
    ):
        raise InvariantError(f"correlation_key={correlation_key!r} must be a non-empty string")
    check_name(event, "event name")
    check_name(correlation_key, "correlation_key")
    try:
        check_json(data, "data")
    except NotJSON as error:
        raise InputInvalidError(
            f"event {event!r}: {error.path}: {error.reason}", hint="event data is stored as JSON"
        ) from None
    encode(data, limit=conf.get().max_payload_bytes, what=f"the data of event {event!r}")
    seconds = parse_duration(ttl, field="ttl")
    _check_transaction(event, using)
    store = _store(using)
    if tenant_id is None:
        running = current_job()
        tenant_id = running.tenant_id if running is not None else None
    elif not isinstance(tenant_id, str) or not tenant_id:
        raise InvariantError(f"tenant_id={tenant_id!r} must be a non-empty string or None")
    check_name(
        tenant_id, "tenant_id"
    )  # a NUL or lone surrogate: coded, not the driver's (issue 40)
    published = triggers.Published(uuid7(), event, data, correlation_key, seconds, tenant_id)
    declared = event_declarations(event)  # the registry's index: one lookup per publish
    if declared:
        alias = using or conf.get().database
        record = triggers.publish(published, declared, store, get_driver(), alias)
    else:  # nothing declared on it: the one statement, in autocommit or the caller's transaction
        record = store.publish(
            id=published.id,
            name=event,
            payload=data,
            correlation_key=correlation_key,
            ttl=seconds,
            tenant_id=tenant_id,
        )
    _count_at_commit(event, using)
    _maybe_purge(store)
    return record


def _check_transaction(event: str, using: str | None) -> None:
    """Under ``XJOBS["OUTBOX"] = "required"`` an event, like an enqueue, needs a transaction."""
    settings = conf.get()
    if settings.outbox != "required":
        return
    from django.db import connections

    if not connections[using or settings.database].in_atomic_block:
        raise OutboxNoTxError(
            f"event {event!r} was published outside transaction.atomic()",
            hint='XJOBS["OUTBOX"] is "required": publish inside atomic()',
        )


def _count_at_commit(event: str, using: str | None) -> None:
    """``xjobs_events_published_total`` counts an event once it is stored for good: when the
    caller's transaction commits (a rolled-back publish is not counted), at once outside one."""
    from django.db import connections, transaction

    alias = using or conf.get().database
    if connections[alias].in_atomic_block:
        transaction.on_commit(partial(event_metrics.published, event), using=alias)
    else:
        event_metrics.published(event)


def _store(using: str | None) -> EventStore:
    driver = get_driver()
    return driver.events() if using is None else driver.events(using)


def _maybe_purge(store: EventStore) -> None:
    """Sweep expired events at most once a minute per process (SPEC EVT-04)."""
    with _purge_lock:
        if time.monotonic() - _last_purge[0] < _PURGE_EVERY:
            return
        _last_purge[0] = time.monotonic()
    store.purge()
