"""The memory driver's verbs on a run: its claim, its settles and its worker's presence."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from ...history import EXITED, KEEP, LAPSED, LAPSED_PRESENT, FailedAttempt, Failure
from ...limits.claims import ClaimLimits
from ...states import FINISHED_STATES, LIVE_STATES
from ..contract import (
    NO_VERSIONS,
    ClaimedJob,
    Complete,
    DeclaredVersions,
    Finish,
    JobSnapshot,
    Presence,
    RetryAt,
    Settle,
    Shed,
    SuspendUntil,
    claimed_input,
)
from ..rules import (
    check_claim_args,
)
from . import limits as memory_limits

if TYPE_CHECKING:
    from .batches import MemoryBatchStore
    from .rollup import MemoryRollupStore
    from .steps import MemoryEventStore
from .state import MemoryState, _Subscription


class MemoryRuns(MemoryState):
    """``RunStore`` in process: every write but the claim fenced on ``running`` and the token."""

    #: the stores a settle writes to as well, built by ``MemoryDriver``
    _rollup_store: MemoryRollupStore
    _batch_store: MemoryBatchStore
    _event_store: MemoryEventStore

    def claim(
        self,
        *,
        queues: Sequence[str],
        limit: int,
        visibility_timeout: float,
        worker_id: str,
        lapsed: bool = True,
        limits: ClaimLimits | None = None,
        versions: DeclaredVersions | None = None,
        paused: frozenset[str] = frozenset(),
    ) -> list[ClaimedJob]:
        check_claim_args(queues, limit, visibility_timeout)
        declared = versions or NO_VERSIONS
        with self._lock:
            now = self._now()
            if limits is not None:  # declared limits: decided as limits.sql decides them
                picked = memory_limits.pick(
                    self, queues, limit, lapsed, limits, now, visibility_timeout, declared, paused
                )
                # a lapsed run taken again is no new start (limits.sql's reclaim_lapsed)
                starts = [r.id for r in picked if r.state != "running"]
                claimed = self._take(picked, now, visibility_timeout, worker_id, declared)
                memory_limits.record(self, starts, limits, now)
                return claimed
            due = [
                row
                for row in self._rows.values()
                if row.queue in queues
                and row.run_at <= now
                and declared.honours(row.name, row.version, row.parked)  # SPEC VER-05, VER-08
                # an operator's pause of its job or key, waiting or lapsed (SPEC PAUSE-04/05/10)
                and row.name not in paused
                and self._limit_keys.get(row.id) not in paused
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
            return self._take(due[:limit], now, visibility_timeout, worker_id, declared)

    def _take(
        self,
        picked: list[JobSnapshot],
        now: datetime,
        visibility_timeout: float,
        worker_id: str,
        versions: DeclaredVersions = NO_VERSIONS,
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
                token = uuid.uuid4()
                row = replace(
                    row,
                    state="running",
                    attempt=row.attempt + 1,
                    lapsed_holder=died_with,
                    errors=errors,
                    claimed_by=worker_id,
                    lease_token=token,
                    visible_at=now + timedelta(seconds=visibility_timeout),
                    started_at=row.started_at or now,
                    last_attempted_at=now,
                    attempted_by=worker_id,
                    updated_at=now,
                    # SPEC VER-02: stamped at the first claim; a claim ends a park (VER-08)
                    version=versions.stamp(row.name, row.version, row.started_at is not None),
                    parked=False,
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
                        lease_token=token,
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
                        version=1 if row.version is None else row.version,
                    )
                )
            return claimed

    def complete(self, completes: Sequence[Complete]) -> set[UUID]:
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
                    last_error=None,  # as the database's complete: the history keeps the old one
                    lease_expiries=0,
                    lapsed_holder=None,
                    result=None if result is None else json.loads(result),
                    stop_reason=None,
                    visible_at=None,
                    claimed_by=None,
                    lease_token=None,
                    updated_at=now,
                )
                self._rollup_store.count(row, "done", now)
                done.add(row.id)
                if row.batch_id is not None:  # counted in its batch in the same write
                    self._batch_store.ended(self._rows[row.id])
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
        with self._lock:  # as jobs.sql's suspend: a park an event already answers is due now
            held = self._held(suspend.job_id, suspend.lease_token)
            answered = held is not None and self._event_store.answered(held.run_id, held.tenant_id)
            released = self._release(
                suspend,
                state="ready" if suspend.snoozed else "suspended",
                delay=0.0 if answered else suspend.delay,
                give_back=True,
                error=suspend.error,
                failure=suspend.failure,
                snoozed=suspend.snoozed,
            )
            if released and suspend.parked:  # as jobs.sql's suspend (issue 44)
                self._rows[suspend.job_id] = replace(self._rows[suspend.job_id], parked=True)
            return released

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
                self._rollup_store.count(row, outcome, now)
            if row.batch_id is not None:  # a final state is counted in its batch, as in complete
                self._batch_store.ended(self._rows[row.id])
            if row.dependants and state in FINISHED_STATES:  # released, as in complete
                self._release_dependants(self._rows[row.id])
            return True

    def restart(self, job_id: UUID, lease_token: UUID, version: int, entry: Failure) -> bool:
        with self._lock:  # as jobs.sql's restart_run (SPEC VER-07)
            row = self._held(job_id, lease_token)
            if row is None:
                return False
            now = self._now()
            stamped = FailedAttempt.stamped(entry, attempt=row.attempt, at=now)
            errors = (*row.errors, stamped)[-KEEP:]
            self._rows[job_id] = replace(row, version=version, errors=errors, updated_at=now)
            self._steps.pop(row.run_id, None)
            return True

    def progress(self, job_id: UUID, lease_token: UUID, progress: Mapping[str, object]) -> bool:
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

    def notify_on_ready(
        self,
        queues: Iterable[str],
        callback: Callable[[], None],
        on_control: Callable[[], None] | None = None,
        on_urgent: Callable[[str, int], None] | None = None,
    ) -> _Subscription:
        subscription = _Subscription(set(queues), callback, self, on_control, on_urgent)
        with self._lock:
            self._subscriptions.append(subscription)
        return subscription
