"""``job()``: declare a job, validate everything decidable at import, and enqueue it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from types import MappingProxyType
from typing import Any, cast, overload

from asgiref.sync import async_to_sync

from .. import conf
from ..drivers.contract import EnqueueRequest, EnqueueResult
from ..durations import Duration, parse_optional
from ..errors import (
    InputInvalidError,
    InvariantError,
    JobTenantRequiredDefinitionError,
)
from ..limits.keys import JobLimits, declared
from ..retry import DEFAULT_RETRY, Retry, retry_schedule
from ..run import enqueue
from ..run.enqueue import REQUIRED, EnqueueOptions, OnConflict
from . import registry
from .actors import Actor
from .options import after_ids, check_after_options, check_priority, delay_seconds
from .signatures import Binder, check_handler, check_key, check_stored, input_schema, signature_of
from .triggers import cancel_on_fields, on_event_names
from .versions import FIRST_VERSION, OldRuns, check_old_runs, check_version

_MISSING: Any = object()
#: the most runs at once a job may declare (per name, or per limit key)
MAX_CONCURRENCY = 10_000


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
    #: the backfill whose passes this job runs (set by ``@backfill``); None for any other job
    backfill: registry.DeclaredBackfill | None = None
    #: the events that start a run of it, and those that cancel its live runs (set by @job)
    on_event: tuple[str, ...] = ()
    cancel_on: Mapping[str, tuple[str, ...]] = MappingProxyType({})
    #: its input and result are encrypted at rest under XJOBS["ENCRYPTION_KEYS"] (set by @job)
    encrypt = True

    def __init__(
        self,
        fn: Callable[..., object],
        *,
        name: str,
        idempotency_key: str | Callable[..., object],
        queue: str,
        retry: Retry,
        timeout: float | None,
        step_timeout: float | None,
        event_poll: float | None,
        concurrency: int | None,
        priority: int,
        tenant: Callable[..., object] | str | None,
        options: EnqueueOptions | None = None,
        expires_in: float | None = None,
        debounce: float | None = None,
        limits: JobLimits | None = None,
        version: int = FIRST_VERSION,
        old_runs: OldRuns = "replay",
    ) -> None:
        self.fn: Callable[..., Any] = fn
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
        #: the code its runs start under, and what a run started under an older one does here
        self.version = version
        self.old_runs: OldRuns = old_runs
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

    def __call__(self, *args: Any, **kwargs: object) -> Any:
        raise InvariantError(
            f"job {self.name!r} is not called directly",
            hint=f"queue it with {self.fn.__name__}.enqueue(...); in a unit test call {self.fn.__name__}.fn(ctx, ...)",
        )

    def invoke(self, ctx: object, inputs: Mapping[str, object]) -> object:
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
        after: Iterable[object] | None = None,
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
            check_priority(priority)
        if on_conflict is not None and on_conflict not in ("dedupe", "error", "replace"):
            raise InvariantError(
                f"on_conflict={on_conflict!r} is not an option",
                hint='use "dedupe", "error" or "replace"',
            )
        for field, value in (("tenant_id", tenant_id), ("enqueued_by", enqueued_by)):
            if value is not None and (not isinstance(value, str) or not value):
                raise InvariantError(f"{field}={value!r} must be a non-empty string")
        waits_for = after_ids(after)
        if run_anyway is not None and not isinstance(run_anyway, bool):
            raise InvariantError(f"run_anyway={run_anyway!r} must be True or False")
        changes: dict[str, Any] = {
            "after": waits_for,
            "run_anyway": run_anyway,
            "queue": queue,
            "run_at": run_at,
            "delay": delay_seconds(delay),
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
        check_after_options(self, options)
        clone = object.__new__(JobHandle)
        clone.__dict__.update(self.__dict__)
        clone.options = options
        return clone

    # --- enqueue: rendered and routed by run/enqueue.py ---------------------------------

    def enqueue(self, *args: Any, **inputs: object) -> EnqueueResult:
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
        enqueue.refuse_positional(self, args)
        return enqueue.one(self, inputs)

    @property
    def on_conflict(self) -> OnConflict:
        """What an enqueue does when a live job holds its key: ``using()``'s choice, else
        ``"replace"`` for a debounced job (each enqueue pushes the waiting one back), else
        ``"dedupe"``."""
        if self.options.on_conflict is not None:
            return self.options.on_conflict
        return "replace" if self.debounce is not None else "dedupe"

    def enqueue_as(self, actor: Actor | None, /, *args: Any, **inputs: object) -> EnqueueResult:
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

    async def aenqueue_as(self, actor: Actor | None, /, **inputs: object) -> EnqueueResult:
        """``enqueue_as`` for async code."""
        from asgiref.sync import sync_to_async

        return await sync_to_async(self.enqueue_as)(actor, **inputs)

    async def aenqueue(self, *args: Any, **inputs: object) -> EnqueueResult:
        """``enqueue`` for async code."""
        from asgiref.sync import sync_to_async

        enqueue.refuse_positional(self, args)
        return await sync_to_async(self.enqueue)(**inputs)

    def enqueue_many(self, inputs: Iterable[Mapping[str, object]]) -> list[EnqueueResult]:
        """Queue one run per element of ``inputs`` (each a dict of this job's inputs) in one
        write; one ``EnqueueResult`` per element, in order::

            results = send_receipt.enqueue_many([{"order_id": 1}, {"order_id": 2}])

        Every element is checked: a bad one raises naming its index, and nothing is written
        (the call is one transaction). Keys dedupe per element, as ``enqueue`` does: an element
        whose key is live, or was taken by an earlier element of the same call, returns that
        job (``deduped=True``). Inside ``atomic()`` all are staged in one statement and
        published at commit together.
        """
        return enqueue.many(self, inputs)

    async def aenqueue_many(self, inputs: Iterable[Mapping[str, object]]) -> list[EnqueueResult]:
        """``enqueue_many`` for async code."""
        from asgiref.sync import sync_to_async

        return await sync_to_async(self.enqueue_many)(list(inputs))

    def build_request(self, inputs: Mapping[str, object]) -> EnqueueRequest:
        """Validate ``inputs`` and turn them into the driver's request (nothing is written)."""
        return enqueue.build_request(self, inputs)

    def bind(self, inputs: Mapping[str, object]) -> dict[str, Any]:
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

    def key_for(self, inputs: Mapping[str, object]) -> str:
        """The idempotency key for ``inputs`` (SPEC JOB-08)."""
        return enqueue.key_for(self, inputs)

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
            "version": self.version,
            "old_runs": self.old_runs,
            "idempotent": True,
            "steps": [],
            # what events do to it (issue 43)
            "on_event": list(self.on_event),
            "cancel_on": {name: list(fields) for name, fields in self.cancel_on.items()},
        }


