"""The memory driver's step and event stores: the PostgreSQL stores' answers, in process."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ... import conf, crypt
from ..contract import EventRecord, JobSnapshot, StepRecord
from ..rules import event_matches, known_status

if TYPE_CHECKING:
    from .state import MemoryState

MAX_EVENTS = 10_000  # SPEC EVT-04: the oldest is evicted past this


class MemoryStepStore:
    def __init__(self, state: MemoryState) -> None:
        self.state = state

    @property
    def using(self) -> str:
        # an atomic step's writes go to the Django database the settings name, as with the
        # PostgreSQL driver; its record is put just before that transaction commits
        return conf.get().database

    def alias(self, job_id: UUID) -> str:
        return self.using

    def now(self) -> datetime:
        return self.state.clock.now()  # the driver's one clock, as the database has one

    def list(self, run_id: UUID) -> list[StepRecord]:
        with self.state._lock:
            records = list(self.state._steps.get(run_id, {}).values())
        for r in records:  # SPEC DB-05: as the PostgreSQL store refuses them
            known_status(r.run_id, r.name, r.status)
        # stable: ties keep write order, like the database's tie-break on id
        return sorted(records, key=lambda r: (r.position is None, r.position or 0, r.started_at))

    def put(self, record: StepRecord, *, job_id: UUID, lease_token: UUID) -> bool:
        with self.state._lock:
            if self.state._held(job_id, lease_token) is None:
                return False  # the write fence (SPEC STEP-17, DESIGN Q-01)
            now = self.now()
            run = self.state._steps.setdefault(record.run_id, {})
            existing = run.get(record.name)
            completed_at = (record.completed_at or now) if record.status == "completed" else None
            started_at = record.started_at or now - timedelta(seconds=record.ran_for or 0)
            record = replace(record, started_at=started_at, completed_at=completed_at, ran_for=None)
            if existing is not None:  # the upsert keeps the first start, position, event, key
                record = replace(  # and what a publish releases the step by (SPEC EVT-06)
                    record,
                    started_at=existing.started_at,
                    event=existing.event,
                    correlation_key=existing.correlation_key,
                    match=record.match if existing.match is None else existing.match,
                    any_tenant=existing.any_tenant,
                    position=existing.position
                    if existing.position is not None
                    else record.position,
                )
            run[record.name] = replace(
                record, output=_copy(record.output), match=_copy(record.match)
            )
            return True

    def shift(self, seconds: float) -> None:
        """Test support: make every step time ``seconds`` earlier (as waiting would)."""
        with self.state._lock:
            for run in self.state._steps.values():
                for name, record in run.items():
                    run[name] = replace(
                        record,
                        started_at=_earlier(record.started_at, seconds),
                        completed_at=_earlier(record.completed_at, seconds),
                        wake_at=_earlier(record.wake_at, seconds),
                    )


class MemoryEventStore:
    """Handed the state, and the job store's ``cancel`` (what ``cancel`` applies to each run)."""

    def __init__(self, state: MemoryState, cancel_job: Callable[[UUID, str], object]) -> None:
        self.state = state
        self._cancel_job = cancel_job
        self._events: deque[EventRecord] = deque(maxlen=MAX_EVENTS)

    def publish(
        self,
        *,
        id: UUID,
        name: str,
        payload: object,
        correlation_key: str | None,
        ttl: float,
        tenant_id: str | None = None,
        started: int = 0,
        cancelled: int = 0,
        refused: Sequence[Mapping[str, str]] = (),
    ) -> EventRecord:
        with self.state._lock:
            self.purge()
            now = self.state.clock.now()
            expires = now + timedelta(seconds=ttl)
            event = EventRecord(id, name, _copy(payload), correlation_key, now, expires, tenant_id)
            # the waiters are matched on the data as given; what is kept is sealed under
            # ENCRYPTION_KEYS, as publish_event's row is (SPEC CRYPT-08)
            woken, released = self._release(event)
            event = replace(
                event,
                payload=crypt.seal_value(event.payload),
                released=released,
                started=started,
                cancelled=cancelled,
                refused=tuple(_copy(list(refused))),
            )
            self._events.append(event)
        for queue in woken:  # as the statement's NOTIFY: the workers of each queue, once
            for sub in [s for s in self.state._subscriptions if queue in s.queues]:
                sub.callback()
        return replace(event, payload=_copy(payload))

    def cancel(
        self, name: str, *, tenant_id: str | None, match: Mapping[str, object], reason: str
    ) -> tuple[int, list[UUID]]:
        """As steps.sql's ``cancel_on_event``: each live run of ``name`` and ``tenant_id`` whose
        input has every field of ``match`` equal, cancelled as the job store cancels one; how
        many, and those that were parked or running (SPEC CANCEL-07)."""
        with self.state._lock:
            found = sorted(
                row.id
                for row in self.state._rows.values()
                if row.name == name
                and row.tenant_id == tenant_id
                and row.state in ("ready", "delayed", "running", "suspended")
                and isinstance(row.input, dict)
                and all(k in row.input and _json_equal(row.input[k], v) for k, v in match.items())
            )
            parked = [i for i in found if self.state._rows[i].state in ("suspended", "running")]
            for job_id in found:
                self._cancel_job(job_id, reason)
        return len(found), parked

    def _release(self, event: EventRecord) -> tuple[list[str], int]:
        """As ``publish_event``'s ``released`` (steps.sql): every run parked on a step this event
        answers is due now (SPEC EVT-06); a running one that wrote it counts as released (its
        park finds the event: ``answered``). The queues to wake, and how many were released."""
        waiting = {
            r.run_id: r for r in self.state._rows.values() if r.state in ("suspended", "running")
        }
        released: list[JobSnapshot] = []
        for run_id, row in waiting.items():
            for step in self.state._steps.get(run_id, {}).values():
                if _answers(event, step, row.tenant_id):
                    released.append(row)
                    break
        parked = sorted((r for r in released if r.state == "suspended"), key=lambda r: r.id)
        for row in parked:
            self.state._rows[row.id] = replace(
                row, state="ready", run_at=event.published_at, updated_at=event.published_at
            )
        return list(dict.fromkeys(r.queue for r in parked)), len(released)

    def answered(self, run_id: UUID, tenant_id: str | None) -> bool:
        """Whether a live event answers a waiting step of ``run_id``: as jobs.sql's suspend,
        its park is then due now (SPEC EVT-06). Called under the driver's lock."""
        steps = self.state._steps.get(run_id, {}).values()
        now = self.state.clock.now()
        return any(
            e.expires_at > now and _answers(e, step, tenant_id)
            for step in steps
            if step.status == "waiting"
            for e in self._events
        )

    def find(
        self,
        name: str,
        *,
        after: datetime,
        correlation_key: str | None = None,
        match: Mapping[str, object] | None = None,
        tenant_id: str | None = None,
        any_tenant: bool = False,
    ) -> EventRecord | None:
        with self.state._lock:
            now = self.state.clock.now()
            hits = [
                e
                for e in self._events
                if e.name == name
                and e.expires_at > now
                and e.published_at >= after
                and (correlation_key is None or e.correlation_key == correlation_key)
                and (any_tenant or e.tenant_id == tenant_id)
            ]
        hits.sort(key=lambda e: (e.published_at, e.id))
        for e in hits:
            found = opened(e, match)
            if found is not None:
                return found
        return None

    def purge(self) -> int:
        with self.state._lock:
            now = self.state.clock.now()
            live = [e for e in self._events if e.expires_at > now]
            purged = len(self._events) - len(live)
            self._events = deque(live, maxlen=MAX_EVENTS)
        return purged

    def recent(
        self,
        *,
        name: str | None = None,
        tenant_id: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
    ) -> list[EventRecord]:
        with self.state._lock:
            now = self.state.clock.now()
            hits = [
                e
                for e in self._events
                if e.expires_at > now
                and (name is None or e.name == name)
                and (tenant_id is None or e.tenant_id == tenant_id)
                and (since is None or e.published_at >= since)
            ]
        hits.sort(key=lambda e: (e.published_at, e.id), reverse=True)
        # as recent_events reads them: what each publish did, not its payload
        return [replace(e, payload=None, refused=_refusals(e)) for e in hits[:limit]]

    def get(self, event_id: UUID) -> EventRecord | None:
        with self.state._lock:
            now = self.state.clock.now()
            found = next((e for e in self._events if e.id == event_id), None)
        if found is None or found.expires_at <= now:
            return None
        return replace(found, payload=_copy(found.payload), refused=_refusals(found))

    def shift(self, seconds: float) -> None:
        """Test support: make every event's times ``seconds`` earlier (as waiting would)."""
        delta = timedelta(seconds=seconds)
        with self.state._lock:
            self._events = deque(
                (
                    replace(e, published_at=e.published_at - delta, expires_at=e.expires_at - delta)
                    for e in self._events
                ),
                maxlen=MAX_EVENTS,
            )


