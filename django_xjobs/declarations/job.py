"""``job()``: declare a job, validate everything decidable at import, and enqueue it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal, overload
from uuid import UUID

from asgiref.sync import async_to_sync

from .. import conf
from ..bounds import check_request
from ..drivers.contract import EnqueueRequest, EnqueueResult, row_by_row
from ..durations import Duration, parse_duration, parse_optional
from ..errors import (
    InputInvalidError,
    InvariantError,
    JobDuplicateError,
    JobTenantRequiredDefinitionError,
    JobTenantRequiredError,
    QueueUnknownError,
    XJobsError,
)
from ..limits.keys import JobLimits, declared
from ..payload import NotJSON, check_json, encode
from ..retry import DEFAULT_RETRY, Retry, retry_schedule
from ..run import enqueue
from ..run.context import current_job
from ..run.tracing import current_traceparent
from ..text import did_you_mean
from . import registry
from .actors import Actor
from .signatures import Binder, check_handler, check_key, check_stored, input_schema, signature_of

_MISSING: Any = object()
#: ``job(tenant=REQUIRED)``: every enqueue carries a tenant (an actor's, ``using()``'s, or the
#: running job's), else ``X_JOB_TENANT_REQUIRED``
REQUIRED = "required"
#: how many inputs of a long direct ``enqueue_many`` are made into requests and sent at a time:
#: the server inserts one chunk while the next is made (bench/README.md, "Bulk enqueue")
STREAM_CHUNK = 1000
OnConflict = Literal["dedupe", "error", "replace"]
#: the most runs at once a job may declare (per name, or per limit key)
MAX_CONCURRENCY = 10_000


@dataclass(frozen=True)
class EnqueueOptions:
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


class JobHandle:
    """A declared job: ``enqueue`` it, ``using`` it with per-call options, ``describe`` it.

    ``@job`` returns one. It is never called directly: ``enqueue`` queues a run for a worker,
    and ``.fn`` is the plain function, for a unit test that passes its own ``ctx``::

        result = send_receipt.enqueue(order_id=7)
        send_receipt.using(queue="bulk", delay="5m").enqueue(order_id=8)
    """

    #: a run whose worker died spent its attempt (SPEC T4): past the last one, the claim
    #: dead-letters the job instead of running it (a ``django.tasks`` task runs it again)
    reruns_lapsed = False
    #: declared once Django had started, by a module no app's jobs.py imports (set by @job)
    undiscovered = False

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str,
        idempotency_key: str | Callable[..., Any],
        queue: str,
        retry: Retry,
        timeout: float | None,
        step_timeout: float | None,
        event_poll: float | None,
        concurrency: int | None,
        priority: int,
        tenant: Callable[..., Any] | str | None,
        options: EnqueueOptions | None = None,
        expires_in: float | None = None,
        debounce: float | None = None,
        limits: JobLimits | None = None,
    ) -> None:
        self.fn = fn
        self.name = name
        self.idempotency_key = idempotency_key
        self.queue = queue
        self.retry = retry
        self.timeout = timeout
        self.step_timeout = step_timeout
        self.event_poll = event_poll
        self.concurrency = concurrency
        self.priority = priority
        self.tenant = tenant
        self.expires_in = expires_in
        self.debounce = debounce
        self.options = options or EnqueueOptions()
        #: fleet-wide limits decided in the claim (limits/keys.py); None: none declared
        self.limits = limits
        self.signature = signature_of(fn)
        self._binder = Binder(self.signature)
        self.is_async = inspect.iscoroutinefunction(fn)
        code = getattr(fn, "__code__", None)
        where = f" ({code.co_filename}:{code.co_firstlineno})" if code else ""
        # the same definition re-imported keeps its origin; another function does not
        self.origin = f"{fn.__module__}.{fn.__qualname__}{where}"
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<JobHandle {self.name} queue={self.queue}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise InvariantError(
            f"job {self.name!r} is not called directly",
            hint=f"queue it with {self.fn.__name__}.enqueue(...); in a unit test call {self.fn.__name__}.fn(ctx, ...)",
        )

    def invoke(self, ctx: Any, inputs: dict[str, Any]) -> Any:
        """Call the handler for one run: ``fn(ctx, **inputs)``."""
        if not isinstance(inputs, dict) or not self._binder.fits(inputs):
            check_stored(self.name, self.signature, inputs)  # SPEC EXEC-01
        if self.is_async:
            # async_to_sync, not asyncio.run: the body's sync_to_async calls (ORM, step writes)
            # then run back on this thread, with this thread's database connection
            return async_to_sync(self.fn)(ctx, **inputs)
        return self.fn(ctx, **inputs)

    # --- per-call options -------------------------------------------------------------------

    def using(
        self,
        *,
        queue: str | None = None,
        run_at: datetime | None = None,
        delay: Duration | None = None,
        priority: int | None = None,
        on_conflict: OnConflict | None = None,
        tenant_id: str | None = None,
        enqueued_by: str | None = None,
        outbox: bool | None = None,
        expires_at: datetime | None = None,
        after: Iterable[Any] | None = None,
        run_anyway: bool | None = None,
    ) -> JobHandle:
        """A copy of this handle with per-enqueue options (like ``django.tasks.Task.using``)::

            send_receipt.using(delay="10m", priority=5).enqueue(order_id=7)
            send_receipt.using(expires_at=deadline).enqueue(order_id=8)  # never after it
            ship.using(after=[charged.id]).enqueue(order_id=7)  # once the charge is done

        ``outbox=False`` publishes directly even inside ``atomic()``. ``on_conflict="replace"``
        hands a waiting holder of the key this enqueue's input and run time; ``expires_at``:
        a job not started by then never runs (stop reason ``expired``). ``after``: job ids (or
        enqueue results) it waits for, ``suspended``, until every one is done; if one ends dead,
        failed or cancelled it never runs (dead, stop reason ``dependency_failed``), unless
        ``run_anyway=True`` (docs/concepts/workflows.md#dependencies).
        """
        if outbox is not None and not isinstance(outbox, bool):
            raise InvariantError(f"outbox={outbox!r} must be True or False")
        if run_at is not None and delay is not None:
            raise InvariantError("give run_at or delay, not both")
        for field, when in (("run_at", run_at), ("expires_at", expires_at)):
            if when is not None and (not isinstance(when, datetime) or when.tzinfo is None):
                raise InvariantError(
                    f"{field}={when!r} must be an aware datetime",
                    hint="use django.utils.timezone.now() + timedelta(...)",
                )
        if queue is not None:
            conf.check_queue_name(queue, error=InvariantError)
        if priority is not None:
            _check_priority(priority)
        if on_conflict is not None and on_conflict not in ("dedupe", "error", "replace"):
            raise InvariantError(
                f"on_conflict={on_conflict!r} is not an option",
                hint='use "dedupe", "error" or "replace"',
            )
        for field, value in (("tenant_id", tenant_id), ("enqueued_by", enqueued_by)):
            if value is not None and (not isinstance(value, str) or not value):
                raise InvariantError(f"{field}={value!r} must be a non-empty string")
        waits_for = _after_ids(after)
        if run_anyway is not None and not isinstance(run_anyway, bool):
            raise InvariantError(f"run_anyway={run_anyway!r} must be True or False")
        changes: dict[str, Any] = {
            "after": waits_for,
            "run_anyway": run_anyway,
            "queue": queue,
            "run_at": run_at,
            "delay": _delay_seconds(delay),
            "priority": priority,
            "on_conflict": on_conflict,
            "tenant_id": tenant_id,
            "enqueued_by": enqueued_by,
            "outbox": outbox,
            "expires_at": expires_at,
        }
        options = replace(self.options, **{k: v for k, v in changes.items() if v is not None})
        if run_at is not None:
            options = replace(options, delay=None)
        if delay is not None:
            options = replace(options, run_at=None)
        _check_after_options(self, options)
        clone = object.__new__(JobHandle)
        clone.__dict__.update(self.__dict__)
        clone.options = options
        return clone

    # --- enqueue ----------------------------------------------------------------------------

    def enqueue(self, *args: Any, **inputs: Any) -> EnqueueResult:
        """Queue one run of this job with ``inputs``; never runs the handler inline (SPEC JOB-19).

        Inside ``transaction.atomic()`` the job is staged in the same transaction and published
        once it commits (``staged=True``; its ``id`` is the job's id, ``deduped`` is None until
        the publish); a rollback leaves no job. Outside, it is inserted at once. A live job with
        the same idempotency key is returned instead (``deduped=True``), or refused with
        ``JobDuplicateError`` under ``using(on_conflict="error")``. Inputs are keyword
        arguments only: they are stored by name::

            with transaction.atomic():
                order = Order.objects.create(email=email)
                result = send_receipt.enqueue(order_id=order.pk)  # commits with the order
        """
        self._refuse_positional(args)
        if self.undiscovered:
            registry.tell_undiscovered(self.name, self.fn.__module__)
        request = self.build_request(inputs)
        result = enqueue.submit(request, outbox=self.options.outbox, on_conflict=self.on_conflict)
        if result.deduped and self.on_conflict == "error":
            raise JobDuplicateError(
                f"job {self.name!r} with key {request.idempotency_key!r} is already live as {result.id}",
                hint='drop on_conflict="error" to get the live job back instead',
                job_id=str(result.id),
            )
        return result

    @property
    def on_conflict(self) -> OnConflict:
        """What an enqueue does when a live job holds its key: ``using()``'s choice, else
        ``"replace"`` for a debounced job (each enqueue pushes the waiting one back), else
        ``"dedupe"``."""
        if self.options.on_conflict is not None:
            return self.options.on_conflict
        return "replace" if self.debounce is not None else "dedupe"

    def enqueue_as(self, actor: Actor | None, /, *args: Any, **inputs: Any) -> EnqueueResult:
        """``enqueue`` on behalf of ``actor`` (SPEC ENQ-04): the row records ``actor.id`` as
        ``enqueued_by`` and ``actor.tenant_id`` as its tenant, unless ``using()`` set them.
        ``actor=None`` is a plain enqueue::

            send_receipt.enqueue_as(Actor.from_request(request, tenant_id="acme"), order_id=7)
        """
        if actor is None:
            return self.enqueue(*args, **inputs)
        if not isinstance(actor, Actor):
            raise InvariantError(
                f"enqueue_as takes an Actor, got {type(actor).__name__}",
                hint="django_xjobs.Actor(id=..., tenant_id=...), or Actor.from_user(user)",
            )
        return self.using(
            tenant_id=self.options.tenant_id or actor.tenant_id,
            enqueued_by=self.options.enqueued_by or actor.id,
        ).enqueue(*args, **inputs)

    async def aenqueue_as(self, actor: Actor | None, /, **inputs: Any) -> EnqueueResult:
        """``enqueue_as`` for async code."""
        from asgiref.sync import sync_to_async

        return await sync_to_async(self.enqueue_as)(actor, **inputs)

    async def aenqueue(self, *args: Any, **inputs: Any) -> EnqueueResult:
        """``enqueue`` for async code."""
        from asgiref.sync import sync_to_async

        self._refuse_positional(args)
        return await sync_to_async(self.enqueue)(**inputs)

    def enqueue_many(self, inputs: Iterable[Mapping[str, Any]]) -> list[EnqueueResult]:
        """Queue one run per element of ``inputs`` (each a dict of this job's inputs) in one
        write; one ``EnqueueResult`` per element, in order::

            results = send_receipt.enqueue_many([{"order_id": 1}, {"order_id": 2}])

        Every element is checked: a bad one raises naming its index, and nothing is written
        (the call is one transaction). Keys dedupe per element, as ``enqueue`` does: an element
        whose key is live, or was taken by an earlier element of the same call, returns that
        job (``deduped=True``). Inside ``atomic()`` all are staged in one statement and
        published at commit together.
        """
        if isinstance(inputs, Mapping | str | bytes):
            raise InputInvalidError(
                f"job {self.name!r}: enqueue_many takes a list of input dicts, got "
                f"{type(inputs).__name__}",
                hint=f"call {self.fn.__name__}.enqueue_many([{{...}}, {{...}}])",
            )
        if self.undiscovered:
            registry.tell_undiscovered(self.name, self.fn.__module__)
        shared = self._per_call()
        inputs = inputs if isinstance(inputs, Sequence) else list(inputs)
        driver = None
        if len(inputs) > STREAM_CHUNK and not row_by_row([shared[0]]):
            driver = enqueue.direct_driver(self.name, outbox=self.options.outbox)
        if driver is not None:  # a long direct call: written a chunk at a time as it is made
            requests: list[EnqueueRequest] = []
            results = driver.enqueue_chunks(self._chunks(inputs, shared, requests))
        else:
            requests = [self._request_at(i, given, shared) for i, given in enumerate(inputs)]
            results = enqueue.submit_many(
                requests, outbox=self.options.outbox, on_conflict=self.on_conflict
            )
        if self.on_conflict == "error":
            for index, result in enumerate(results):
                if result.deduped:
                    raise JobDuplicateError(
                        f"job {self.name!r}: inputs[{index}] with key "
                        f"{requests[index].idempotency_key!r} is already live as {result.id}",
                        hint='drop on_conflict="error" to get the live job back instead',
                        job_id=str(result.id),
                        index=index,
                    )
        return results

    async def aenqueue_many(self, inputs: Iterable[Mapping[str, Any]]) -> list[EnqueueResult]:
        """``enqueue_many`` for async code."""
        from asgiref.sync import sync_to_async

        return await sync_to_async(self.enqueue_many)(list(inputs))

    def _chunks(
        self,
        inputs: Sequence[Any],
        shared: tuple[EnqueueRequest, str | None],
        made: list[EnqueueRequest],
    ) -> Iterator[list[EnqueueRequest]]:
        """The requests for ``inputs``, ``STREAM_CHUNK`` at a time, each also kept in ``made``."""
        for start in range(0, len(inputs), STREAM_CHUNK):
            part = inputs[start : start + STREAM_CHUNK]
            chunk = [self._request_at(i, given, shared) for i, given in enumerate(part, start)]
            made.extend(chunk)
            yield chunk

    def _request_at(
        self, index: int, given: Any, shared: tuple[EnqueueRequest, str | None]
    ) -> EnqueueRequest:
        """The request for ``inputs[index]``; an error names the index."""
        if not isinstance(given, Mapping):
            raise InputInvalidError(
                f"job {self.name!r}: inputs[{index}] is {type(given).__name__}, not a dict of "
                "inputs",
                hint=f"pass dicts of keyword inputs: {{{self._example_call()}}}",
            )
        try:
            return self._request(*self._checked(dict(given)), shared)
        except XJobsError as error:
            raise error.prefixed(f"inputs[{index}]: ") from None

    def _refuse_positional(self, args: tuple[Any, ...]) -> None:
        if args:
            raise InputInvalidError(
                f"job {self.name!r} was given {len(args)} positional input(s); inputs are "
                "stored by name, so they are keyword arguments only",
                hint=f"call {self.fn.__name__}.enqueue({self._example_call()})",
            )

    def _example_call(self) -> str:
        names = [p.name for p in list(self.signature.parameters.values())[1:]]
        names = [
            n for n in names if self.signature.parameters[n].kind != inspect.Parameter.VAR_KEYWORD
        ]
        return ", ".join(f"{n}=..." for n in names) or "name=value, ..."

    def build_request(self, inputs: dict[str, Any]) -> EnqueueRequest:
        """Validate ``inputs`` and turn them into the driver's request (nothing is written)."""
        bound, encoded = self._checked(inputs)
        return self._request(bound, encoded, self._per_call())

    def _checked(self, inputs: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """``inputs`` bound to the signature, and their JSON text within the payload cap."""
        bound = self.bind(inputs)
        try:
            check_json(bound, "inputs")
        except NotJSON as error:
            raise InputInvalidError(
                f"job {self.name!r}: {error.path}: {error.reason}",
                hint="job inputs are stored as JSON; pass ids and plain values",
            ) from None
        limit = conf.get().max_payload_bytes
        return bound, encode(bound, limit=limit, what=f"the input of job {self.name!r}")

    def _per_call(self) -> tuple[EnqueueRequest, str | None]:
        """The request one enqueue call shares across its inputs (the queue checked; its
        input, key and tenant are blanks each element fills), and the tenant of the run it is
        made from, if any."""
        settings = conf.get()
        queue = self.options.queue or self.queue
        if (
            queue != self.queue  # the handle's own queue is declared, so it is known
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
        run_at, delay = self.options.run_at, self.options.delay
        if self.debounce is not None and run_at is None and delay is None:
            delay = self.debounce  # a debounced job runs a quiet window after its last enqueue
        shared = EnqueueRequest(
            name=self.name,
            queue=queue,
            input={},
            input_json="{}",
            idempotency_key="",
            max_attempts=self.retry.attempts,
            priority=self.priority if self.options.priority is None else self.options.priority,
            run_at=run_at,
            delay=delay,
            expires_at=self.options.expires_at,
            # from the due time, so a delayed or debounced job keeps its whole window
            expires_in=None if self.options.expires_at is not None else self.expires_in,
            replace=self.on_conflict == "replace",
            after=self.options.after,
            run_anyway=bool(self.options.run_anyway),
            # a nested enqueue, from inside a run, names its parent job (SPEC EXEC-09)
            enqueued_by=self.options.enqueued_by or _parent_job(),
            traceparent=current_traceparent(),
        )
        return shared, _parent_tenant()

    def _request(
        self,
        bound: dict[str, Any],
        encoded: str,
        per_call: tuple[EnqueueRequest, str | None],
    ) -> EnqueueRequest:
        shared, parent_tenant = per_call
        tenant = self.options.tenant_id or self._tenant_for(bound) or parent_tenant
        if tenant is None and self.tenant == REQUIRED:
            raise JobTenantRequiredError(
                f"job {self.name!r} is tenant-scoped and was enqueued without a tenant",
                hint="enqueue_as(Actor(..., tenant_id=...)), using(tenant_id=...), or enqueue "
                "it from inside a run of that tenant",
            )
        request = shared.for_input(bound, encoded, self.key_for(bound), tenant)
        check_request(request)  # staged or not: a row the live-key index can hold
        return request

    def bind(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Inputs bound to the handler's signature, defaults applied (``ctx`` left out)."""
        fast = self._binder.bind(inputs)
        if fast is not None:
            return fast
        try:
            bound = self.signature.bind(None, **inputs)
        except TypeError as error:
            raise InputInvalidError(
                f"job {self.name!r}: {error}", hint=f"it takes {self._parameters_text()}"
            ) from None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        params = list(self.signature.parameters.values())
        arguments.pop(params[0].name)
        for param in params[1:]:
            if param.kind is inspect.Parameter.VAR_KEYWORD:
                arguments.update(arguments.pop(param.name, {}))
        return arguments

    def key_for(self, inputs: dict[str, Any]) -> str:
        """The idempotency key for ``inputs`` (SPEC JOB-08)."""
        if callable(self.idempotency_key):
            key = self.idempotency_key(**inputs)
        else:
            try:
                key = self.idempotency_key.format_map(inputs)
            except (KeyError, IndexError, AttributeError, ValueError, TypeError) as error:
                raise InputInvalidError(
                    f"job {self.name!r}: the idempotency key {self.idempotency_key!r} cannot be "
                    f"filled from the inputs ({type(error).__name__}: {error})",
                    hint=f"pass every input the key names; inputs given: {', '.join(sorted(inputs)) or 'none'}",
                ) from None
        if not isinstance(key, str) or not key:
            raise InvariantError(
                f"job {self.name!r}: the idempotency key came out as {key!r}",
                hint="the key callable must return a non-empty string",
            )
        return key

    def _tenant_for(self, inputs: dict[str, Any]) -> str | None:
        if not callable(self.tenant):  # None, or REQUIRED: it comes with the enqueue
            return None
        tenant = self.tenant(**inputs)
        if not isinstance(tenant, str) or not tenant:
            raise InvariantError(
                f"job {self.name!r}: tenant() returned {tenant!r}",
                hint="the tenant callable must return a non-empty string",
            )
        return tenant

    def _parameters_text(self) -> str:
        params = list(self.signature.parameters.values())[1:]
        return "(" + ", ".join(str(p) for p in params) + ")" if params else "no inputs"

    # --- manifest ---------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """The manifest row: plain JSON; the idempotency key template is never published."""
        return {
            "name": self.name,
            "input": input_schema(self.signature),
            "queue": self.queue,
            "retry": {"attempts": self.retry.attempts, "backoff": self.retry.backoff},
            "retry_delays": retry_schedule(self.retry),
            "priority": self.priority,
            "concurrency": self.concurrency,
            "timeout": self.timeout,
            "expires_in": self.expires_in,
            "debounce": self.debounce,
            "idempotent": True,
            "steps": [],
        }


@overload
def job(
    fn: Callable[..., Any],
    *,
    idempotency_key: str | Callable[..., Any] = ...,
    name: str | None = ...,
    queue: str = ...,
    retry: Retry | None = ...,
    timeout: Duration | None = ...,
    step_timeout: Duration | None = ...,
    event_poll: Duration | None = ...,
    concurrency: int | None = ...,
    priority: int = ...,
    tenant: Callable[..., Any] | str | None = ...,
    expires_in: Duration | None = ...,
    debounce: Duration | None = ...,
    limit_key: str | None = ...,
    rate_limit: str | None = ...,
) -> JobHandle: ...


@overload
def job(
    fn: None = None,
    *,
    idempotency_key: str | Callable[..., Any] = ...,
    name: str | None = ...,
    queue: str = ...,
    retry: Retry | None = ...,
    timeout: Duration | None = ...,
    step_timeout: Duration | None = ...,
    event_poll: Duration | None = ...,
    concurrency: int | None = ...,
    priority: int = ...,
    tenant: Callable[..., Any] | str | None = ...,
    expires_in: Duration | None = ...,
    debounce: Duration | None = ...,
    limit_key: str | None = ...,
    rate_limit: str | None = ...,
) -> Callable[[Callable[..., Any]], JobHandle]: ...


def job(
    fn: Callable[..., Any] | None = None,
    *,
    idempotency_key: str | Callable[..., Any] = _MISSING,
    name: str | None = None,
    queue: str = "default",
    retry: Retry | None = None,
    timeout: Duration | None = None,
    step_timeout: Duration | None = None,
    event_poll: Duration | None = None,
    concurrency: int | None = None,
    priority: int = 0,
    tenant: Callable[..., Any] | str | None = None,
    expires_in: Duration | None = None,
    debounce: Duration | None = None,
    limit_key: str | None = None,
    rate_limit: str | None = None,
) -> JobHandle | Callable[[Callable[..., Any]], JobHandle]:
    """Declare a durable job. Put it in ``<app>/jobs.py``; it is imported at startup.

    ::

        @job(idempotency_key="receipt:{order_id}", queue="emails", retry=Retry(attempts=5))
        def send_receipt(ctx, order_id: int):
            ...

        send_receipt.enqueue(order_id=42)

    ``idempotency_key`` is required: a ``str.format`` template over the inputs, or a callable
    taking them. While a job with that key is live, enqueueing it again returns the live job.
    Every mistake here raises ``JobDefinitionError`` when the module is imported.

    ``expires_in="10m"``: a job not started within that long of falling due never runs (it
    ends dead, stop reason ``expired``). ``debounce="30s"``: each enqueue of a key whose job
    still waits pushes its run back to 30 s from now, with the latest input, so a burst of
    enqueues runs once, after the last::

        @job(idempotency_key="reindex:{doc_id}", debounce="30s", expires_in="1h")
        def reindex(ctx, doc_id: int): ...

    Fleet-wide limits, decided in the claim (docs/howto/limits.md): ``limit_key`` is a template
    over the inputs naming what a limit counts per (``"{account_id}"``); with it,
    ``concurrency`` caps the runs at once per key instead of per job name. ``rate_limit``
    (``"100/m"``, ``"10/s"``, ``"500/h"``) caps the starts per window per key (per job name
    without a ``limit_key``).
    """

    def declare(handler: Callable[..., Any]) -> JobHandle:
        label = (
            name or f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', '?')}"
        )
        handle = registry.declare("job", label, lambda: _build(handler, label))
        registry.register(handle)
        # declared after Django started: no worker's discovery imports it (warned at enqueue)
        handle.undiscovered = registry.after_startup()
        return handle

    def _build(handler: Callable[..., Any], label: str) -> JobHandle:
        if not callable(handler):
            raise InvariantError(
                f"@job decorates a function, got {handler!r}",
                hint="put @job(idempotency_key=...) directly above a def",
            )
        if name is not None and (not isinstance(name, str) or not name.strip() or len(name) > 200):
            raise InvariantError(
                f"name={name!r} must be a non-empty string of at most 200 characters",
                hint="omit name= to use '<module>.<function>', or pass a short stable name",
            )
        if name is None and "<locals>" in handler.__qualname__:
            raise InvariantError(
                "the job is defined inside a function, so a worker process never imports it",
                hint="define it at module level in <app>/jobs.py (or give it an explicit name=)",
            )
        signature = check_handler(handler)
        check_key(idempotency_key, signature, missing=_MISSING)
        if tenant is not None and tenant != REQUIRED and not callable(tenant):
            raise JobTenantRequiredDefinitionError(
                f'tenant={tenant!r} must be a callable taking the inputs, or "required"',
                hint="e.g. tenant=lambda account_id, **_: f'acct-{account_id}'; "
                'tenant="required": every enqueue must carry one (enqueue_as, using)',
            )
        conf.check_queue_name(queue, error=InvariantError)
        policy = DEFAULT_RETRY if retry is None else retry
        if not isinstance(policy, Retry):
            raise InvariantError(
                f"retry={retry!r} must be a Retry(...)", hint="e.g. Retry(attempts=5)"
            )
        if concurrency is not None and (
            isinstance(concurrency, bool)
            or not isinstance(concurrency, int)
            or not 1 <= concurrency <= MAX_CONCURRENCY
        ):
            # past the bound a claim compared it as a number no column holds: never ran (issue 40)
            raise InvariantError(
                f"concurrency={concurrency!r} must be an integer from 1 to {MAX_CONCURRENCY:,}",
                hint="omit it for no cap; concurrency=0 would never run",
            )
        _check_priority(priority)
        limits = declared(limit_key, concurrency, rate_limit, signature)
        return JobHandle(
            handler,
            name=label,
            idempotency_key=idempotency_key,
            queue=queue,
            retry=policy,
            timeout=parse_optional(timeout, field="timeout"),
            step_timeout=parse_optional(step_timeout, field="step_timeout"),
            event_poll=parse_optional(event_poll, field="event_poll"),
            concurrency=concurrency,
            priority=priority,
            tenant=tenant,
            expires_in=parse_optional(expires_in, field="expires_in"),
            debounce=parse_optional(debounce, field="debounce"),
            limits=limits,
        )

    return declare if fn is None else declare(fn)


def _parent_job() -> str | None:
    """``job:<id>`` of the run this enqueue is made from, if any."""
    parent = current_job()
    return None if parent is None else f"job:{parent.job_id}"


def _parent_tenant() -> str | None:
    parent = current_job()
    return None if parent is None else parent.tenant_id


def _check_priority(priority: Any) -> None:
    if isinstance(priority, bool) or not isinstance(priority, int) or not -1000 <= priority <= 1000:
        raise InvariantError(
            f"priority={priority!r} must be an integer from -1000 to 1000",
            hint="higher runs first; the default is 0",
        )


def _after_ids(after: Iterable[Any] | None) -> tuple[UUID, ...] | None:
    """``using(after=...)`` as job ids: each a UUID, its text, or an enqueue's result."""
    if after is None:
        return None
    if isinstance(after, str | bytes | UUID) or not isinstance(after, Iterable):
        raise InvariantError(
            f"after={after!r} must be a list of job ids", hint="after=[result.id, ...]"
        )
    ids = []
    for given in after:
        value = getattr(given, "id", given)
        try:
            ids.append(value if isinstance(value, UUID) else UUID(str(value)))
        except ValueError:
            raise InvariantError(
                f"after: {given!r} is not a job id", hint="pass the ids enqueue returned"
            ) from None
    return tuple(ids) or None  # an empty list waits for nothing


def _check_after_options(handle: JobHandle, options: EnqueueOptions) -> None:
    """A dependant falls due when its last dependency is done: a run time of its own, or a
    waiting holder replaced by a later enqueue, would contradict that (issue 32)."""
    if options.after is None:
        return
    if options.run_at is not None or options.delay is not None:
        raise InvariantError(
            "after cannot be given with run_at or delay",
            hint="a job with dependencies runs when the last of them is done",
        )
    if options.on_conflict == "replace" or (
        options.on_conflict is None and handle.debounce is not None
    ):
        raise InvariantError(
            f"job {handle.name!r}: after cannot be given with on_conflict='replace' or debounce",
            hint="a live job of the same key is returned as it is",
        )


def _delay_seconds(delay: Duration | None) -> float | None:
    if delay is None:
        return None
    if isinstance(delay, bool):
        raise InvariantError(f"delay={delay!r} is a bool, not a duration")
    if delay == 0 or delay == timedelta(0):
        return 0.0
    return parse_duration(delay, field="delay")