@overload
def job(
    fn: Callable[..., object],
    *,
    idempotency_key: str | Callable[..., object] = ...,
    name: str | None = ...,
    queue: str = ...,
    retry: Retry | None = ...,
    timeout: Duration | None = ...,
    step_timeout: Duration | None = ...,
    event_poll: Duration | None = ...,
    concurrency: int | None = ...,
    priority: int = ...,
    tenant: Callable[..., object] | str | None = ...,
    expires_in: Duration | None = ...,
    debounce: Duration | None = ...,
    limit_key: str | None = ...,
    rate_limit: str | None = ...,
    version: int = ...,
    old_runs: OldRuns = ...,
    on_event: str | Sequence[str] | None = ...,
    cancel_on: Mapping[str, Sequence[str]] | None = ...,
    encrypt: bool = ...,
) -> JobHandle: ...


@overload
def job(
    fn: None = None,
    *,
    idempotency_key: str | Callable[..., object] = ...,
    name: str | None = ...,
    queue: str = ...,
    retry: Retry | None = ...,
    timeout: Duration | None = ...,
    step_timeout: Duration | None = ...,
    event_poll: Duration | None = ...,
    concurrency: int | None = ...,
    priority: int = ...,
    tenant: Callable[..., object] | str | None = ...,
    expires_in: Duration | None = ...,
    debounce: Duration | None = ...,
    limit_key: str | None = ...,
    rate_limit: str | None = ...,
    version: int = ...,
    old_runs: OldRuns = ...,
    on_event: str | Sequence[str] | None = ...,
    cancel_on: Mapping[str, Sequence[str]] | None = ...,
    encrypt: bool = ...,
) -> Callable[[Callable[..., object]], JobHandle]: ...


