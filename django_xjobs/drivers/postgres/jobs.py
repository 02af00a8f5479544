"""The PostgreSQL driver's verbs on jobs: enqueue, the operator's actions and pruning."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.db import (
    IntegrityError,
    transaction,
)

from ...errors import DriverUnavailableError
from ...ids import uuid7, uuid7_many
from .. import failures, rules
from ..contract import (
    EnqueueRequest,
    EnqueueResult,
    JobSnapshot,
)
from ..rules import (
    cancel_refusal,
    check_after,
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
from . import sql

if TYPE_CHECKING:
    pass
from .params import _many_params, _row_params
from .reads import PostgresReads
from .state import STATEMENTS


class PostgresJobs(PostgresReads):
    """``JobStore`` on ``jobs.sql``; an operator's action answers with a read, hence the
    ``PostgresReads`` base."""

    # --- enqueue: the hot path's way in --------------------------------------------------------

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
            "recheck": True,
        }
        tries = 0
        while tries < 2:
            rows = self._run("enqueue_after", params)
            inserted, unknown, full = rows[0][0], rows[0][3], rows[0][4]
            if inserted is not None:
                return EnqueueResult(id=inserted, run_id=rows[0][1])
            if unknown is not None and params["recheck"]:
                # HIST-12: a dependency the mover moved while the statement waited for its row
                # lock has ended, in the history, which a new statement's snapshot sees
                params["recheck"] = False
                continue
            tries += 1
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

    def requeue(
        self, job_id: UUID, *, from_step: str | None, force: bool, restart: bool = False
    ) -> JobSnapshot:
        params = {"id": job_id, "states": requeue_states(force), "restart": restart}
        try:
            # One transaction: the state change and the step deletion land together or not at
            # all, and the wake-up is only sent on commit.
            with transaction.atomic(using=self.using):
                rows = self._snapshots("requeue", params)
                if not rows and self._archive.restore(job_id):  # HIST-05: back from history
                    rows = self._snapshots("requeue", params)  # a refusal rolls it back
                if not rows:
                    row = self.get_job(job_id)
                    if row is None:
                        raise not_found(job_id)
                    refused = requeue_refusal(job_id, row.state, force, restart, row.parked)
                    raise refused or DriverUnavailableError(
                        f"job {job_id} changed state while being retried", hint="try again"
                    )
                if restart:
                    self._count("requeue_restart", {"run_id": rows[0].run_id})
                if from_step is not None:
                    run_id = rows[0].run_id
                    step = {"run_id": run_id, "step": from_step}
                    if not self._run("requeue_from_step", step):
                        names = [r.name for r in self._step_store.list(run_id)]
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
