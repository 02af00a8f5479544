"""The memory driver: the PostgreSQL driver's semantics in one process, for tests and trials.

Not durable and not shared between processes. The contract suite holds it to the same answers
as the database (SPEC DRV-04/05).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ...bounds import check_index_entry
from ...clock import Clock, SystemClock
from ...history import EXITED, KEEP, LAPSED, LAPSED_PRESENT, FailedAttempt, Failure
from ...ids import uuid7
from ...limits.claims import ClaimLimits
from ...limits.keys import key_of
from ...states import FINISHED_STATES, LIVE_STATES, WAITING_STATES, shown_state
from .. import rules
from ..contract import (
    AGED,
    ClaimedJob,
    Complete,
    EnqueueRequest,
    EnqueueResult,
    EventStore,
    Finish,
    JobSnapshot,
    Presence,
    QueueState,
    QueueStats,
    RetryAt,
    Settle,
    Shed,
    Standing,
    StepRecord,
    SuspendUntil,
    WorkerSnapshot,
    claimed_input,
)
from ..rules import (
    CANCELLED,
    FAR_FUTURE,
    cancel_refusal,
    check_after,
    check_claim_args,
    known_state,
    live_duplicate,
    not_found,
    refuse_row_by_row,
    requeue_refusal,
    run_now_refusal,
    too_many_dependants,
    unknown_dependency,
    unknown_step,
)
from . import limits as memory_limits
from . import standing as memory_standing
from .backfills import MemoryBackfillLedger
from .batches import MemoryBatchStore
from .depth import MemoryDepthStore
from .leases import MemoryLeaseStore
from .presence import MemoryPresence
from .rollup import MemoryRollupStore
from .steps import MemoryEventStore, MemoryStepStore

if TYPE_CHECKING:
    from ..contract import OutboxStore, SchedulerStore


@dataclass
class _Subscription:
    queues: set[str]
    callback: Callable[[], None]
    owner: MemoryDriver
    on_control: Callable[[], None] | None = None

    def stop(self) -> None:
        with self.owner._lock:
            if self in self.owner._subscriptions:
                self.owner._subscriptions.remove(self)


class MemoryDriver:
    name = "memory"
    database: str | None = None
    #: its rows live in this process: a child could not see them
    supports_child_runs = False

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self._rows: dict[UUID, JobSnapshot] = {}
        self._lock = threading.RLock()
        self._subscriptions: list[_Subscription] = []
        self._controls: dict[str, QueueState] = {}
        #: a limited run's key by job id (x_jobs.limit_key), and each key's state (x_limit_keys)
        self._limit_keys: dict[UUID, str] = {}
        self._key_state: dict[str, memory_limits.KeyState] = {}
        #: per queue, the last key a limited claim took (PostgresDriver's ``_limit_cursor``)
        self._limit_cursor: dict[str, str] = {}
        # run_id -> step name -> record, in the order the steps were first written
        self._steps: dict[UUID, dict[str, StepRecord]] = {}
        self.steps = MemoryStepStore(self)
        self.leases = MemoryLeaseStore(self)
        self.events = MemoryEventStore(self)
        self.backfills = MemoryBackfillLedger(self)
        self.rollups = MemoryRollupStore(self)
        self.depths = MemoryDepthStore(self)
        self.batches = MemoryBatchStore(self)
        self._presence = MemoryPresence()
        self._outbox: OutboxStore | None = None
        self._scheduler: SchedulerStore | None = None

    def _now(self) -> datetime:
        return self.clock.now()

    def enqueue(self, request: EnqueueRequest) -> EnqueueResult:
        # what PostgreSQL's live-key index refuses, refused here too (issue 24)
        check_index_entry(request.name, request.tenant_id, request.idempotency_key)
        if request.after is not None:
            return self._enqueue_after(request)
        with self._lock:
            now = self._now()
            existing = self._rows.get(request.id) if request.id is not None else None
            if existing is not None:  # a staged id published again: the job it already is
                return EnqueueResult(id=existing.id, run_id=existing.run_id)
            run_at = request.run_at or now + timedelta(seconds=request.delay or 0.0)
            expires_at = request.expires_at
            if expires_at is None and request.expires_in is not None:
                expires_at = run_at + timedelta(seconds=request.expires_in)
            held = next(
                (
                    row
                    for row in self._rows.values()
                    if row.state in LIVE_STATES
                    and row.name == request.name
                    and (row.tenant_id or "") == (request.tenant_id or "")
                    and row.idempotency_key == request.idempotency_key
                ),
                None,
            )
            replaced = held is not None
            if held is None:
                row = self._new_row(request, now, run_at, expires_at)
            elif request.replace and held.state in WAITING_STATES and held.started_at is None:
                # as replace_waiting: a waiting, never-started holder takes the new values
                row = replace(
                    held,
                    input=json.loads(request.input_json),
                    run_at=run_at,
                    state="delayed" if run_at > now else "ready",
                    expires_at=expires_at,
                    updated_at=now,
                )
            else:
                return EnqueueResult(id=held.id, run_id=held.run_id, deduped=True)
            self._rows[row.id] = row
            limit_key = key_of(request.name, row.input, request.tenant_id)
            if limit_key is not None:
                self._limit_keys[row.id] = limit_key
            waiting = [s.callback for s in self._subscriptions if row.queue in s.queues]
        if row.state == "ready":
            for callback in waiting:
                callback()
        return EnqueueResult(row.id, row.run_id, deduped=replaced, replaced=replaced)

    def _enqueue_after(self, request: EnqueueRequest) -> EnqueueResult:
        """As jobs.sql's enqueue_after: registered with its dependencies, or refused (issue 32)."""
        job_id = request.id or uuid7()
        after = check_after(job_id, request.after or ())
        # a staged id that collapsed into a live duplicate at its publish: the job it became
        resolve = self._outbox.resolve if self._outbox is not None else lambda _: None
        given = tuple(dict.fromkeys(resolve(a) or a for a in after))
        strict = request.id is None
        with self._lock:
            now = self._now()
            existing = self._rows.get(job_id) if request.id is not None else None
            if existing is not None:
                return EnqueueResult(id=existing.id, run_id=existing.run_id)
            deps = [self._rows.get(a) for a in given]
            unknown = sorted(a for a, d in zip(given, deps, strict=True) if d is None)
            if unknown and strict:
                raise unknown_dependency(request.name, unknown[0])
            full = sorted(
                d.id
                for d in deps
                if d is not None
                and d.state in LIVE_STATES
                and len(d.dependants or ()) >= rules.MAX_DEPENDANTS
            )
            if full:  # as jobs.sql's enqueue_after: it takes no more dependants
                raise too_many_dependants(request.name, full[0])
            held = self._live_holder(request)
            if held is not None:
                return EnqueueResult(id=held.id, run_id=held.run_id, deduped=True)
            live = [d for d in deps if d is not None and d.state in LIVE_STATES]
            ended = [
                d.id for d in deps if d is not None and d.state in ("dead", "failed", CANCELLED)
            ]
            failed = None if request.run_anyway else min([*ended, *unknown], default=None)
            run_at = request.run_at or now + timedelta(seconds=request.delay or 0.0)
            expires_at = request.expires_at
            if expires_at is None and request.expires_in is not None:
                expires_at = run_at + timedelta(seconds=request.expires_in)
            row = self._new_row(replace(request, id=job_id), now, run_at, expires_at)
            if failed is not None:
                row = replace(row, state="ready", run_at=now, expires_at=now)
            elif live:
                row = replace(row, state="suspended", run_at=FAR_FUTURE)
            row = replace(
                row,
                after=after,
                waiting_on=0 if failed is not None else len(live),
                after_failed=failed,
                run_anyway=request.run_anyway,
            )
            self._rows[row.id] = row
            limit_key = key_of(request.name, row.input, request.tenant_id)
            if limit_key is not None:
                self._limit_keys[row.id] = limit_key
            if row.waiting_on:
                for dep in live:
                    self._rows[dep.id] = replace(dep, dependants=(*(dep.dependants or ()), row.id))
            waiting = [s.callback for s in self._subscriptions if row.queue in s.queues]
        if row.state == "ready":
            for callback in waiting:
                callback()
        return EnqueueResult(row.id, row.run_id)

    def _live_holder(self, request: EnqueueRequest) -> JobSnapshot | None:
        return next(
            (
                row
                for row in self._rows.values()
                if row.state in LIVE_STATES
                and row.name == request.name
                and (row.tenant_id or "") == (request.tenant_id or "")
                and row.idempotency_key == request.idempotency_key
            ),
            None,
        )

    def _release_dependants(self, settled: JobSnapshot) -> None:
        """As the settle statements' ``released``: the jobs waiting for ``settled``, which just
        reached a final state, count it; at the last one (or a failure) they fall due now."""
        now = self._now()
        woken = []
        for job_id in sorted(settled.dependants or ()):
            row = self._rows.get(job_id)
            if row is None or row.state != "suspended" or not row.waiting_on:
                continue
            # a run that started (a parent parked on children) counts every end alike
            anyway = row.run_anyway or row.started_at is not None
            failed = settled.id if settled.state != "done" and not anyway else None
            left = 0 if failed is not None else max(row.waiting_on - 1, 0)
            released = left == 0
            self._rows[job_id] = replace(
                row,
                waiting_on=left,
                after_failed=failed,
                state="ready" if released else row.state,
                run_at=now if released else row.run_at,
                expires_at=now if failed is not None else row.expires_at,
                updated_at=now,
            )
            if released:
                woken.append(row.queue)
        for queue in dict.fromkeys(woken):
            for sub in [s for s in self._subscriptions if queue in s.queues]:
                sub.callback()

    def _new_row(
        self, request: EnqueueRequest, now: datetime, run_at: datetime, expires: datetime | None
    ) -> JobSnapshot:
        return JobSnapshot(
            id=request.id or uuid7(),
            name=request.name,
            queue=request.queue,
            state="delayed" if run_at > now else "ready",
            input=json.loads(request.input_json),
            idempotency_key=request.idempotency_key,
            run_id=uuid7(),
            attempt=0,
            max_attempts=request.max_attempts,
            priority=request.priority,
            run_at=run_at,
            visible_at=None,
            claimed_by=None,
            lease_token=None,
            last_error=None,
            stop_reason=None,
            result=None,
            tenant_id=request.tenant_id,
            enqueued_by=request.enqueued_by,
            traceparent=request.traceparent,
            created_at=now,
            updated_at=now,
            expires_at=expires,
        )

    def enqueue_many(self, requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
        return [self.enqueue(request) for request in requests]

    def enqueue_chunks(self, chunks: Iterable[Sequence[EnqueueRequest]]) -> list[EnqueueResult]:
        # every chunk made before any is written: a chunk that fails to be made writes nothing
        requests = [request for chunk in chunks for request in chunk]
        refuse_row_by_row(requests)
        return self.enqueue_many(requests)

    def claim(
        self,
        *,
        queues: Sequence[str],
        limit: int,
        visibility_timeout: float,
        worker_id: str,
        lapsed: bool = True,
        limits: ClaimLimits | None = None,
    ) -> list[ClaimedJob]:
        check_claim_args(queues, limit, visibility_timeout)
        with self._lock:
            now = self._now()
            if limits is not None:  # declared limits: decided as limits.sql decides them
                picked = memory_limits.pick(
                    self, queues, limit, lapsed, limits, now, visibility_timeout
                )
                # a lapsed run taken again is no new start (limits.sql's reclaim_lapsed)
                starts = [r.id for r in picked if r.state != "running"]
                claimed = self._take(picked, now, visibility_timeout, worker_id)
                memory_limits.record(self, starts, limits, now)
                return claimed
            due = [
                row
                for row in self._rows.values()
                if row.queue in queues
                and row.run_at <= now
                and (
                    row.state in ("ready", "delayed", "suspended")
                    or (
                        lapsed
                        and row.state == "running"
                        and row.visible_at is not None
                        and row.visible_at <= now
                        and self._presence.decided(
                            row.claimed_by, row.visible_at, now, visibility_timeout
                        )
                    )
                )
            ]
            due.sort(key=lambda r: (-r.priority, r.run_at, r.id))
            return self._take(due[:limit], now, visibility_timeout, worker_id)

    def _take(
        self, picked: list[JobSnapshot], now: datetime, visibility_timeout: float, worker_id: str
    ) -> list[ClaimedJob]:
        """Claim the rows ``picked``, in that order, as the claim statements take them."""
        with self._lock:
            claimed = []
            for row in picked:
                lapsed = row.state == "running"
                # as the claim's `expired`: first claimed at or past its expiry, at that
                # claim and at every reclaim of it (its verdict was never settled)
                first = row.started_at or now
                expired = row.expires_at is not None and row.expires_at <= first
                errors = row.errors
                died_with = row.lapsed_holder
                if lapsed:
                    at = row.visible_at or now  # when its lease ran out
                    verdict = self._presence.verdict(row.claimed_by, at)
                    if verdict == "died":  # SPEC LEASE-16: not counted; it runs alone next
                        died_with = row.claimed_by
                    kind = {"exited": EXITED, "died": LAPSED}.get(verdict, LAPSED_PRESENT)
                    entry = FailedAttempt.stamped(kind, attempt=row.attempt, at=at)
                    errors = (*errors, entry)[-KEEP:]
                row = replace(
                    row,
                    state="running",
                    attempt=row.attempt + 1,
                    lapsed_holder=died_with,
                    errors=errors,
                    claimed_by=worker_id,
                    lease_token=uuid.uuid4(),
                    visible_at=now + timedelta(seconds=visibility_timeout),
                    started_at=row.started_at or now,
                    last_attempted_at=now,
                    attempted_by=worker_id,
                    updated_at=now,
                )
                self._rows[row.id] = row
                inputs, undecodable = claimed_input(row.input)  # row by row, as in postgres
                claimed.append(
                    ClaimedJob(
                        id=row.id,
                        run_id=row.run_id,
                        name=row.name,
                        queue=row.queue,
                        input=inputs,
                        attempt=row.attempt,
                        max_attempts=row.max_attempts,
                        lease_token=row.lease_token,  # type: ignore[arg-type]
                        priority=row.priority,
                        tenant_id=row.tenant_id,
                        enqueued_by=row.enqueued_by,
                        idempotency_key=row.idempotency_key,
                        created_at=row.created_at,
                        lease_expiries=row.lease_expiries,
                        traceparent=row.traceparent,
                        undecodable=undecodable,
                        expired=expired,
                        snoozes=row.snoozes,
                        waited=max((now - row.run_at).total_seconds(), 0.0),
                        died_with=row.lapsed_holder,
                    )
                )
            return claimed

    def _held(self, job_id: UUID, token: UUID) -> JobSnapshot | None:
        row = self._rows.get(job_id)
        if row is None or row.state != "running" or row.lease_token != token:
            return None
        return row

    def ack(self, completes: Sequence[Complete]) -> set[UUID]:
        done: set[UUID] = set()
        with self._lock:
            now = self._now()
            for complete in completes:
                row = self._held(complete.job_id, complete.lease_token)
                if row is None:
                    continue
                result = complete.result_json
                self._rows[row.id] = replace(
                    row,
                    state="done",
                    last_error=None,  # as the database's ack: the history keeps the old one
                    lease_expiries=0,
                    lapsed_holder=None,
                    result=None if result is None else json.loads(result),
                    stop_reason=None,
                    visible_at=None,
                    claimed_by=None,
                    lease_token=None,
                    updated_at=now,
                )
                self.rollups.count(row, "done", now)
                done.add(row.id)
                if row.batch_id is not None:  # counted in its batch in the same write
                    self.batches.ended(self._rows[row.id])
                if row.dependants:  # released in the same write (SPEC DEP-02)
                    self._release_dependants(self._rows[row.id])
        return done

    def retry(self, retry: RetryAt) -> bool:
        return self._release(
            retry,
            state="ready",
            delay=retry.delay,
            give_back=not retry.counts_as_attempt,
            error=retry.error,
            stop_reason=retry.stop_reason,
            failure=retry.failure,
            crashed=retry.crashed,
            keep_place=retry.keep_place,
            # a hand-back that spends no attempt is no end of a run: not counted
            outcome="retried" if retry.counts_as_attempt else None,
        )

    def suspend(self, suspend: SuspendUntil) -> bool:
        if suspend.children:  # as jobs.sql's suspend_children (SPEC CHILD-07)
            with self._lock:
                if self._held(suspend.job_id, suspend.lease_token) is None:
                    return False
                live = []
                for child_id in sorted(suspend.children):
                    child = self._rows.get(child_id)
                    if child is None or child.state not in LIVE_STATES:
                        continue
                    if suspend.job_id not in (child.dependants or ()):
                        named = (*(child.dependants or ()), suspend.job_id)
                        self._rows[child_id] = replace(child, dependants=named)
                    live.append(child_id)
                parked = self._release(
                    suspend,
                    state="suspended",
                    delay=suspend.delay if live else 0.0,
                    give_back=True,
                    error=suspend.error,
                )
                row = self._rows[suspend.job_id]
                self._rows[row.id] = replace(row, waiting_on=len(live))
                return parked
        return self._release(
            suspend,
            state="ready" if suspend.snoozed else "suspended",
            delay=suspend.delay,
            give_back=True,
            error=suspend.error,
            failure=suspend.failure,
            snoozed=suspend.snoozed,
        )

    def shed(self, shed: Shed) -> bool:
        return self._release(
            shed,
            state="ready",
            delay=shed.delay,
            give_back=True,
            shed=True,
            keep_place=shed.keep_place,
        )

    def finish(self, finish: Finish) -> bool:
        return self._release(
            finish,
            state=finish.state,
            error=finish.error,
            stop_reason=finish.stop_reason,
            failure=finish.failure,
            outcome=finish.state,
        )

    def _release(
        self,
        value: Settle,
        *,
        state: str,
        delay: float = 0.0,
        give_back: bool = False,
        error: str | None = None,
        stop_reason: str | None = None,
        failure: Failure | None = None,
        shed: bool = False,
        keep_place: bool = False,
        snoozed: bool = False,
        outcome: str | None = None,
        crashed: bool = False,
    ) -> bool:
        """The one write behind retry/suspend/shed/finish, as their named statements do."""
        with self._lock:
            row = self._held(value.job_id, value.lease_token)
            if row is None:
                return False
            now = self._now()
            errors = row.errors
            if failure is not None:
                entry = FailedAttempt.stamped(failure, attempt=row.attempt, at=now)
                errors = (*errors, entry)[-KEEP:]
            self._rows[row.id] = replace(
                row,
                state=state,
                errors=errors,
                # SPEC LEASE-17: a run that died alone in its child is counted, as jobs.sql's retry
                lease_expiries=row.lease_expiries + 1
                if crashed
                else (row.lease_expiries if shed or keep_place else 0),
                lapsed_holder=row.lapsed_holder if shed or keep_place else None,
                attempt=max(row.attempt - 1, 0) if give_back else row.attempt,
                run_at=(
                    min(row.run_at, now) if keep_place else now + timedelta(seconds=max(0.0, delay))
                ),
                last_error=row.last_error if error is None else error,
                stop_reason=stop_reason,
                snoozes=row.snoozes + 1 if snoozed else row.snoozes,
                visible_at=None,
                claimed_by=None,
                lease_token=None,
                updated_at=now,
            )
            if outcome is not None:
                self.rollups.count(row, outcome, now)
            if row.batch_id is not None:  # a final state is counted in its batch, as in ack
                self.batches.ended(self._rows[row.id])
            if row.dependants and state in FINISHED_STATES:  # released, as in ack
                self._release_dependants(self._rows[row.id])
            return True

    def progress(self, job_id: UUID, lease_token: UUID, progress: dict[str, Any]) -> bool:
        with self._lock:
            row = self._held(job_id, lease_token)
            if row is None:
                return False
            # the database stores it as JSON text and stamps `at`: the same shape read back
            stored = {**json.loads(json.dumps(progress)), "at": self._now().isoformat()}
            self._rows[row.id] = replace(row, progress=stored)
            return True

    def heartbeat(self, job_id: UUID, lease_token: UUID, visibility_timeout: float) -> bool:
        with self._lock:
            row = self._held(job_id, lease_token)
            if row is None:
                return False
            visible_at = self._now() + timedelta(seconds=visibility_timeout)
            self._rows[row.id] = replace(row, visible_at=visible_at)
            return True

    def renew_presence(self, presence: Presence, ttl: float) -> None:
        with self._lock:
            self._presence.renew(presence, ttl, self._now())

    def stop_presence(self, worker_id: str) -> None:
        with self._lock:
            self._presence.stop(worker_id, self._now())

    def release_presence(self, worker_id: str) -> None:
        with self._lock:
            self._presence.release(worker_id)

    def workers(self) -> list[WorkerSnapshot]:
        with self._lock:
            return self._presence.snapshot(self._now())

    def stats(self) -> list[QueueStats]:
        with self._lock:
            now = self._now()
            buckets: dict[str, dict[str, Any]] = {}
            for row in self._rows.values():
                b = buckets.setdefault(
                    row.queue,
                    {
                        "ready": 0,
                        "delayed": 0,
                        "running": 0,
                        "suspended": 0,
                        "dead": 0,
                        "oldest": 0.0,
                    },
                )
                if row.state in ("ready", "delayed"):
                    if row.run_at <= now:
                        b["ready"] += 1
                        b["oldest"] = max(b["oldest"], (now - row.run_at).total_seconds())
                    else:
                        b["delayed"] += 1
                elif row.state in ("running", "suspended", "dead"):
                    b[row.state] += 1
            return [
                QueueStats(
                    queue=q,
                    ready=b["ready"],
                    delayed=b["delayed"],
                    running=b["running"],
                    suspended=b["suspended"],
                    dead=b["dead"],
                    oldest_ready_seconds=b["oldest"],
                )
                for q, b in sorted(buckets.items())
            ]

    def get_job(self, job_id: UUID) -> JobSnapshot | None:
        with self._lock:
            row = self._rows.get(job_id)
        return None if row is None else _read(row)

    def list_jobs(
        self,
        *,
        queue: str | None = None,
        name: str | None = None,
        state: str | None = None,
        limit: int = 100,
    ) -> list[JobSnapshot]:
        with self._lock:
            now = self._now()
            rows = [
                r
                for r in self._rows.values()
                if (queue is None or r.queue == queue)
                and (name is None or r.name == name)
                # as the database's filter: by the state shown (DESIGN Q-05)
                and (state is None or shown_state(r.state, r.run_at, now) == state)
            ]
        rows.sort(key=lambda r: (r.created_at, r.id), reverse=True)  # SPEC SE-06: newest first
        return [_read(r) for r in rows[:limit]]

    def standing(self, job_id: UUID, *, cap: int, fair: bool = False) -> Standing | None:
        with self._lock:
            return memory_standing.standing(self, job_id, cap=cap, fair=fair)

    def job_states(self, ids: Sequence[UUID]) -> dict[UUID, str]:
        with self._lock:
            return memory_standing.job_states(self, ids)

    def job_ids_between(self, low: UUID, high: UUID, *, limit: int) -> list[UUID]:
        with self._lock:
            # PostgreSQL orders uuids by their bytes, as Python's UUID compares them
            return sorted(i for i in self._rows if low <= i <= high)[:limit]

    def dead_letters(self, *, limit: int = 100) -> list[JobSnapshot]:
        with self._lock:
            rows = [r for r in self._rows.values() if r.state == "dead"]
        rows.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        return [_read(r) for r in rows[:limit]]

    # --- operator actions (SPEC CANCEL-02..06, INSP-06, DESIGN) ---------------

    def cancel(self, job_id: UUID, reason: str | None) -> JobSnapshot:
        with self._lock:
            row = self._rows.get(job_id)
            if row is None:
                raise not_found(job_id)
            refusal = cancel_refusal(job_id, row.state)
            if refusal is not None:
                raise refusal
            if row.state == CANCELLED:
                return row  # DESIGN Q-09: a no-op, the first reason stays
            # Clearing the token is what stops the holder: its heartbeat, step writes and every
            # settle are fenced on it (SPEC CANCEL-05/06).
            row = replace(
                row,
                state=CANCELLED,
                stop_reason="cancelled",
                lease_expiries=0,
                lapsed_holder=None,
                last_error=row.last_error if reason is None else reason,
                visible_at=None,
                claimed_by=None,
                lease_token=None,
                updated_at=self._now(),
            )
            self._rows[row.id] = row
            if row.batch_id is not None:  # counted in its batch, as in ack
                self.batches.ended(row)
            if row.dependants:  # released, as in ack: they end dependency_failed
                self._release_dependants(row)
            return row

    def run_now(self, job_id: UUID) -> JobSnapshot:
        with self._lock:
            row = self._rows.get(job_id)
            if row is None:
                raise not_found(job_id)
            refusal = run_now_refusal(job_id, row.state)
            if refusal is not None:
                raise refusal
            now = self._now()
            row = replace(row, state="ready", run_at=min(row.run_at, now), updated_at=now)
            self._rows[job_id] = row
            woken = [s for s in self._subscriptions if row.queue in s.queues]
        for sub in woken:
            sub.callback()
        return _read(row)

    def requeue(self, job_id: UUID, *, from_step: str | None, force: bool) -> JobSnapshot:
        with self._lock:
            row = self._rows.get(job_id)
            if row is None:
                raise not_found(job_id)
            refusal = requeue_refusal(job_id, row.state, force)
            if refusal is not None:
                raise refusal
            for other in self._rows.values():
                if (
                    other.state in LIVE_STATES
                    and other.name == row.name
                    and (other.tenant_id or "") == (row.tenant_id or "")
                    and other.idempotency_key == row.idempotency_key
                ):
                    raise live_duplicate(job_id, other.id)  # the live unique index on PostgreSQL
            if from_step is not None:
                names = [r.name for r in self.steps.list(row.run_id)]  # in position order
                if from_step not in names:
                    raise unknown_step(job_id, from_step, names)
                run = self._steps[row.run_id]
                for name in names[names.index(from_step) :]:  # DESIGN Q-04: it and every later one
                    del run[name]
            now = self._now()
            if row.batch_id is not None:  # its batch waits for it again (jobs.sql requeue)
                self.batches.reopened(row.batch_id, row.state)
            row = replace(
                row,
                state="ready",
                attempt=0,
                expires_at=None,
                snoozes=0,
                started_at=None,
                last_attempted_at=None,
                attempted_by=None,
                run_at=now,
                stop_reason=None,
                after_failed=None,
                waiting_on=None if row.waiting_on is None else min(row.waiting_on, 0),
                visible_at=None,
                claimed_by=None,
                lease_token=None,
                updated_at=now,
            )
            self._rows[row.id] = row
            waiting = [s.callback for s in self._subscriptions if row.queue in s.queues]
        for callback in waiting:
            callback()
        return row

    def prune(
        self, *, older_than: float, states: Sequence[str], dry_run: bool = False
    ) -> dict[str, int]:
        cutoff = self._now() - timedelta(seconds=older_than)
        counts = dict.fromkeys(states, 0)
        with self._lock:
            doomed = [
                r
                for r in self._rows.values()
                if r.state in counts and r.updated_at < cutoff and not self._awaited(r)
            ]
            for row in doomed:
                counts[row.state] += 1
                if not dry_run:
                    del self._rows[row.id]
                    self._steps.pop(row.run_id, None)
        return counts

    def _awaited(self, row: JobSnapshot) -> bool:
        """Whether a live job ``row`` waited for still names it (prune keeps it, as jobs.sql)."""
        return any(
            (dep := self._rows.get(a)) is not None and dep.state in LIVE_STATES
            for a in row.after or ()
        )

    def notify_on_ready(
        self,
        queues: Iterable[str],
        callback: Callable[[], None],
        on_control: Callable[[], None] | None = None,
    ) -> _Subscription:
        subscription = _Subscription(set(queues), callback, self, on_control)
        with self._lock:
            self._subscriptions.append(subscription)
        return subscription

    def pause_queue(self, queue: str, by: str | None) -> QueueState:
        with self._lock:
            held = self._controls.get(queue)
            if held is None or not held.paused:  # the first pause wins, as on the database
                cap = None if held is None else held.limit
                held = QueueState(queue, True, self._now(), by, cap)
                self._controls[queue] = held
        self._tell_controls()
        return held

    def resume_queue(self, queue: str) -> QueueState:
        with self._lock:
            held = self._controls.get(queue)
            state = QueueState(queue, False, limit=None if held is None else held.limit)
            self._controls[queue] = state
        self._tell_controls()
        return state

    def queue_controls(self) -> list[QueueState]:
        with self._lock:
            return [self._controls[name] for name in sorted(self._controls)]

    def paused_queues(self) -> frozenset[str]:
        with self._lock:
            return frozenset(name for name, state in self._controls.items() if state.paused)

    def set_queue_limit(self, queue: str, concurrency: int | None) -> QueueState:
        with self._lock:
            held = self._controls.get(queue) or QueueState(queue, False)
            state = replace(held, limit=concurrency)
            self._controls[queue] = state
        self._tell_controls()
        return state

    def queue_limits(self) -> dict[str, int]:
        with self._lock:
            return {q: s.limit for q, s in self._controls.items() if s.limit is not None}

    def pause_key(self, key: str, delay: float) -> None:
        with self._lock:
            memory_limits.pause(self, key, delay, self._now())

    def key_usage(self, limit: int = 500) -> list[tuple[str, Any, int, list[Any]]]:
        with self._lock:
            return memory_limits.usage(self, limit, self._now())

    def prune_limit_keys(self, windows: Mapping[str, float], idle_for: float) -> int:
        with self._lock:
            return memory_limits.prune(self, windows, idle_for, self._now())

    def _tell_controls(self) -> None:
        with self._lock:
            told = [s.on_control for s in self._subscriptions if s.on_control is not None]
        for callback in told:
            callback()

    def scheduler_store(self) -> SchedulerStore:
        """One in-process scheduler state per driver, on the driver's clock."""
        with self._lock:
            if self._scheduler is None:
                from .scheduler import MemorySchedulerStore

                self._scheduler = MemorySchedulerStore(self.clock)
            return self._scheduler

    def preflight(self, alias: str, table: str = "x_jobs") -> None:
        """Nothing to reach and no table to miss."""

    def age(self, seconds: float, *, only: Collection[str] = AGED) -> None:
        if "jobs" in only:
            self.shift(seconds)
        if "steps" in only:
            self.steps.shift(seconds)
        if "events" in only:
            self.events.shift(seconds)

    def event_store(self, alias: str) -> EventStore:
        """The one in-process event store, whatever the alias: memory has no databases."""
        return self.events

    def outbox_store(self, alias: str, claim_lease: Any = None) -> OutboxStore:
        """One in-process outbox for every alias: memory has no transaction to stage in. The
        first caller's ``claim_lease`` is the one it keeps."""
        with self._lock:
            if self._outbox is None:
                from .outbox import MemoryOutboxStore

                self._outbox = MemoryOutboxStore(claim_lease=claim_lease, clock=self.clock)
            return self._outbox

    def close(self) -> None:
        """Nothing to release; the rows stay for the next user of this driver."""

    # --- test support: move time by moving rows, like the database harness does -----------

    def shift(self, seconds: float) -> None:
        """Make every stored time ``seconds`` earlier (the same as waiting that long)."""
        delta = timedelta(seconds=seconds)
        with self._lock:
            for key, row in self._rows.items():
                self._rows[key] = replace(
                    row,
                    run_at=row.run_at - delta,
                    visible_at=None if row.visible_at is None else row.visible_at - delta,
                    created_at=row.created_at - delta,
                    updated_at=row.updated_at - delta,
                    started_at=None if row.started_at is None else row.started_at - delta,
                    last_attempted_at=(
                        None if row.last_attempted_at is None else row.last_attempted_at - delta
                    ),
                    expires_at=None if row.expires_at is None else row.expires_at - delta,
                )
            self._presence.shift(delta)
            self.rollups.shift(delta)
            self.depths.shift(delta)
            memory_limits.shift(self, delta)


def _read(row: JobSnapshot) -> JobSnapshot:
    """A row as a read returns it: its state checked as the PostgreSQL driver's ``snapshot()``
    checks it (SPEC DB-05)."""
    known_state(row.id, row.state)
    return row
