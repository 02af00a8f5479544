"""The memory driver: the PostgreSQL driver's semantics in one process, for tests and trials.

Not durable and not shared between processes. The contract suite holds it to the same answers
as the database (SPEC DRV-04/05).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ..bounds import check_index_entry
from ..clock import Clock, SystemClock
from ..history import EXITED, KEEP, LAPSED, LAPSED_PRESENT, FailedAttempt, Failure
from ..ids import uuid7
from ..states import LIVE_STATES, shown_state
from .base import (
    ClaimedJob,
    Complete,
    EnqueueRequest,
    EnqueueResult,
    Finish,
    JobSnapshot,
    Presence,
    QueueState,
    QueueStats,
    RetryAt,
    Settle,
    Shed,
    StepRecord,
    SuspendUntil,
    WorkerSnapshot,
    check_claim_args,
    claimed_input,
)
from .memory_backfills import MemoryBackfillLedger
from .memory_leases import MemoryLeaseStore
from .memory_presence import MemoryPresence
from .memory_steps import MemoryEventStore, MemoryStepStore
from .rules import (
    CANCELLED,
    cancel_refusal,
    known_state,
    live_duplicate,
    not_found,
    requeue_refusal,
    unknown_step,
)

if TYPE_CHECKING:
    from ..outbox.store import OutboxStore
    from ..scheduler.store import SchedulerStore


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

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self._rows: dict[UUID, JobSnapshot] = {}
        self._lock = threading.RLock()
        self._subscriptions: list[_Subscription] = []
        self._controls: dict[str, QueueState] = {}
        # run_id -> step name -> record, in the order the steps were first written
        self._steps: dict[UUID, dict[str, StepRecord]] = {}
        self.steps = MemoryStepStore(self)
        self.leases = MemoryLeaseStore(self)
        self.events = MemoryEventStore(self)
        self.backfills = MemoryBackfillLedger(self)
        self._presence = MemoryPresence()
        self._outbox: OutboxStore | None = None
        self._scheduler: SchedulerStore | None = None

    def _now(self) -> datetime:
        return self.clock.now()

    def enqueue(self, request: EnqueueRequest) -> EnqueueResult:
        # what PostgreSQL's live-key index refuses, refused here too (issue 24)
        check_index_entry(request.name, request.tenant_id, request.idempotency_key)
        with self._lock:
            now = self._now()
            existing = self._rows.get(request.id) if request.id is not None else None
            if existing is not None:  # a staged id published again: the job it already is
                return EnqueueResult(id=existing.id, run_id=existing.run_id)
            for row in self._rows.values():
                if (
                    row.state in LIVE_STATES
                    and row.name == request.name
                    and (row.tenant_id or "") == (request.tenant_id or "")
                    and row.idempotency_key == request.idempotency_key
                ):
                    return EnqueueResult(id=row.id, run_id=row.run_id, deduped=True)
            run_at = request.run_at or now + timedelta(seconds=request.delay or 0.0)
            row = JobSnapshot(
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
            )
            self._rows[row.id] = row
            waiting = [s.callback for s in self._subscriptions if row.queue in s.queues]
        if row.state == "ready":
            for callback in waiting:
                callback()
        return EnqueueResult(id=row.id, run_id=row.run_id)

    def enqueue_many(self, requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
        return [self.enqueue(request) for request in requests]

    def claim(
        self,
        *,
        queues: Sequence[str],
        limit: int,
        visibility_timeout: float,
        worker_id: str,
        lapsed: bool = True,
    ) -> list[ClaimedJob]:
        check_claim_args(queues, limit, visibility_timeout)
        with self._lock:
            now = self._now()
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
                    )
                )
            ]
            due.sort(key=lambda r: (-r.priority, r.run_at, r.id))
            claimed = []
            for row in due[:limit]:
                lapsed = row.state == "running"
                errors = row.errors
                crashes, pending = 0, row.lapsed_holder
                if lapsed:
                    at = row.visible_at or now  # when its lease ran out
                    crashes, pending = self._presence.verdict(
                        row.claimed_by, row.lapsed_holder, now, visibility_timeout
                    )
                    counted = pending != row.claimed_by  # this holder judged gone, not pending
                    kind = LAPSED if counted else LAPSED_PRESENT
                    if self._presence.stopped(row.claimed_by):
                        kind = EXITED
                    entry = FailedAttempt.stamped(kind, attempt=row.attempt, at=at)
                    errors = (*errors, entry)[-KEEP:]
                row = replace(
                    row,
                    state="running",
                    attempt=row.attempt + 1,
                    lease_expiries=row.lease_expiries + crashes,
                    lapsed_holder=pending,
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
                done.add(row.id)
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
        )

    def suspend(self, suspend: SuspendUntil) -> bool:
        return self._release(
            suspend, state="suspended", delay=suspend.delay, give_back=True, error=suspend.error
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
                lease_expiries=row.lease_expiries if shed else 0,
                lapsed_holder=row.lapsed_holder if shed else None,
                attempt=max(row.attempt - 1, 0) if give_back else row.attempt,
                run_at=(
                    min(row.run_at, now) if keep_place else now + timedelta(seconds=max(0.0, delay))
                ),
                last_error=row.last_error if error is None else error,
                stop_reason=stop_reason,
                visible_at=None,
                claimed_by=None,
                lease_token=None,
                updated_at=now,
            )
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
            return row

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
            row = replace(
                row,
                state="ready",
                attempt=0,
                started_at=None,
                last_attempted_at=None,
                attempted_by=None,
                run_at=now,
                stop_reason=None,
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
            doomed = [r for r in self._rows.values() if r.state in counts and r.updated_at < cutoff]
            for row in doomed:
                counts[row.state] += 1
                if not dry_run:
                    del self._rows[row.id]
                    self._steps.pop(row.run_id, None)
        return counts

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
                held = QueueState(queue, True, self._now(), by)
                self._controls[queue] = held
        self._tell_controls()
        return held

    def resume_queue(self, queue: str) -> QueueState:
        state = QueueState(queue, False)
        with self._lock:
            self._controls[queue] = state
        self._tell_controls()
        return state

    def queue_controls(self) -> list[QueueState]:
        with self._lock:
            return [self._controls[name] for name in sorted(self._controls)]

    def paused_queues(self) -> frozenset[str]:
        with self._lock:
            return frozenset(name for name, state in self._controls.items() if state.paused)

    def _tell_controls(self) -> None:
        with self._lock:
            told = [s.on_control for s in self._subscriptions if s.on_control is not None]
        for callback in told:
            callback()

    def scheduler_store(self) -> SchedulerStore:
        """One in-process scheduler state per driver, on the driver's clock."""
        with self._lock:
            if self._scheduler is None:
                from ..scheduler.store import MemorySchedulerStore

                self._scheduler = MemorySchedulerStore(self.clock)
            return self._scheduler

    def outbox_store(self, alias: str) -> OutboxStore:
        """One in-process outbox for every alias: memory has no transaction to stage in."""
        with self._lock:
            if self._outbox is None:
                from ..outbox.memory import MemoryOutboxStore

                self._outbox = MemoryOutboxStore(clock=self.clock)
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
                )
            self._presence.shift(delta)


def _read(row: JobSnapshot) -> JobSnapshot:
    """A row as a read returns it: its state checked as the PostgreSQL driver's ``snapshot()``
    checks it (SPEC DB-05)."""
    known_state(row.id, row.state)
    return row
