"""Where an enqueue goes: staged in the caller's transaction, or straight to the job store.

Every enqueue reaches the driver through here (a job handle's, a ``django.tasks`` task's):
it joins the open batch, or is staged in the caller's transaction (``run/publish.py`` moves it
to the job store after commit, and the relay role for what that misses), or goes straight to
the driver."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from functools import partial
from typing import Any
from uuid import UUID

from django.db import connections, transaction

from .. import conf, log
from ..bounds import check_after
from ..declarations.workflows import current_batch
from ..drivers import get_driver
from ..drivers.contract import EnqueueRequest, EnqueueResult, JobDriver, OutboxStore
from ..errors import InvariantError, OutboxNoTxError
from ..ids import uuid7
from .publish import publish_batch


def submit(request: EnqueueRequest, *, outbox: bool | None, on_conflict: str) -> EnqueueResult:
    """Stage ``request`` in the caller's transaction, or publish it directly (SPEC OUTBOX-01/04).

    A staged job's id is minted here and returned at once; the publish inserts the job with
    that id, right after commit (the fast path) or through the relay. A rollback takes the row
    away with everything else the transaction wrote, and the id then names nothing.
    """
    return submit_many([request], outbox=outbox, on_conflict=on_conflict)[0]


def submit_many(
    requests: Sequence[EnqueueRequest], *, outbox: bool | None, on_conflict: str
) -> list[EnqueueResult]:
    """``submit`` for many requests at once: one write to the job store, or one staging write
    in the caller's transaction; one result per request, in order."""
    if not requests:
        return []
    joining = current_batch()
    if joining is not None:  # inside `with batch:` the enqueue is a member (issue 32)
        if any(request.after is not None for request in requests):
            raise InvariantError(
                f"job {requests[0].name!r}: a batch member cannot wait for other jobs (after)",
                hint="enqueue it outside the with block, or make the batch's callback wait",
            )
        return joining.submit(requests)
    alias = _staging_alias(requests[0].name, outbox)
    if alias is None:
        driver = get_driver()
        if len(requests) == 1:
            return [driver.enqueue(requests[0])]
        return driver.enqueue_many(requests)
    if on_conflict == "error":
        raise InvariantError(
            'on_conflict="error" cannot be decided inside atomic(): the job is only staged',
            hint="use .using(outbox=False, on_conflict='error') to enqueue directly",
        )
    for request in requests:
        if request.after is not None:  # what its publish would refuse, refused now (issue 40)
            check_after(request, f"job {request.name[:80]!r}")
    staged = [request if request.id else request.with_id(uuid7()) for request in requests]
    ids = [request.id for request in staged if request.id is not None]
    driver = get_driver()
    batch = commit_batch(alias, driver)
    if batch.store.transactional:
        if len(staged) == 1:
            batch.store.stage(staged[0], notify=not batch.ids)
        else:
            batch.store.stage_many(staged)
        batch.ids.extend(ids)
    else:  # a store outside the database can only stage what has committed
        transaction.on_commit(partial(stage_at_commit, batch.store, staged), using=alias)
    return [EnqueueResult(id=job_id, run_id=None, deduped=None, staged=True) for job_id in ids]


def direct_driver(name: str, *, outbox: bool | None) -> JobDriver | None:
    """The job store an enqueue of job ``name`` writes to straight away, as ``submit_many``
    would route it; None when it would be staged in the caller's transaction or join the open
    batch. Raises as ``submit_many`` does when the outbox is required and there is no
    transaction."""
    if current_batch() is not None or _staging_alias(name, outbox) is not None:
        return None
    return get_driver()


def _staging_alias(name: str, outbox: bool | None) -> str | None:
    """The database alias whose open transaction stages an enqueue (SPEC OUTBOX-01); None
    when the enqueue publishes directly."""
    settings = conf.get()
    use_outbox = outbox is not False and settings.outbox != "off"
    alias = conf.atomic_alias(settings) if use_outbox else None
    if alias is None and use_outbox and settings.outbox == "required":
        raise OutboxNoTxError(
            f"job {name!r} was enqueued outside transaction.atomic()",
            hint='XJOBS["OUTBOX"] is "required": enqueue inside atomic(), or pass '
            ".using(outbox=False) to publish directly",
        )
    return alias


class CommitBatch:
    """The ids one transaction staged on one alias, published together once it commits: one
    transaction of a few multi-row statements per chunk, not a publish per enqueue."""

    def __init__(self, driver: JobDriver, store: OutboxStore) -> None:
        self.driver, self.store = driver, store
        self.ids: list[UUID] = []

    def __call__(self) -> None:
        if self.ids:
            fast_path(self.store, self.ids)


#: the batch each connection's open transaction is filling (connections are per thread)
_batches: weakref.WeakKeyDictionary[Any, CommitBatch] = weakref.WeakKeyDictionary()


def commit_batch(alias: str, driver: JobDriver) -> CommitBatch:
    """The batch this transaction publishes when it commits, its store ready to stage in.

    The batch's on-commit callback is registered by its first enqueue; Django drops it when a
    savepoint it was registered in rolls back, and with it every row staged since (all inside
    that savepoint), so the next enqueue starts a new batch.
    """
    connection = connections[alias]
    batch = _batches.get(connection)
    if batch is None or batch.driver is not driver or not _registered(connection, batch):
        batch = CommitBatch(driver, driver.outbox_store(alias))
        _batches[connection] = batch
        if batch.store.transactional:
            transaction.on_commit(batch, using=alias)
    return batch


def _registered(connection: Any, batch: CommitBatch) -> bool:
    """Whether ``batch`` still waits for this connection's commit."""
    return any(entry[1] is batch for entry in reversed(connection.run_on_commit))


def fast_path(store: OutboxStore, ids: list[UUID]) -> None:
    """After commit, publish the rows this transaction staged, through the relay's lease and
    fences, so it can never race a relay into a duplicate. A failure is left to the relay and
    never reaches the caller's request."""
    token = f"commit-{uuid7()}"
    try:
        store.publish_ids(get_driver(), ids, token)
    except Exception as error:
        log.event(logging.WARNING, "xjobs.outbox.fast_path_failed", id=ids[0], error=error)


def stage_at_commit(store: OutboxStore, requests: list[EnqueueRequest]) -> None:
    """Stage and publish a committed enqueue in a store that cannot join the transaction."""
    try:
        ids = [store.stage(request) for request in requests]
    except Exception as error:
        log.event(logging.ERROR, "xjobs.outbox.publish_failed", job=requests[0].name, error=error)
        return
    token = f"commit-{uuid7()}"
    try:
        publish_batch(store, get_driver(), store.claim_ids(ids, token), token)
    except Exception as error:
        log.event(logging.WARNING, "xjobs.outbox.fast_path_failed", id=ids[0], error=error)


def run_pending_commits(alias: str) -> None:
    """Run the stage callbacks left for the commit of the transaction still open on ``alias``;
    a savepoint rolled back has already taken its callbacks away."""
    connection = connections[alias]
    if not connection.in_atomic_block:
        return
    mine = [
        entry
        for entry in connection.run_on_commit
        if getattr(entry[1], "func", None) is stage_at_commit
    ]
    for entry in mine:
        connection.run_on_commit.remove(entry)
        entry[1]()
