"""Where an enqueue goes: staged in the caller's transaction, or straight to the job store."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.db import connections, transaction

from .. import conf, log
from ..drivers import get_driver
from ..drivers.base import EnqueueRequest, EnqueueResult
from ..errors import InvariantError, OutboxNoTxError
from ..ids import uuid7
from .relay import publish_batch


def atomic_alias(settings: conf.XJobsSettings) -> str | None:
    """The outbox database whose ``atomic()`` block the caller is in, if any (SPEC OUTBOX-20)."""
    for alias in settings.outbox_databases:
        if connections[alias].in_atomic_block:
            return alias
    return None


def submit(request: EnqueueRequest, *, outbox: bool | None, on_conflict: str) -> EnqueueResult:
    """Stage ``request`` in the caller's transaction, or publish it directly (SPEC OUTBOX-01/04).

    Staged rows publish right after commit (the fast path) and otherwise through the relay;
    a rollback takes them away with everything else the transaction wrote.
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
    driver = get_driver()
    if driver.name == "memory":  # no table to stage in: publish when the transaction commits
        transaction.on_commit(partial(_publish_now, driver, request), using=alias)
        return EnqueueResult(id=uuid7(), run_id=None, staged=True)
    store = _store(alias)
    row_id = store.stage(request)
    transaction.on_commit(partial(fast_path, alias, row_id), using=alias)
    return EnqueueResult(id=row_id, run_id=None, staged=True)


def fast_path(alias: str, row_id: Any) -> None:
    """After commit, publish the row this enqueue staged, through the relay's lease and fences,
    so it can never race a relay into a duplicate. A failure is left to the relay and never
    reaches the caller's request."""
    store = _store(alias)
    token = f"commit-{uuid7()}"
    try:
        rows = store.claim_ids([row_id], token)
        publish_batch(store, get_driver(), rows, token)
    except Exception as error:
        log.event(logging.WARNING, "xjobs.outbox.fast_path_failed", id=row_id, error=error)


def _publish_now(driver: Any, request: EnqueueRequest) -> None:
    try:
        driver.enqueue(request)
    except Exception as error:
        log.event(logging.ERROR, "xjobs.outbox.publish_failed", job=request.name, error=error)


def _store(alias: str) -> Any:
    from .postgres import PostgresOutboxStore

    return PostgresOutboxStore(alias)
