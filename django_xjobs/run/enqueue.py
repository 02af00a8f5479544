"""Enqueue, after a declaration says what a job is: render a request from a call's inputs (the
signature bound, the idempotency key and tenant, the per-call options, the dependencies and
limit keys the driver's row carries) and route it — into the open batch, staged in the
caller's transaction (``run/publish.py`` moves it to the job store after commit, the relay role
what that misses), or straight to the driver. A job handle's ``enqueue*`` methods, a
``django.tasks`` task's and a cron occurrence's all reach the driver through here."""

from __future__ import annotations

import inspect
import logging
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Literal, Protocol
from uuid import UUID

from django.db import connections, transaction

from .. import conf, crypt, log
from ..declarations import registry
from ..declarations.workflows import current_batch
from ..drivers import get_driver
from ..drivers.bounds import check_after, check_request
from ..drivers.contract import EnqueueRequest, EnqueueResult, JobDriver, OutboxStore
from ..drivers.rules import row_by_row
from ..errors import (
    InputInvalidError,
    InvariantError,
    JobDuplicateError,
    JobTenantRequiredError,
    OutboxNoTxError,
    QueueUnknownError,
    XJobsError,
)
from ..ids import uuid7
from ..payload import NotJSON, check_json, encode
from ..retry import Retry
from ..text import did_you_mean
from .context import current_job
from .publish import publish_batch
from .tracing import current_traceparent

#: ``job(tenant=REQUIRED)``: every enqueue carries a tenant (an actor's, ``using()``'s, or the
#: running job's), else ``X_JOB_TENANT_REQUIRED``
REQUIRED = "required"
#: how many inputs of a long direct ``enqueue_many`` are made into requests and sent at a time:
#: the server inserts one chunk while the next is made (bench/README.md, "Bulk enqueue")
STREAM_CHUNK = 1000
OnConflict = Literal["dedupe", "error", "replace"]


@dataclass(frozen=True)
class EnqueueOptions:
    """A handle's per-call options (``JobHandle.using``)."""

    queue: str | None = None
    run_at: datetime | None = None
    delay: float | None = None
    priority: int | None = None
    #: None: "replace" for a debounced job, else "dedupe"
    on_conflict: OnConflict | None = None
    tenant_id: str | None = None
    enqueued_by: str | None = None
    outbox: bool | None = None
    expires_at: datetime | None = None
    #: the jobs this one waits for, and whether it runs however they end (issue 32)
    after: tuple[UUID, ...] | None = None
    run_anyway: bool | None = None


class Enqueueable(Protocol):
    """What enqueue reads of a declared job (``JobHandle``): its declaration, its per-call
    options, and its signature's binding."""

    name: str
    queue: str
    fn: Callable[..., Any]
    retry: Retry
    priority: int
    tenant: Callable[..., Any] | str | None
    idempotency_key: str | Callable[..., Any]
    expires_in: float | None
    debounce: float | None
    options: EnqueueOptions
    signature: inspect.Signature
    undiscovered: bool
    #: its input is sealed under XJOBS["ENCRYPTION_KEYS"] (``@job(encrypt=False)``: clear)
    encrypt: bool

    @property
    def on_conflict(self) -> OnConflict: ...

    def bind(self, inputs: Mapping[str, object]) -> dict[str, Any]: ...


def one(handle: Enqueueable, inputs: Mapping[str, object]) -> EnqueueResult:
    """``JobHandle.enqueue``: one request rendered from ``inputs``, routed by ``submit``; a live
    key refused under ``on_conflict="error"``."""
    if handle.undiscovered:
        registry.tell_undiscovered(handle.name, handle.fn.__module__)
    request = build_request(handle, inputs)
    result = submit(request, outbox=handle.options.outbox, on_conflict=handle.on_conflict)
    if result.deduped and handle.on_conflict == "error":
        raise JobDuplicateError(
            f"job {handle.name!r} with key {request.idempotency_key!r} is already live as {result.id}",
            hint='drop on_conflict="error" to get the live job back instead',
            job_id=str(result.id),
        )
    return result


