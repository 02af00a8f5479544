"""A worker's limits: what it holds itself, and what it asks the claim to decide.

``Limiter`` — per-process limits on runs in flight (SPEC LIMIT-01..06).

These are PER-PROCESS budgets: each worker process counts only its own runs, so a fleet of
N processes may run N times any cap here. A cap across the whole fleet is ``job(concurrency=N)``
(the lease table, SPEC SLOT-*).

    XJOBS = {"LIMITS": {
        "global": 32,                                  # runs in flight in this process
        "per_queue": {"emails": 8},                    # or one int for every queue
        "per_tenant": 4,                               # runs in flight per tenant
        "rate_per_tenant": {"limit": 100, "window": "1m"},  # starts per tenant per window
        "max_tenants": 20_000,                         # memory cap on the per-tenant maps
    }}

    limiter = Limiter(conf.get().limits)
    lease = limiter.acquire("emails", tenant_id="acme")
    if lease is None:
        shed(reason=limiter.last_reason)
    else:
        try:
            run()
        finally:
            lease.release()

``LimitPlan`` — which claims a worker makes within fleet-wide limits, and with what
(``limits.claims``). A pool whose queues hold no job that declares a limit, and carry no
operator's cap, claims as it always did: the same statement, nothing added (the limits cost
nothing where none is declared). A pool with some makes the limited claim, which decides every
limit while it takes the rows, so no run over its limit is claimed and handed back.

The caps an operator sets (``set_queue_limit``) are read when the listener says they changed
(NOTIFY on ``xjobs_control``, as a pause) and once a poll interval, never per claim.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from .. import conf
from ..clock import system_clock
from ..conf.limits import Limits
from ..declarations import registry
from ..drivers.contract import JobDriver
from .claims import ClaimLimits, JobLimit

Reason = Literal["global", "per-queue", "per-tenant", "rate"]

#: The bucket of runs without ``tenant_id`` (SPEC LIMIT-01's "global", DESIGN Q-11): a key no
#: tenant can have (PostgreSQL text holds no NUL), so a tenant literally named "global" has a
#: bucket of its own instead of sharing the no-tenant one.
DEFAULT_TENANT = "\x00no-tenant"
#: How long ``blocked_by`` remembers a refusal, and the least time between two sweeps (LIMIT-05/06).
MEMORY_SECONDS = 60.0

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Clock(Protocol):
    def now(self) -> datetime: ...


class Lease:
    """One run counted in flight. ``release()`` frees its slot once, however often it is called."""

    __slots__ = ("_limiter", "queue", "released", "tenant")

    def __init__(self, limiter: Limiter, queue: str, tenant: str) -> None:
        self._limiter = limiter
        self.queue = queue
        self.tenant = tenant
        self.released = False

    def release(self) -> None:
        self._limiter._release(self)  # SPEC LIMIT-02

    def __repr__(self) -> str:
        state = "released" if self.released else "held"
        return f"<Lease queue={self.queue!r} tenant={self.tenant!r} {state}>"


class Limiter:
    """Caps on this process's runs in flight (SPEC LIMIT-01..06), checked by the worker before
    each run starts (WORK-04/07) and released when the run settles (WORK-10).

    PER-PROCESS: another worker process has its own limiter and its own budget. For a cap across
    the fleet declare ``job(concurrency=N)``.

    Thread-safe: the claim loop acquires while the settler thread releases.
    """

    def __init__(self, limits: Limits | None = None, clock: Clock = system_clock) -> None:
        self.limits = limits or Limits()
        self._clock = clock
        self._lock = threading.Lock()
        self._global = 0
        # In-flight counters; an entry is deleted when it reaches 0 (LIMIT-06). They never grow
        # past the runs in flight, so max_tenants does not apply to them.
        self._queues: dict[str, int] = {}
        self._tenants: dict[str, int] = {}
        self._queue_tenants: dict[tuple[str, str], int] = {}
        # The per-tenant maps max_tenants caps: start times in the rate window (oldest first),
        # and the last refusal by (queue, tenant).
        self._starts: dict[str, deque[datetime]] = {}
        self._refusals: dict[tuple[str, str], tuple[Reason, datetime]] = {}
        self._next_sweep: datetime | None = None
        #: The reason of the most recent refusal, for the worker's shed message.
        self.last_reason: Reason | None = None

    # --- acquire and release ----------------------------------------------------------------

    def acquire(self, queue: str, tenant_id: str | None = None) -> Lease | None:
        """Count one run of ``queue`` for ``tenant_id`` in flight, or return ``None`` (and
        record why, see ``blocked_by``) when a cap is reached."""
        tenant = tenant_id or DEFAULT_TENANT
        with self._lock:
            now = self._clock.now()
            if self._next_sweep is None or now >= self._next_sweep:
                self._sweep(now)
            reason = self._refusal(queue, tenant, now)
            if reason is not None:
                self._refuse(queue, tenant, reason, now)
                return None
            self._global += 1
            self._queues[queue] = self._queues.get(queue, 0) + 1
            self._tenants[tenant] = self._tenants.get(tenant, 0) + 1
            self._queue_tenants[queue, tenant] = self._queue_tenants.get((queue, tenant), 0) + 1
            if self.limits.rate_per_tenant is not None:
                starts = self._starts.get(tenant)
                if starts is None:
                    starts = self._starts[tenant] = deque()
                    starts.append(now)
                    self._bound(self._starts, now)
                else:
                    starts.append(now)
            return Lease(self, queue, tenant)

    def _refusal(self, queue: str, tenant: str, now: datetime) -> Reason | None:
        limits = self.limits
        # SPEC LIMIT-01: this order, so the reason names the widest cap that is full.
        if limits.global_ is not None and self._global >= limits.global_:
            return "global"
        queue_cap = limits.queue_cap(queue)
        if queue_cap is not None and self._queues.get(queue, 0) >= queue_cap:
            return "per-queue"
        if limits.per_tenant is not None and self._tenants.get(tenant, 0) >= limits.per_tenant:
            return "per-tenant"
        rate = limits.rate_per_tenant
        if rate is not None:
            starts = self._starts.get(tenant)
            if starts:
                _drop_spent(starts, now - timedelta(seconds=rate.window))
                if len(starts) >= rate.limit:  # SPEC LIMIT-04: blocks at >= limit
                    return "rate"
        return None

    def _refuse(self, queue: str, tenant: str, reason: Reason, now: datetime) -> None:
        self.last_reason = reason
        key = (queue, tenant)
        known = key in self._refusals
        self._refusals[key] = (reason, now)
        if not known:
            self._bound(self._refusals, now)

    def _release(self, lease: Lease) -> None:
        with self._lock:
            if lease.released:
                return
            lease.released = True
            self._global -= 1
            _decrement(self._queues, lease.queue)
            _decrement(self._tenants, lease.tenant)
            _decrement(self._queue_tenants, (lease.queue, lease.tenant))

    # --- reading ----------------------------------------------------------------------------

    def in_flight(self, queue: str | None = None, tenant: str | None = None) -> int:
        """Runs in flight: in all (LIMIT-03), of ``queue``, of ``tenant`` (any queue), or of
        ``queue`` and ``tenant`` together."""
        with self._lock:
            if queue is None and tenant is None:
                return self._global
            if tenant is None:
                return self._queues.get(queue or "", 0)
            if queue is None:
                return self._tenants.get(tenant, 0)
            return self._queue_tenants.get((queue, tenant), 0)

    def blocked_by(self, queue: str, tenant_id: str | None = None) -> Reason | None:
        """Why the last ``acquire(queue, tenant_id)`` was refused, for 60 s after it (LIMIT-05)."""
        key = (queue, tenant_id or DEFAULT_TENANT)
        with self._lock:
            refusal = self._refusals.get(key)
            if refusal is None:
                return None
            reason, at = refusal
            if (self._clock.now() - at).total_seconds() >= MEMORY_SECONDS:
                del self._refusals[key]
                return None
            return reason

    def footprint(self) -> dict[str, int]:
        """Entries held in each map, to see that memory stays bounded (LIMIT-06)."""
        with self._lock:
            return {
                "queues": len(self._queues),
                "tenants": len(self._tenants),
                "queue_tenants": len(self._queue_tenants),
                "rate_windows": len(self._starts),
                "refusals": len(self._refusals),
            }

    # --- bounded memory (SPEC LIMIT-06, SE-25) ----------------------------------------------

    def _sweep(self, now: datetime) -> None:
        self._next_sweep = now + timedelta(seconds=MEMORY_SECONDS)
        rate = self.limits.rate_per_tenant
        if rate is not None:
            horizon = now - timedelta(seconds=rate.window)
            for tenant in list(self._starts):
                starts = self._starts[tenant]
                _drop_spent(starts, horizon)
                if not starts:
                    del self._starts[tenant]
        forget = now - timedelta(seconds=MEMORY_SECONDS)
        for key, (_, at) in list(self._refusals.items()):
            if at <= forget:
                del self._refusals[key]

    def _bound(self, grown: dict[Any, Any], now: datetime) -> None:
        """After ``grown`` gained a key: over ``max_tenants``, sweep at once, then evict down to
        90 %, the tenants with the fewest starts in the window (the least throttled) first."""
        cap = self.limits.max_tenants
        if len(grown) <= cap:
            return
        self._sweep(now)
        target = cap * 9 // 10
        tables: tuple[dict[Any, Any], ...] = (self._starts, self._refusals)
        for table in tables:
            if len(table) <= cap:
                continue
            ranked = sorted(table, key=self._eviction_rank)
            for key in ranked[: len(table) - target]:
                del table[key]

    def _eviction_rank(self, key: str | tuple[str, str]) -> tuple[int, datetime]:
        # Fewest starts first; among equals, the one idle longest.
        if isinstance(key, tuple):
            starts = self._starts.get(key[1])
            return (len(starts) if starts else 0, self._refusals[key][1])
        starts = self._starts[key]
        return (len(starts), starts[-1] if starts else _EPOCH)


def _drop_spent(starts: deque[datetime], horizon: datetime) -> None:
    # A start counts while it is newer than now - window (SPEC LIMIT-04).
    while starts and starts[0] <= horizon:
        starts.popleft()


def _decrement(counts: dict[Any, int], key: object) -> None:
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)  # SPEC LIMIT-06: a counter at 0 is deleted


# --- fleet-wide limits: what the claim is told -------------------------------------------------


def declared_limits() -> tuple[tuple[JobLimit, ...], dict[str, bool]]:
    """The registered jobs' limits, and for each declared queue whether every job routed to
    it carries a key (True) or some carries none (False)."""
    jobs: list[JobLimit] = []
    keyed: dict[str, bool] = {}
    for handle in registry.registered_jobs():
        limits, queue = handle.limits, handle.queue
        keyed[queue] = keyed.get(queue, True) and limits is not None
        if limits is None:
            continue
        rate = limits.rate
        jobs.append(
            JobLimit(
                name=handle.name,
                concurrency=limits.concurrency,
                rate=None if rate is None else rate.limit,
                window=None if rate is None else rate.window,
            )
        )
    return tuple(jobs), keyed


class LimitPlan:
    def __init__(
        self,
        driver: JobDriver,
        queues: Sequence[str],
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._driver, self._watched = driver, frozenset(queues)
        self._interval, self._clock = interval, clock
        self._told = threading.Event()
        self._read_at = float("-inf")
        self.jobs, self._keyed = declared_limits()
        #: the queues some limited job is declared on
        self._limited = frozenset(
            h.queue for h in registry.registered_jobs() if getattr(h, "limits", None) is not None
        )
        #: the operator's caps on this worker's queues, as last read
        self.caps: dict[str, int] = {}

    def changed(self) -> None:
        self._told.set()

    def refresh(self) -> dict[str, int]:
        """The caps, read again when told or a poll interval after the last read; a failed read
        keeps the last ones (the claim that follows fails the same way and backs off)."""
        if not self._told.is_set() and self._clock() - self._read_at < self._interval:
            return self.caps
        self._told.clear()
        try:
            caps = {
                c.queue: c.limit
                for c in self._driver.limits().queue_controls()
                if c.limit is not None and c.queue in self._watched
            }
        except Exception:
            self._told.set()
            return self.caps
        self._read_at = self._clock()
        self.caps = caps
        return caps

    def for_queues(self, queues: Sequence[str], sweep: bool) -> ClaimLimits | None:
        """The limits a claim from ``queues`` is made within, or None for the plain claim.

        A queue holding a job with no limit is searched for runs with no key on every claim; a
        queue of keyed jobs only on the sweep, among its first waiting rows (a run enqueued
        before its job declared a key is found there, at most a poll interval late)."""
        fair = conf.get().fair_share is not None
        limited = self._limited.intersection(queues)
        if not fair and not limited and not any(q in self.caps for q in queues):
            return None
        # under fair share every run enqueued by this code has a key: none is looked for plainly
        plain = () if fair else tuple(q for q in queues if not self._keyed.get(q, False))
        stray = tuple(q for q in queues if sweep and q not in plain)
        return ClaimLimits(jobs=self.jobs, plain_queues=plain, stray_queues=stray, fair=fair)
