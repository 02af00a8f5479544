"""Where an enqueue goes: staged in the caller's transaction, or straight to the job store."""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import partial
from uuid import UUID

from django.db import connections, transaction

from .. import conf, log
from ..drivers import get_driver
from ..drivers.base import EnqueueRequest, EnqueueResult
from ..errors import InvariantError, OutboxNoTxError
from ..ids import uuid7
from .relay import publish_batch
from .store import OutboxStore


def atomic_alias(settings: conf.XJobsSettings) -> str | None:
    """The outbox database whose ``atomic()`` block the caller is in, if any (SPEC OUTBOX-20)."""
    for alias in settings.outbox_databases:
        if connections[alias].in_atomic_block:
            return alias
    return None


def submit(request: EnqueueRequest, *, outbox: bool | None, on_conflict: str) -> EnqueueResult:
    """Stage ``request`` in the caller's transaction, or publish it directly (SPEC OUTBOX-01/04).

    A staged job's id is minted here and returned at once; the publish inserts the job with
    that id, right after commit (the fast path) or through the relay. A rollback takes the row
    away with everything else the transaction wrote, and the id then names nothing.
    """
    settings = conf.get()
    use_outbox = outbox is not False and settings.outbox != "off"
    alias = atomic_alias(settings) if use_outbox else None
    if alias is None:
        if use_outbox and settings.outbox == "required":
            raise OutboxNoTxError(
                f"job {request.name!r} was enqueued outside transaction.atomic()",
                hint='XJOBS["OUTBOX"] is "required": enqueue inside atomic(), or pass '
                ".using(outbox=False) to publish directly",
            )
        return get_driver().enqueue(request)
    if on_conflict == "error":
        raise InvariantError(
            'on_conflict="error" cannot be decided inside atomic(): the job is only staged',
            hint="use .using(outbox=False, on_conflict='error') to enqueue directly",
        )
    job_id = request.id or uuid7()
    staged = replace(request, id=job_id)
    store = get_driver().outbox_store(alias)
    if store.transactional:
        store.stage(staged)
        transaction.on_commit(partial(fast_path, store, [job_id]), using=alias)
    else:  # a store outside the database can only stage what has committed
        transaction.on_commit(partial(stage_at_commit, store, staged, job_id), using=alias)
    return EnqueueResult(id=job_id, run_id=None, deduped=None, staged=True)


def fast_path(store: OutboxStore, ids: list[UUID]) -> None:
    """After commit, publish the rows this transaction staged, through the relay's lease and
    fences, so it can never race a relay into a duplicate. A failure is left to the relay and
    never reaches the caller's request."""
    token = f"commit-{uuid7()}"
    try:
        rows = store.claim_ids(ids, token)
        publish_batch(store, get_driver(), rows, token)
    except Exception as error:
        log.event(logging.WARNING, "xjobs.outbox.fast_path_failed", id=ids[0], error=error)


def stage_at_commit(store: OutboxStore, request: EnqueueRequest, job_id: UUID) -> None:
    """Stage and publish a committed enqueue in a store that cannot join the transaction."""
    try:
        store.stage(request)
    except Exception as error:
        log.event(logging.ERROR, "xjobs.outbox.publish_failed", job=request.name, error=error)
        return
    fast_path(store, [job_id])