def many(handle: Enqueueable, inputs: Iterable[Mapping[str, object]]) -> list[EnqueueResult]:
    """``JobHandle.enqueue_many``: a request per element, an error naming its index, in one
    write (a long direct call streamed ``STREAM_CHUNK`` at a time)."""
    if isinstance(inputs, Mapping | str | bytes):
        raise InputInvalidError(
            f"job {handle.name!r}: enqueue_many takes a list of input dicts, got "
            f"{type(inputs).__name__}",
            hint=f"call {handle.fn.__name__}.enqueue_many([{{...}}, {{...}}])",
        )
    if handle.undiscovered:
        registry.tell_undiscovered(handle.name, handle.fn.__module__)
    shared = _per_call(handle)
    inputs = inputs if isinstance(inputs, Sequence) else list(inputs)
    driver = None
    if len(inputs) > STREAM_CHUNK and not row_by_row([shared[0]]):
        driver = direct_driver(handle.name, outbox=handle.options.outbox)
    if driver is not None:  # a long direct call: written a chunk at a time as it is made
        requests: list[EnqueueRequest] = []
        results = driver.jobs().enqueue_chunks(_chunks(handle, inputs, shared, requests))
    else:
        requests = [_request_at(handle, i, given, shared) for i, given in enumerate(inputs)]
        results = submit_many(
            requests, outbox=handle.options.outbox, on_conflict=handle.on_conflict
        )
    if handle.on_conflict == "error":
        for index, result in enumerate(results):
            if result.deduped:
                raise JobDuplicateError(
                    f"job {handle.name!r}: inputs[{index}] with key "
                    f"{requests[index].idempotency_key!r} is already live as {result.id}",
                    hint='drop on_conflict="error" to get the live job back instead',
                    job_id=str(result.id),
                    index=index,
                )
    return results


def _chunks(
    handle: Enqueueable,
    inputs: Sequence[object],
    shared: tuple[EnqueueRequest, str | None],
    made: list[EnqueueRequest],
) -> Iterator[list[EnqueueRequest]]:
    """The requests for ``inputs``, ``STREAM_CHUNK`` at a time, each also kept in ``made``."""
    for start in range(0, len(inputs), STREAM_CHUNK):
        part = inputs[start : start + STREAM_CHUNK]
        chunk = [_request_at(handle, i, given, shared) for i, given in enumerate(part, start)]
        made.extend(chunk)
        yield chunk


def _request_at(
    handle: Enqueueable, index: int, given: object, shared: tuple[EnqueueRequest, str | None]
) -> EnqueueRequest:
    """The request for ``inputs[index]``; an error names the index."""
    if not isinstance(given, Mapping):
        raise InputInvalidError(
            f"job {handle.name!r}: inputs[{index}] is {type(given).__name__}, not a dict of inputs",
            hint=f"pass dicts of keyword inputs: {{{example_call(handle)}}}",
        )
    try:
        return _request(handle, *_checked(handle, dict(given)), shared)
    except XJobsError as error:
        raise error.prefixed(f"inputs[{index}]: ") from None


def refuse_positional(handle: Enqueueable, args: tuple[Any, ...]) -> None:
    if args:
        raise InputInvalidError(
            f"job {handle.name!r} was given {len(args)} positional input(s); inputs are "
            "stored by name, so they are keyword arguments only",
            hint=f"call {handle.fn.__name__}.enqueue({example_call(handle)})",
        )


def example_call(handle: Enqueueable) -> str:
    names = [p.name for p in list(handle.signature.parameters.values())[1:]]
    names = [
        n for n in names if handle.signature.parameters[n].kind != inspect.Parameter.VAR_KEYWORD
    ]
    return ", ".join(f"{n}=..." for n in names) or "name=value, ..."


def build_request(handle: Enqueueable, inputs: Mapping[str, object]) -> EnqueueRequest:
    """Validate ``inputs`` and turn them into the driver's request (nothing is written)."""
    bound, encoded = _checked(handle, inputs)
    return _request(handle, bound, encoded, _per_call(handle))


def _checked(handle: Enqueueable, inputs: Mapping[str, object]) -> tuple[dict[str, Any], str]:
    """``inputs`` bound to the signature, and their JSON text within the payload cap."""
    bound = handle.bind(inputs)
    try:
        check_json(bound, "inputs")
    except NotJSON as error:
        raise InputInvalidError(
            f"job {handle.name!r}: {error.path}: {error.reason}",
            hint="job inputs are stored as JSON; pass ids and plain values",
        ) from None
    settings = conf.get()
    text = encode(bound, limit=settings.max_payload_bytes, what=f"the input of job {handle.name!r}")
    if settings.encryption is not None and handle.encrypt:  # SPEC CRYPT-01; the outbox copies it
        text = crypt.seal(text)
    return bound, text


