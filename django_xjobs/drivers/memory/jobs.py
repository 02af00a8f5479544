"""The memory driver's verbs on jobs: enqueue, the operator's actions and pruning."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from ...ids import uuid7
from ...limits.keys import key_of
from ...states import FINISHED_STATES, LIVE_STATES, WAITING_STATES
from .. import rules
from ..bounds import check_index_entry
from ..contract import (
    EnqueueRequest,
    EnqueueResult,
    JobSnapshot,
)
from ..rules import (
    CANCELLED,
    FAR_FUTURE,
    cancel_refusal,
    check_after,
    live_duplicate,
    not_found,
    refuse_row_by_row,
    requeue_refusal,
    run_now_refusal,
    too_many_dependants,
    unknown_dependency,
    unknown_step,
)

if TYPE_CHECKING:
    from .batches import MemoryBatchStore
    from .steps import MemoryStepStore
from .state import MemoryState, _read


class MemoryJobs(MemoryState):
    """``JobStore`` in process (the PostgreSQL driver's ``jobs.sql`` enqueue and actions)."""

    #: the stores a cancel and a requeue write to as well, built by ``MemoryDriver``
    _batch_store: MemoryBatchStore
    _step_store: MemoryStepStore

    def enqueue(self, request: EnqueueRequest) -> EnqueueResult:
        # what PostgreSQL's live-key index refuses, refused here too (issue 24)
        check_index_entry(request.name, request.tenant_id, request.idempotency_key)
        if request.after is not None:
            return self._enqueue_after(request)
        with self._lock:
            now = self._now()
            existing = self._published(request.id)
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
            waiting = [s for s in self._subscriptions if row.queue in s.queues]
        if row.state == "ready":
            for sub in waiting:
                sub.woken(row.queue, row.priority)
        return EnqueueResult(row.id, row.run_id, deduped=replaced, replaced=replaced)

    def _published(self, staged: UUID | None) -> JobSnapshot | None:
        """The job a staged id already became, wherever it lives: a relay that published it
        and died before marking it publishes it again, maybe after it moved to the history
        (HIST-13)."""
        if staged is None:
            return None
        return self._rows.get(staged) or self._archived.get(staged)

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
            existing = self._published(request.id)
            if existing is not None:
                return EnqueueResult(id=existing.id, run_id=existing.run_id)
            deps = [self._rows.get(a) or self._archived.get(a) for a in given]  # HIST-04
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
            waiting = [s for s in self._subscriptions if row.queue in s.queues]
        if row.state == "ready":
            for sub in waiting:
                sub.woken(row.queue, row.priority)
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

    # --- operator actions (SPEC CANCEL-02..06, INSP-06, DESIGN) ---------------

    def cancel(self, job_id: UUID, reason: str | None) -> JobSnapshot:
        with self._lock:
            row = self._rows.get(job_id) or self._archived.get(job_id)  # HIST-04: refused
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
            if row.batch_id is not None:  # counted in its batch, as in complete
                self._batch_store.ended(row)
            if row.dependants:  # released, as in complete: they end dependency_failed
                self._release_dependants(row)
            return row

    def run_now(self, job_id: UUID) -> JobSnapshot:
        with self._lock:
            row = self._rows.get(job_id) or self._archived.get(job_id)  # HIST-04: refused
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

    def requeue(
        self, job_id: UUID, *, from_step: str | None, force: bool, restart: bool = False
    ) -> JobSnapshot:
        with self._lock:
            # HIST-05: a finished job in the history comes back (archive.sql's restore)
            row = self._rows.get(job_id) or self._archived.get(job_id)
            if row is None:
                raise not_found(job_id)
            refusal = requeue_refusal(job_id, row.state, force, restart, row.parked)
            if refusal is not None:
                raise refusal
            for other in self._rows.values():
                if (
                    other.id != row.id  # a parked run restarted is live already (issue 44)
                    and other.state in LIVE_STATES
                    and other.name == row.name
                    and (other.tenant_id or "") == (row.tenant_id or "")
                    and other.idempotency_key == row.idempotency_key
                ):
                    raise live_duplicate(job_id, other.id)  # the live unique index on PostgreSQL
            if from_step is not None:
                names = [r.name for r in self._step_store.list(row.run_id)]  # in position order
                if from_step not in names:
                    raise unknown_step(job_id, from_step, names)
                run = self._steps[row.run_id]
                for name in names[names.index(from_step) :]:  # DESIGN Q-04: it and every later one
                    del run[name]
            if restart:  # as jobs.sql's requeue_restart: every step goes (SPEC VER-09)
                self._steps.pop(row.run_id, None)
            now = self._now()
            if row.batch_id is not None and row.state in FINISHED_STATES:  # its batch waits again
                self._batch_store.reopened(row.batch_id, row.state)
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
                version=None if restart else row.version,
                parked=False,
                after_failed=None,
                waiting_on=None if row.waiting_on is None else min(row.waiting_on, 0),
                visible_at=None,
                claimed_by=None,
                lease_token=None,
                updated_at=now,
            )
            self._archived.pop(row.id, None)
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