def job(
    fn: Callable[..., object] | None = None,
    *,
    idempotency_key: str | Callable[..., object] = _MISSING,
    name: str | None = None,
    queue: str = "default",
    retry: Retry | None = None,
    timeout: Duration | None = None,
    step_timeout: Duration | None = None,
    event_poll: Duration | None = None,
    concurrency: int | None = None,
    priority: int = 0,
    tenant: Callable[..., object] | str | None = None,
    expires_in: Duration | None = None,
    debounce: Duration | None = None,
    limit_key: str | None = None,
    rate_limit: str | None = None,
    version: int = FIRST_VERSION,
    old_runs: OldRuns = "replay",
    on_event: str | Sequence[str] | None = None,
    cancel_on: Mapping[str, Sequence[str]] | None = None,
    encrypt: bool = True,
) -> JobHandle | Callable[[Callable[..., object]], JobHandle]:
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

    ``version=2`` when a change of its steps would confuse a run started under the old code;
    ``old_runs`` (``"replay"``, ``"restart"`` or ``"park"``) says what a worker of the new code
    does with one (docs/howto/changing-jobs.md). ``on_event="user.created"`` (or a list) starts
    a run per such event with its data as the inputs, in the publisher's transaction;
    ``cancel_on={"order.cancelled": ["order_id"]}`` cancels the live runs whose ``order_id``
    equals the event's (docs/concepts/events.md)::

        @job(idempotency_key="welcome:{user_id}", on_event="user.created")
        def welcome(ctx, user_id: int, email: str): ...

    ``encrypt=False`` keeps its input and result in clear when ``XJOBS["ENCRYPTION_KEYS"]`` is
    set, so the admin's input filter, bulk filters and ``cancel_on`` can look inside them
    (docs/howto/data.md).
    """

    def declare(handler: Callable[..., object]) -> JobHandle:
        label = (
            name or f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', '?')}"
        )
        handle = registry.declare("job", label, lambda: _build(handler, label))
        registry.register(handle)
        # declared after Django started: no worker's discovery imports it (warned at enqueue)
        handle.undiscovered = registry.after_startup()
        return handle

    def _build(handler: Callable[..., object], label: str) -> JobHandle:
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
        check_priority(priority)
        if not isinstance(encrypt, bool):
            raise InvariantError(f"encrypt={encrypt!r} must be True or False")
        declared_version, policy_old = check_version(version), check_old_runs(old_runs)
        limits = declared(limit_key, concurrency, rate_limit, signature)
        starts, cancels = on_event_names(on_event), cancel_on_fields(cancel_on, signature)
        handle = JobHandle(
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
            version=declared_version,
            old_runs=policy_old,
        )
        handle.on_event, handle.cancel_on = starts, cancels
        handle.encrypt = encrypt
        return handle

    return declare if fn is None else declare(fn)


def registered_jobs() -> list[JobHandle]:
    """Every declared job, sorted by name in code-unit order (SPEC JOB-16)::

        >>> [handle.name for handle in registered_jobs()]
        ['shop.jobs.charge_order', 'shop.jobs.send_receipt']

    A job's name is the durable key its queued rows are run by: ``name=`` or the function's path.
    """
    # only @job registers there; the registry types them as DeclaredJob so it never names this
    # module, which imports it
    return cast("list[JobHandle]", registry.registered_jobs())