def _per_call(handle: Enqueueable) -> tuple[EnqueueRequest, str | None]:
    """The request one enqueue call shares across its inputs (the queue checked; its
    input, key and tenant are blanks each element fills), and the tenant of the run it is
    made from, if any."""
    settings = conf.get()
    queue = handle.options.queue or handle.queue
    if (
        queue != handle.queue  # the handle's own queue is declared, so it is known
        and queue != "default"
        and queue not in settings.queues
        and queue not in registry.known_queues(settings.queues)
    ):
        guess = did_you_mean(queue, registry.known_queues(settings.queues))
        raise QueueUnknownError(
            f"no job declares queue {queue!r}, so no worker would be told to watch it; "
            f"{registry.discovered()}",
            hint=f"{guess + ' ' if guess else ''}declare a job with queue=... in an installed "
            'app\'s jobs.py, or list the queue in XJOBS["QUEUES"]',
        )
    run_at, delay = handle.options.run_at, handle.options.delay
    if handle.debounce is not None and run_at is None and delay is None:
        delay = handle.debounce  # a debounced job runs a quiet window after its last enqueue
    shared = EnqueueRequest(
        name=handle.name,
        queue=queue,
        input={},
        input_json="{}",
        idempotency_key="",
        max_attempts=handle.retry.attempts,
        priority=handle.priority if handle.options.priority is None else handle.options.priority,
        run_at=run_at,
        delay=delay,
        expires_at=handle.options.expires_at,
        # from the due time, so a delayed or debounced job keeps its whole window
        expires_in=None if handle.options.expires_at is not None else handle.expires_in,
        replace=handle.on_conflict == "replace",
        after=handle.options.after,
        run_anyway=bool(handle.options.run_anyway),
        # a nested enqueue, from inside a run, names its parent job (SPEC EXEC-09)
        enqueued_by=handle.options.enqueued_by or _parent_job(),
        traceparent=current_traceparent(),
    )
    return shared, _parent_tenant()


def _request(
    handle: Enqueueable,
    bound: Mapping[str, object],
    encoded: str,
    per_call: tuple[EnqueueRequest, str | None],
) -> EnqueueRequest:
    shared, parent_tenant = per_call
    tenant = handle.options.tenant_id or _tenant_for(handle, bound) or parent_tenant
    if tenant is None and handle.tenant == REQUIRED:
        raise JobTenantRequiredError(
            f"job {handle.name!r} is tenant-scoped and was enqueued without a tenant",
            hint="enqueue_as(Actor(..., tenant_id=...)), using(tenant_id=...), or enqueue "
            "it from inside a run of that tenant",
        )
    request = shared.for_input(bound, encoded, key_for(handle, bound), tenant)
    check_request(request)  # staged or not: a row the live-key index can hold
    return request


def key_for(handle: Enqueueable, inputs: Mapping[str, object]) -> str:
    """The idempotency key for ``inputs`` (SPEC JOB-08)."""
    if callable(handle.idempotency_key):
        key = handle.idempotency_key(**inputs)
    else:
        try:
            key = handle.idempotency_key.format_map(inputs)
        except (KeyError, IndexError, AttributeError, ValueError, TypeError) as error:
            raise InputInvalidError(
                f"job {handle.name!r}: the idempotency key {handle.idempotency_key!r} cannot be "
                f"filled from the inputs ({type(error).__name__}: {error})",
                hint=f"pass every input the key names; inputs given: {', '.join(sorted(inputs)) or 'none'}",
            ) from None
    if not isinstance(key, str) or not key:
        raise InvariantError(
            f"job {handle.name!r}: the idempotency key came out as {key!r}",
            hint="the key callable must return a non-empty string",
        )
    return key


def _tenant_for(handle: Enqueueable, inputs: Mapping[str, object]) -> str | None:
    if not callable(handle.tenant):  # None, or REQUIRED: it comes with the enqueue
        return None
    tenant = handle.tenant(**inputs)
    if not isinstance(tenant, str) or not tenant:
        raise InvariantError(
            f"job {handle.name!r}: tenant() returned {tenant!r}",
            hint="the tenant callable must return a non-empty string",
        )
    return tenant


def _parent_job() -> str | None:
    """``job:<id>`` of the run this enqueue is made from, if any."""
    parent = current_job()
    return None if parent is None else f"job:{parent.job_id}"


def _parent_tenant() -> str | None:
    parent = current_job()
    return None if parent is None else parent.tenant_id


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
            return [driver.jobs().enqueue(requests[0])]
        return driver.jobs().enqueue_many(requests)
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
        batch = CommitBatch(driver, driver.outbox(alias))
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
