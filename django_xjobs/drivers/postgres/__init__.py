"""The PostgreSQL driver: the hot path runs the named statements of ``jobs.sql``."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.db import (
    IntegrityError,
    connections,
    transaction,
)

from ... import history
from ...errors import DriverUnavailableError
from ...ids import uuid7, uuid7_many
from ...limits.claims import ClaimLimits
from ...limits.keys import key_of, keyless
from ...payload import NotJSON, decode, dumps
from ...rollup import BOUNDS as ROLLUP_BOUNDS
from .. import failures, rules
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
    SuspendUntil,
    WorkerSnapshot,
    claimed_input,
)
from ..rules import (
    cancel_refusal,
    check_after,
    check_claim_args,
    known_state,
    live_duplicate,
    not_found,
    refuse_row_by_row,
    requeue_refusal,
    requeue_states,
    row_by_row,
    run_now_refusal,
    too_many_dependants,
    unknown_dependency,
    unknown_step,
)
from . import limits as postgres_limits
from . import sql
from . import standing as postgres_standing
from .backfills import PostgresBackfillLedger
from .batches import PostgresBatchStore
from .depth import PostgresDepthStore
from .leases import PostgresLeaseStore
from .listener import Listener, Polling, listen_alias
from .params import request_columns, shared_columns
from .rollup import PostgresRollupStore
from .steps import PostgresEventStore, PostgresStepStore

if TYPE_CHECKING:
    from ..contract import OutboxStore, SchedulerStore

STATEMENTS = sql.load(Path(__file__).with_name("jobs.sql"))
CHANNEL = "xjobs"
#: pause and resume are told here, apart from the wake-ups: a worker re-reads its paused set
#: only when an operator changed it, never on a job's notification
CONTROL_CHANNEL = "xjobs_control"
CONTROLS = sql.load(Path(__file__).with_name("controls.sql"))
_LAPSED_JSON = history.LAPSED.to_json()
_LAPSED_PRESENT_JSON = history.LAPSED_PRESENT.to_json()
_EXITED_JSON = history.EXITED.to_json()
_BOUNDS = list(ROLLUP_BOUNDS)
#: a claimed row's creation time arrives as microseconds since this instant (claimed_columns)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: limit keys' rows deleted per transaction by prune_limit_keys: a claim waits on none for long
_PRUNE_KEYS_BATCH = 1000


def _history(failure: history.Failure | None) -> dict[str, Any]:
    return {"failure": None if failure is None else failure.to_json(), "keep": history.KEEP}


class PostgresDriver:
    """Jobs in the ``x_jobs`` table of the database alias ``using``.

    Each thread uses its own Django connection for that alias, in autocommit unless the
    caller opened a transaction (an enqueue inside ``atomic()`` joins it).
    """

    name = "postgres"
    #: a child process reaches the same database under the same settings
    supports_child_runs = True

    def __init__(self, using: str = "default") -> None:
        self.using = using
        self.database: str | None = using
        self.steps = PostgresStepStore(using)
        self.leases = PostgresLeaseStore(using)
        self.events = PostgresEventStore(using)
        self.backfills = PostgresBackfillLedger(using)
        self.rollups = PostgresRollupStore(using)
        self.depths = PostgresDepthStore(using)
        self.batches = PostgresBatchStore(using)
        #: per queue, the last limit key this driver's limited claim took: the next walks on
        #: from it (limits.sql's limit_keys), so every key with work waiting gets its turn
        self._limit_cursor: dict[str, str] = {}

    # --- the hot path -----------------------------------------------------------------------

    def enqueue(self, request: EnqueueRequest) -> EnqueueResult:
        if request.after is not None:  # its own statement: the plain enqueue stays as it was
            return self._enqueue_after(request)
        params = _row_params(request, request.id or uuid7())
        # A live row can settle between the suppressed insert and the lookup; one more insert
        # then succeeds. Twice empty-handed means the unique index is missing (SPEC ENQ-11).
        for _ in range(2):
            # replace first: in a debounced burst the key is held nearly every time
            if request.replace and (took := self._run("replace_waiting", params)):
                return EnqueueResult(id=took[0][0], run_id=took[0][1], deduped=True, replaced=True)
            rows = self._run("enqueue", params)
            if rows:
                return EnqueueResult(id=rows[0][0], run_id=rows[0][1])
            if request.id is not None and (same := self._run("find_published", params)):
                return EnqueueResult(id=same[0][0], run_id=same[0][1])
            live = self._run("find_live", params)
            if live:
                return EnqueueResult(id=live[0][0], run_id=live[0][1], deduped=True)
        raise failures.live_key_lost(request.name)

    def _enqueue_after(self, request: EnqueueRequest) -> EnqueueResult:
        """A job with dependencies (issue 32): registered with them in one statement, which
        says which id it does not know; as enqueue, a suppressed insert returns the live row."""
        job_id = request.id or uuid7()
        after = check_after(job_id, request.after or ())
        params = {
            **_row_params(request, job_id),
            "after": list(after),
            "run_anyway": request.run_anyway,
            # a staged enqueue was accepted at its commit: at its publish nothing is refused
            "strict": request.id is None,
            "max_dependants": rules.MAX_DEPENDANTS,
        }
        for _ in range(2):
            rows = self._run("enqueue_after", params)
            inserted, unknown, full = rows[0][0], rows[0][3], rows[0][4]
            if inserted is not None:
                return EnqueueResult(id=inserted, run_id=rows[0][1])
            if unknown is not None and params["strict"]:
                raise unknown_dependency(request.name, unknown)
            if request.id is not None and (same := self._run("find_published", params)):
                return EnqueueResult(id=same[0][0], run_id=same[0][1])
            if full is not None:  # before a live holder, as the memory driver decides
                raise too_many_dependants(request.name, full)
            live = self._run("find_live", params)
            if live:
                return EnqueueResult(id=live[0][0], run_id=live[0][1], deduped=True)
        raise failures.live_key_lost(request.name)

    def enqueue_many(self, requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
        # one row: the single statement, planned for exactly that; a replace decides row by row
        if len(requests) <= 1 or row_by_row(requests):
            return [self.enqueue(request) for request in requests]
        ids = _ids_for(requests)
        results: list[EnqueueResult | None] = [None] * len(requests)
        pending = self._insert_many(requests, ids, results, list(range(len(requests))))
        return self._resolve(requests, ids, results, pending)

    def enqueue_chunks(self, chunks: Iterable[Sequence[EnqueueRequest]]) -> list[EnqueueResult]:
        # Each chunk's insert goes on the wire as soon as it is made, and the server inserts it
        # while the caller makes the next (bench/README.md: the server's share of a bulk insert
        # is about half its time). One transaction, so a chunk that fails to be made (a bad
        # input) takes the chunks before it back with it.
        if not sql.pipelines(self.using):
            return self.enqueue_many([request for chunk in chunks for request in chunk])
        requests: list[EnqueueRequest] = []
        ids: list[UUID] = []
        sent = []
        with transaction.atomic(self.using):
            with sql.pipeline(self.using) as send:
                for chunk in chunks:
                    if not chunk:
                        continue
                    refuse_row_by_row(chunk)
                    chunk_ids = _ids_for(chunk)
                    statement, params = _many_params(chunk, chunk_ids)
                    rows = send(STATEMENTS[statement], params)
                    sent.append((len(requests), len(chunk), params["run_ids"], rows))
                    requests.extend(chunk)
                    ids.extend(chunk_ids)
            results: list[EnqueueResult | None] = [None] * len(requests)
            pending: list[int] = []
            for start, size, run_ids, rows in sent:
                [(count, went_in)] = rows()
                indexes = list(range(start, start + size))
                pending += _went_in(results, indexes, ids, run_ids, count, went_in)
            return self._resolve(requests, ids, results, pending)

    def _insert_many(
        self,
        requests: Sequence[EnqueueRequest],
        ids: list[UUID],
        results: list[EnqueueResult | None],
        pending: list[int],
    ) -> list[int]:
        """Insert the ``pending`` requests in one statement; the indexes still unanswered."""
        statement, params = _many_params([requests[i] for i in pending], [ids[i] for i in pending])
        [(count, went_in)] = self._run(statement, params)
        return _went_in(results, pending, ids, params["run_ids"], count, went_in)

    def _resolve(
        self,
        requests: Sequence[EnqueueRequest],
        ids: list[UUID],
        results: list[EnqueueResult | None],
        pending: list[int],
    ) -> list[EnqueueResult]:
        """Answer the requests whose insert was suppressed: a staged one already published
        under its id, else the live row holding its key."""
        for attempt in range(2):
            # As in enqueue: a live row can settle between the suppressed insert and the
            # lookup, so the rows still unanswered are inserted once more (SPEC ENQ-11).
            if attempt:
                pending = self._insert_many(requests, ids, results, pending)
            staged = [i for i in pending if requests[i].id is not None]
            if staged:
                found = dict(self._run("find_published_many", {"ids": [ids[i] for i in staged]}))
                pending = [i for i in pending if not _answer(results, i, ids[i], found)]
            if not pending:
                break
            live = self._run(
                "find_live_many",
                {
                    "names": [requests[i].name for i in pending],
                    "tenants": [requests[i].tenant_id for i in pending],
                    "keys": [requests[i].idempotency_key for i in pending],
                },
            )
            for n, job_id, run_id in live:
                results[pending[n - 1]] = EnqueueResult(id=job_id, run_id=run_id, deduped=True)
            pending = [i for i in pending if results[i] is None]
            if not pending:
                break
        if pending:
            raise failures.live_key_lost(requests[pending[0]].name)
        return [result for result in results if result is not None]

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
        if limits is not None:  # declared limits: decided in their own statements
            args = (queues, limit, visibility_timeout, worker_id, lapsed)
            return [_claimed(r) for r in self._claim_limited(*args, limits)]
        params: dict[str, Any] = {
            "queues": list(queues),
            "limit": limit,
            "worker_id": worker_id,
            "visibility_timeout": visibility_timeout,
        }
        if lapsed:
            params.update(
                lapsed=_LAPSED_JSON,
                lapsed_present=_LAPSED_PRESENT_JSON,
                exited=_EXITED_JSON,
                keep=history.KEEP,
            )
        rows = self._run("claim_lapsed" if lapsed else "claim", params)
        # already in claim order: the statement sorts
        return [_claimed(r) for r in rows]

    def _claim_limited(
        self,
        queues: Sequence[str],
        limit: int,
        visibility_timeout: float,
        worker_id: str,
        lapsed: bool,
        limits: ClaimLimits,
    ) -> list[tuple[Any, ...]]:
        return postgres_limits.claim(
            self.using,
            queues=queues,
            limit=limit,
            visibility_timeout=visibility_timeout,
            worker_id=worker_id,
            lapsed=lapsed,
            limits=limits,
            cursor=self._limit_cursor,
        )

    def ack(self, completes: Sequence[Complete]) -> set[UUID]:
        if not completes:
            return set()
        rows = self._run(
            "ack",
            {
                "ids": [c.job_id for c in completes],
                "tokens": [c.lease_token for c in completes],
                "results": [c.result_json for c in completes],
                "bounds": _BOUNDS,
            },
        )
        return {r[0] for r in rows}

    def retry(self, retry: RetryAt) -> bool:
        params = {
            "delay": max(0.0, retry.delay),
            "counts_as_attempt": retry.counts_as_attempt,
            "error": retry.error,
            "stop_reason": retry.stop_reason,
            "crashed": retry.crashed,
            "keep_place": retry.keep_place,
            # a hand-back that spends no attempt is no end of a run: not counted
            "outcome": "retried" if retry.counts_as_attempt else None,
            "bounds": _BOUNDS,
            **_history(retry.failure),
        }
        return self._fenced("retry", retry, params)

    def suspend(self, suspend: SuspendUntil) -> bool:
        if suspend.children:  # a call step: its own statement, the plain one as it was
            params = {
                "delay": max(0.0, suspend.delay),
                "error": suspend.error,
                "children": sorted(suspend.children),
            }
            return self._fenced("suspend_children", suspend, params)
        params = {
            "delay": max(0.0, suspend.delay),
            "error": suspend.error,
            "snoozed": suspend.snoozed,
            **_history(suspend.failure),
        }
        return self._fenced("suspend", suspend, params)

    def shed(self, shed: Shed) -> bool:
        return self._fenced(
            "shed", shed, {"delay": max(0.0, shed.delay), "keep_place": shed.keep_place}
        )

    def finish(self, finish: Finish) -> bool:
        params = {
            "state": finish.state,
            "error": finish.error,
            "stop_reason": finish.stop_reason,
            "bounds": _BOUNDS,
            **_history(finish.failure),
        }
        return self._fenced("finish", finish, params)

    def _fenced(self, statement: str, value: Settle, params: dict[str, Any]) -> bool:
        fence = {"id": value.job_id, "lease_token": value.lease_token}
        return self._count(statement, {**fence, **params}) == 1

    def progress(self, job_id: UUID, lease_token: UUID, progress: dict[str, Any]) -> bool:
        params = {"id": job_id, "lease_token": lease_token, "progress": dumps(progress)}
        return self._count("progress", params) == 1

    def heartbeat(self, job_id: UUID, lease_token: UUID, visibility_timeout: float) -> bool:
        params = {
            "id": job_id,
            "lease_token": lease_token,
            "visibility_timeout": visibility_timeout,
        }
        return self._count("heartbeat", params) == 1

    def renew_presence(self, presence: Presence, ttl: float) -> None:
        params = {
            "id": presence.worker_id,
            "host": presence.host,
            "pid": presence.pid,
            "queues": json.dumps(list(presence.queues)),
            "in_flight": presence.in_flight,
            "ttl": ttl,
        }
        self._count("renew_presence", params)

    def release_presence(self, worker_id: str) -> None:
        self._count("release_presence", {"id": worker_id})

    def stop_presence(self, worker_id: str) -> None:
        self._count("stop_presence", {"id": worker_id})

    def workers(self) -> list[WorkerSnapshot]:
        return [
            WorkerSnapshot(
                id=r[0],
                host=r[1],
                pid=r[2],
                queues=tuple(_json(r[3])),
                started_at=r[4],
                last_seen=r[5],
                expires_at=r[6],
                in_flight=r[7],
                alive=r[8],
                stopped_at=r[9],
            )
            for r in self._run("workers", {})
        ]

    def stats(self) -> list[QueueStats]:
        return [
            QueueStats(
                queue=r[0],
                ready=r[1],
                delayed=r[2],
                running=r[3],
                suspended=r[4],
                dead=r[5],
                oldest_ready_seconds=float(r[6]),
            )
            for r in self._run("stats", {})
        ]

    # --- reads (ORM) ------------------------------------------------------------------------

    def get_job(self, job_id: UUID) -> JobSnapshot | None:
        from ...models import Job

        row = Job.objects.using(self.using).filter(pk=job_id).first()
        return None if row is None else snapshot(row)

    def list_jobs(
        self,
        *,
        queue: str | None = None,
        name: str | None = None,
        state: str | None = None,
        limit: int = 100,
    ) -> list[JobSnapshot]:
        from ...models import Job

        rows = Job.objects.using(self.using).all()
        for field, value in (("queue", queue), ("name", name)):
            if value is not None:
                rows = rows.filter(**{field: value})
        if state is not None:
            from ...models import state_filter  # the app registry is ready by the first read

            rows = rows.filter(state_filter(state))
        return [snapshot(r) for r in rows.order_by("-created_at", "-id")[:limit]]

    def job_ids_between(self, low: UUID, high: UUID, *, limit: int) -> list[UUID]:
        from ...models import Job

        rows = Job.objects.using(self.using).filter(id__gte=low, id__lte=high).order_by("id")
        return list(rows.values_list("id", flat=True)[:limit])

    def dead_letters(self, *, limit: int = 100) -> list[JobSnapshot]:
        from ...models import Job

        rows = Job.objects.using(self.using).filter(state="dead").order_by("-updated_at", "-id")
        return [snapshot(r) for r in rows[:limit]]

    def standing(self, job_id: UUID, *, cap: int, fair: bool = False) -> Standing | None:
        return postgres_standing.standing(self.using, job_id, cap=cap, fair=fair)

    def job_states(self, ids: Sequence[UUID]) -> dict[UUID, str]:
        return postgres_standing.job_states(self.using, ids)

    # --- operator actions (SPEC CANCEL-02..06, INSP-06, DESIGN) ---------------

    def cancel(self, job_id: UUID, reason: str | None) -> JobSnapshot:
        # The fenced UPDATE decides; a row that went live again between it and the read of
        # its state (a concurrent requeue) is tried again.
        for _ in range(3):
            rows = self._snapshots("cancel", {"id": job_id, "reason": reason})
            if rows:
                return rows[0]
            row = self.get_job(job_id)
            if row is None:
                raise not_found(job_id)
            refusal = cancel_refusal(job_id, row.state)
            if refusal is not None:
                raise refusal
            if row.state == "cancelled":
                return row  # DESIGN Q-09: a no-op, the first reason stays
        raise DriverUnavailableError(f"job {job_id} kept changing state while being cancelled")

    def run_now(self, job_id: UUID) -> JobSnapshot:
        with transaction.atomic(using=self.using):  # the NOTIFY goes out with the commit
            moved = self._run("run_now", {"id": job_id})
        row = self.get_job(job_id)
        if row is None:
            raise not_found(job_id)
        refusal = None if moved else run_now_refusal(job_id, row.state)
        if refusal is not None:
            raise refusal
        return row

    def requeue(self, job_id: UUID, *, from_step: str | None, force: bool) -> JobSnapshot:
        params = {"id": job_id, "states": requeue_states(force)}
        try:
            # One transaction: the state change and the step deletion land together or not at
            # all, and the wake-up is only sent on commit.
            with transaction.atomic(using=self.using):
                rows = self._snapshots("requeue", params)
                if not rows:
                    row = self.get_job(job_id)
                    if row is None:
                        raise not_found(job_id)
                    raise requeue_refusal(job_id, row.state, force) or DriverUnavailableError(
                        f"job {job_id} changed state while being retried", hint="try again"
                    )
                if from_step is not None:
                    run_id = rows[0].run_id
                    step = {"run_id": run_id, "step": from_step}
                    if not self._run("requeue_from_step", step):
                        names = [r.name for r in self.steps.list(run_id)]
                        raise unknown_step(job_id, from_step, names)  # rolls the requeue back
        except IntegrityError as error:
            if failures.constraint(error) != "x_jobs_name_tenant_idempotency_live_idx":
                raise
            row = self.get_job(job_id)
            live = []
            if row is not None:
                key = {
                    "name": row.name,
                    "tenant_id": row.tenant_id,
                    "idempotency_key": row.idempotency_key,
                }
                live = self._run("find_live", key)
            raise live_duplicate(job_id, live[0][0] if live else None) from error
        return rows[0]

    # --- wake-ups ---------------------------------------------------------------------------

    def prune(
        self, *, older_than: float, states: Sequence[str], dry_run: bool = False
    ) -> dict[str, int]:
        params: dict[str, Any] = {"states": list(states), "older_than": older_than, "batch": 1000}
        counts = dict.fromkeys(states, 0)
        if dry_run:
            counts.update(dict(self._run("prune_count", params)))
            return counts
        params["after"] = "-infinity"  # then where the last batch stopped (jobs.sql)
        while True:  # one short transaction per batch: no lock is held for long
            with transaction.atomic(using=self.using):
                gone = self._run("prune", params)
            for state, _ in gone:
                counts[state] += 1
            if len(gone) < params["batch"]:
                return counts
            params["after"] = max(updated_at for _, updated_at in gone)

    def notify_on_ready(
        self,
        queues: Iterable[str],
        callback: Callable[[], None],
        on_control: Callable[[], None] | None = None,
    ) -> Listener | Polling:
        alias = listen_alias(self.using, CHANNEL)  # behind a transaction pooler: maybe none
        if alias is None:
            return Polling()
        controls = None if on_control is None else (CONTROL_CHANNEL, on_control)
        listener = Listener(alias, CHANNEL, callback, set(queues), controls=controls)
        listener.start()
        return listener

    def pause_queue(self, queue: str, by: str | None) -> QueueState:
        with transaction.atomic(using=self.using):  # the NOTIFY goes out with the commit
            row = sql.fetch(self.using, CONTROLS["pause_queue"], {"queue": queue, "by": by})[0]
        return QueueState(row[0], True, row[1], row[2])

    def resume_queue(self, queue: str) -> QueueState:
        with transaction.atomic(using=self.using):
            row = sql.fetch(self.using, CONTROLS["resume_queue"], {"queue": queue})[0]
        return QueueState(row[0], False)

    def queue_controls(self) -> list[QueueState]:
        rows = sql.fetch(self.using, CONTROLS["queue_controls"], {})
        return [QueueState(r[0], r[1] is not None, r[1], r[2], *r[3:4]) for r in rows]

    def set_queue_limit(self, queue: str, concurrency: int | None) -> QueueState:
        return postgres_limits.set_queue_limit(self.using, queue, concurrency)

    def queue_limits(self) -> dict[str, int]:
        return postgres_limits.queue_limits(self.using)

    def pause_key(self, key: str, delay: float) -> None:
        postgres_limits.pause_key(self.using, key, delay)

    def key_usage(self, limit: int = 500) -> list[tuple[str, Any, int, list[Any]]]:
        return postgres_limits.usage(self.using, limit)

    def prune_limit_keys(self, windows: Mapping[str, float], idle_for: float) -> int:
        return postgres_limits.prune_keys(self.using, windows, idle_for, _PRUNE_KEYS_BATCH)

    def paused_queues(self) -> frozenset[str]:
        return frozenset(r[0] for r in sql.fetch(self.using, CONTROLS["paused_queues"], {}))

    def scheduler_store(self) -> SchedulerStore:
        from .scheduler import PostgresSchedulerStore

        return PostgresSchedulerStore(self.using)

    def preflight(self, alias: str, table: str = "x_jobs") -> None:
        from .preflight import preflight

        preflight(alias, table)

    def age(self, seconds: float, *, only: Collection[str] = AGED) -> None:
        params = {"d": timedelta(seconds=seconds)}
        with transaction.atomic(using=self.using):
            for family in sorted(only):
                self._count(f"age_{family}", params)
            if "jobs" in only:  # the rollup's minutes, in two steps (jobs.sql age_rollup_away)
                self._count("age_rollup_away", params)
                self._count("age_rollup_back", {})
                self.depths.shift(params["d"])

    def event_store(self, alias: str) -> EventStore:
        return self.events if alias == self.using else PostgresEventStore(alias)

    def outbox_store(self, alias: str, claim_lease: Any = None) -> OutboxStore:
        from .outbox import PostgresOutboxStore

        return PostgresOutboxStore(alias, claim_lease=claim_lease)

    def close(self) -> None:
        connections[self.using].close()

    # --- plumbing ---------------------------------------------------------------------------

    def _run(self, statement: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        return sql.fetch(self.using, STATEMENTS[statement], params)

    def _snapshots(self, statement: str, params: dict[str, Any]) -> list[JobSnapshot]:
        with sql.execute(self.using, STATEMENTS[statement], params) as cursor:
            names = [column.name for column in cursor.description]
            rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
        for row in rows:
            row["input"], row["result"] = _json(row["input"]), _json(row["result"])
            row["errors"] = _json(row["errors"])
            row["progress"] = _json(row["progress"])
        return [snapshot(SimpleNamespace(**row)) for row in rows]

    def _count(self, statement: str, params: dict[str, Any]) -> int:
        return sql.count(self.using, STATEMENTS[statement], params)


def _row_params(request: EnqueueRequest, job_id: UUID) -> dict[str, Any]:
    """The parameters of one enqueued row, as ``enqueue`` and ``enqueue_after`` insert it."""
    return {
        "id": job_id,
        "run_id": uuid7(),
        "name": request.name,
        "queue": request.queue,
        "input": request.input_json,
        "idempotency_key": request.idempotency_key,
        "max_attempts": request.max_attempts,
        "priority": request.priority,
        "run_at": request.run_at,
        "delay": request.delay or 0.0,
        "tenant_id": request.tenant_id,
        "enqueued_by": request.enqueued_by,
        "traceparent": request.traceparent,
        "expires_at": request.expires_at,
        "expires_in": request.expires_in,
        "limit_key": key_of(request.name, request.input, request.tenant_id),
    }


def _many_params(requests: Sequence[EnqueueRequest], ids: list[UUID]) -> tuple[str, dict[str, Any]]:
    """The statement for ``requests`` and its parameters: what varies by row as one array per
    column in request order; the per-call columns once when the whole batch shares them (the
    arrays of the same value cost more to send and unpack than the insert of their rows)."""
    keys = {"ids": ids, "run_ids": uuid7_many(len(ids))}
    # no run of the batch has a limit key: null, which unnest pads, instead of an array of nulls
    limit_keys: list[str | None] | None = None
    if not all(keyless(name) for name in {r.name for r in requests}):
        limit_keys = [key_of(r.name, r.input, r.tenant_id) for r in requests]
        if not any(limit_keys):
            limit_keys = None
    shared = shared_columns(requests)
    if shared is None:
        return "enqueue_many", {**keys, **request_columns(requests), "limit_keys": limit_keys}
    by_row = {
        "keys": [r.idempotency_key for r in requests],
        "limit_keys": limit_keys,
        "inputs": "[" + ",".join(r.input_json for r in requests) + "]",
    }
    return "enqueue_many_shared", {**keys, **by_row, **shared}


def _ids_for(requests: Sequence[EnqueueRequest]) -> list[UUID]:
    """Each request's job id: its own when staged, else a new one."""
    fresh = iter(uuid7_many(sum(request.id is None for request in requests)))
    return [request.id or next(fresh) for request in requests]