def _answers(event: EventRecord, step: StepRecord, tenant_id: str | None) -> bool:
    """Whether ``event`` is one the waiting ``step`` of a run of ``tenant_id`` would find: the
    rule of ``find`` seen from the step's side."""
    return (
        step.status == "waiting"
        and step.event == event.name
        and step.started_at is not None
        and step.started_at <= event.published_at
        and (step.correlation_key is None or step.correlation_key == event.correlation_key)
        and (step.any_tenant or event.tenant_id == tenant_id)
        and event_matches(event.payload, step.match)
    )


def _refusals(event: EventRecord) -> tuple[dict[str, str], ...]:
    """An event's refusals as a copy the caller may keep: the store's stay its own."""
    return tuple(dict(r) for r in event.refused)


def _earlier(when: datetime | None, seconds: float) -> datetime | None:
    return None if when is None else when - timedelta(seconds=seconds)


def opened(event: EventRecord, match: Mapping[str, object] | None) -> EventRecord | None:
    """``event`` with its data opened when a waiter with ``match`` takes it, else None: as
    steps.sql's find_event and the PostgreSQL store's look at an encrypted candidate (SPEC
    CRYPT-09). Sealed data is opened to be matched only while keys are set (without them the
    database's ``@>`` cannot match it either); one no key opens raises
    ``EncryptionKeyMissingError``, which fails the attempt, as a step output no key opens does."""
    if not crypt.is_sealed(event.payload):
        return (
            replace(event, payload=_copy(event.payload))
            if event_matches(event.payload, match)
            else None
        )
    if match and conf.get().encryption is None:
        return None
    value = crypt.unseal(event.payload)
    return replace(event, payload=value) if event_matches(value, match) else None


def _same(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _json_equal(a: object, b: object) -> bool:
    """Equal as two jsonb values are: numbers by value, a bool only to a bool, lists and
    objects member by member."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return False
    return _same(a, b)


def _copy(value: object) -> Any:
    return json.loads(json.dumps(value))