def _went_in(
    results: list[EnqueueResult | None],
    indexes: list[int],
    ids: list[UUID],
    run_ids: list[UUID],
    count: int,
    went_in: list[UUID] | None,
) -> list[int]:
    """Answer the ``indexes`` one insert statement put in (``count`` rows; when not all, the
    ids of those that went in, ``went_in``); the indexes it did not."""
    if count == len(indexes):  # every row went in: nothing to look up
        for i, run_id in zip(indexes, run_ids, strict=True):
            results[i] = EnqueueResult(id=ids[i], run_id=run_id)
        return []
    inserted = dict(zip([ids[i] for i in indexes], run_ids, strict=True))
    inserted = {job_id: inserted[job_id] for job_id in went_in or ()}
    return [i for i in indexes if not _answer(results, i, ids[i], inserted)]


def _answer(
    results: list[EnqueueResult | None], index: int, job_id: UUID, run_ids: dict[UUID, UUID]
) -> bool:
    """Fill ``results[index]`` when ``job_id`` is among the rows found; whether it was."""
    run_id = run_ids.get(job_id)
    if run_id is None:
        return False
    results[index] = EnqueueResult(id=job_id, run_id=run_id)
    return True


def snapshot(row: Any) -> JobSnapshot:
    return JobSnapshot(
        id=row.id,
        name=row.name,
        queue=row.queue,
        state=known_state(row.id, row.state),  # SPEC DB-05: refused, never cast
        input=row.input,
        idempotency_key=row.idempotency_key,
        run_id=row.run_id,
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        priority=row.priority,
        run_at=row.run_at,
        visible_at=row.visible_at,
        claimed_by=row.claimed_by,
        lease_token=row.lease_token,
        last_error=row.last_error,
        stop_reason=row.stop_reason,
        result=row.result,
        tenant_id=row.tenant_id,
        enqueued_by=row.enqueued_by,
        traceparent=row.traceparent,
        created_at=row.created_at,
        updated_at=row.updated_at,
        lease_expiries=row.lease_expiries,
        errors=tuple(history.FailedAttempt.from_json(e) for e in row.errors),
        lapsed_holder=getattr(row, "lapsed_holder", None),  # a settle's RETURNING has none
        started_at=row.started_at,
        last_attempted_at=row.last_attempted_at,
        attempted_by=row.attempted_by,
        expires_at=row.expires_at,
        snoozes=row.snoozes,
        progress=_json(row.progress),
        batch_id=getattr(row, "batch_id", None),
        after=_ids(getattr(row, "after", None)),
        waiting_on=getattr(row, "waiting_on", None),
        after_failed=getattr(row, "after_failed", None),
        run_anyway=bool(getattr(row, "run_anyway", False)),
        dependants=_ids(getattr(row, "dependants", None)),
    )


def _ids(value: Any) -> tuple[UUID, ...] | None:
    return None if value is None else tuple(value)


def _claimed(r: tuple[Any, ...]) -> ClaimedJob:
    """One row of ``claim`` as a run; its input decoded here, on its own (``claimed_input``)."""
    inputs, undecodable = claimed_input(r[4])
    return ClaimedJob(
        id=r[0],
        run_id=r[1],
        name=r[2],
        queue=r[3],
        input=inputs,
        attempt=r[5],
        max_attempts=r[6],
        lease_token=r[7],
        priority=r[8],
        tenant_id=r[9],
        enqueued_by=r[10],
        idempotency_key=r[11],
        created_at=_EPOCH + timedelta(microseconds=r[12]),  # the claim sends microseconds
        lease_expiries=r[13],
        traceparent=r[14],
        undecodable=undecodable,
        expired=bool(r[15]),
        snoozes=r[16],
        died_with=r[17],
        waited=float(r[18]),
    )


def _json(value: Any) -> Any:
    if not isinstance(value, str | bytes):
        return value
    try:
        return decode(value)
    except NotJSON as error:  # a row too deep to read is still shown, as the admin shows it
        return {"(undecodable)": error.reason}
