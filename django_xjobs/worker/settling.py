"""The worker's settling half: one thread settles finished runs in batches, records their
outcomes and hands back what each run held (its limit, its fleet slot, its thread)."""

from __future__ import annotations

import contextlib
import functools
import logging
import queue as queue_module
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.db import connections

from .. import log, metrics
from ..drivers import failures
from ..drivers.connections import mark_role_thread
from ..drivers.contract import JobDriver, RetryAt, Settle, Shed, SuspendUntil
from ..run import signals
from ..run.execution import Execution, Outcome
from ..run.settle import settle
from .guard import SettleGuard
from .inflight import InFlight
from .pools import Lane
from .run import Run

_SETTLE_BATCH = 500
#: how long a settle that gave up in an outage stays owed (issue 25 item 1)
_OWED_FOR = 600.0
_ABANDONED = "xjobs_worker_abandoned_bodies"
#: the xjobs_jobs_total outcome label of each way a run ends (a suspension is not counted)
_COUNTED = {
    Outcome.COMPLETED: "ok",
    Outcome.RETRIED: "failed",
    Outcome.DEAD_LETTERED: "dead",
    Outcome.FAILED: "failed",
    Outcome.CANCELLED: "cancelled",
    Outcome.LEASE_LOST: "lease_lost",
}


def refused(execution: Execution) -> bool:
    """The run was handed back because its connection failed (outage.py): the only settle
    that gives its attempt back on a retry."""
    value = execution.settle
    return (
        execution.outcome is Outcome.RETRIED
        and isinstance(value, RetryAt)
        and not value.counts_as_attempt
    )


def _count_control(execution: Execution) -> None:
    """The job controls' own series (issue 29): a snooze is not a failure, and an expiry is
    counted apart from the dead letters it joins."""
    value = execution.settle
    if isinstance(value, SuspendUntil) and value.snoozed:
        metrics.inc("xjobs_jobs_snoozed_total", queue=execution.job.queue)
    elif execution.stop_reason == "expired":
        metrics.inc("xjobs_jobs_expired_total", queue=execution.job.queue)
    elif execution.stop_reason == "dependency_failed":
        metrics.inc("xjobs_jobs_dependency_failed_total", queue=execution.job.queue)


@dataclass(frozen=True)
class Ended:
    """An abandoned body returned: its capacity can be handed back."""

    run: Run


class Settler:
    """Settles finished runs, records their outcomes and hands back what each run held (its
    limit, its fleet slot, its thread). The settler thread runs ``loop()``; ``tick()`` calls
    ``settle_batch()`` in the calling thread."""

    def __init__(
        self,
        runs: InFlight,
        driver: JobDriver,
        guard: SettleGuard,
        *,
        worker_id: str,
        outcomes: Counter[str],
        wake: threading.Event,
        database: str | None,
        restart: Callable[[Lane], None],
        watch: Callable[[str], Any],
        answered: Callable[[], None],
    ) -> None:
        self.runs = runs
        self.driver = driver
        self.guard = guard
        self.worker_id = worker_id
        self.outcomes = outcomes
        #: set when a settle may have freed room: the claim loop looks again
        self.wake = wake
        self.database = database
        #: an abandoned body returned: its pool gets its thread back (unless the worker stops)
        self.restart = restart
        self.watch = watch
        #: the settles owed since an outage landed: the database answers, claim now
        self.answered = answered
        #: the claim loop and the presence renewal both send what is owed: one at a time
        self._repaying = threading.Lock()
        #: when the settles owed since an outage were last tried
        self.repaid_at = float("-inf")
        #: what the job threads hand over: results to settle, abandoned bodies that ended, and
        #: None to stop
        self.queue: queue_module.SimpleQueue[Execution | Ended | None] = queue_module.SimpleQueue()

    def loop(self) -> None:
        mark_role_thread()
        try:
            while True:
                first = self.queue.get()
                if first is None:
                    return
                batch: list[Execution] = []
                item: Execution | Ended | None = first
                while True:
                    if isinstance(item, Ended):
                        with self.watch("settle"):
                            self.body_ended(item.run)
                    elif item is None:
                        with self.watch("settle"):
                            self.settle_batch(batch)
                        return
                    else:
                        batch.append(item)
                    if len(batch) >= _SETTLE_BATCH:
                        break
                    try:
                        item = self.queue.get_nowait()
                    except queue_module.Empty:
                        break
                with self.watch("settle"):
                    self.settle_batch(batch)
        finally:
            if self.database:
                connections[self.database].close()

    def settle_batch(self, batch: list[Execution]) -> set[Any]:
        """Settle ``batch``; return the lease tokens whose settle landed."""
        if not batch:
            return set()
        names = {e.job.id: e.job.name for e in batch}
        failed: dict[Any, Exception] = {}
        # the settle guard (worker/guard.py) retries transient failures, marks runs settled
        # one window for the whole batch: each value retried for its own would add up past the
        # watchdog's bound on a settle, and an outage would end the worker (issue 25 item 1)
        guard = functools.partial(
            self.guard, names=names, failures=failed, until=self.guard.window_end()
        )
        settled = settle(self.driver, [e.settle for e in batch], guard)
        counts: Counter[tuple[str, str]] = Counter()
        completed_logged = log.logger.isEnabledFor(logging.INFO)
        for execution in batch:
            token = execution.job.lease_token
            self._finish(
                execution,
                token in settled,
                failed=token in failed,
                counts=counts,
                completed_logged=completed_logged,
            )
            if token in failed:
                self._owe(execution, failed[token])
        for (queue, counted), n in counts.items():
            metrics.inc("xjobs_jobs_total", n, queue=queue, outcome=counted)
        self.wake.set()  # a settle may have freed room, or ended a hold-back
        return settled

    def _finish(
        self,
        execution: Execution,
        settled: bool,
        *,
        failed: bool = False,
        counts: Counter[tuple[str, str]],
        completed_logged: bool = True,
    ) -> None:
        """Release the run and record its outcome; its xjobs_jobs_total count goes to
        ``counts``, added to the counter once per settle batch rather than once per run."""
        job = execution.job
        run = self.runs.settled(job.lease_token, abandoned=execution.abandoned is not None)
        if run is not None:
            run.settled.set()
            if execution.abandoned is not None:
                self._hold_for(run, execution.abandoned)
            else:
                self.release(run)
        outcome = execution.outcome
        cancelled_meanwhile: str | None = None
        if not settled and not failed and outcome is not Outcome.CANCELLED:
            cancelled_meanwhile = self._cancelled_reason(execution)
        if cancelled_meanwhile is not None:
            # cancelled while its body ran, before a heartbeat could say so: the fence refused
            # the settle because of the cancel, not a lost lease (DESIGN Q-08)
            outcome = Outcome.CANCELLED
            log.event(
                logging.INFO,
                "xjobs.job.cancelled",
                worker=self.worker_id,
                job=job.name,
                id=job.id,
                reason=cancelled_meanwhile or None,
            )
        elif not settled and outcome is not Outcome.CANCELLED:
            outcome = Outcome.LEASE_LOST
        self.outcomes[outcome] += 1
        if not isinstance(execution.settle, Shed):  # a run handed back unstarted never began
            signals.finished(execution, outcome=outcome, handle=None if run is None else run.handle)
        # SPEC MET-02: one per settled run, no job-name label; a suspension is not counted
        # (nor is a shed job, which never reaches here)
        counted = "unsettled" if failed else _COUNTED.get(outcome)
        if counted is not None:
            counts[(job.queue, counted)] += 1
            if not isinstance(execution.settle, Shed):  # a shed run never ran nor ended a wait
                metrics.observe("xjobs_job_duration_seconds", execution.duration, queue=job.queue)
                metrics.observe("xjobs_job_wait_seconds", job.waited, queue=job.queue)
        if settled:
            _count_control(execution)
        if outcome is Outcome.CANCELLED:
            pass  # reported by the heartbeat that saw it (xjobs.job.cancelled)
        elif settled and outcome is Outcome.COMPLETED:
            if not completed_logged:
                return  # the line below would be dropped: skip building it, once per run
            log.event(
                logging.INFO,
                "xjobs.job.completed",
                job=job.name,
                id=job.id,
                attempt=job.attempt,
                ms=round(execution.duration * 1000, 1),
            )
        elif failed:
            pass  # reported by the guard that gave up (xjobs.worker.settle_failed)
        elif not settled:
            # SPEC STATE-01 / DESIGN Q-01: the row moved on (lease lapsed, re-claimed or
            # cancelled); this run's verdict is dropped rather than overwrite the new holder's.
            log.event(
                logging.WARNING,
                "xjobs.job.settle_refused",
                worker=self.worker_id,
                job=job.name,
                id=job.id,
                attempt=job.attempt,
                outcome=execution.outcome,
            )

    def _cancelled_reason(self, execution: Execution) -> str | None:
        """When a refused settle's row was cancelled during this very run: its reason ("" for
        none); else None. One read, on a refusal only (rare, never the hot path)."""
        job = execution.job
        try:
            row = self.driver.reads().get_job(job.id)
        except Exception:
            return None  # unreadable: reported as the refusal it is
        if row is None or row.state != "cancelled":
            return None
        # the same run and claim: a re-claim by another worker would have moved the attempt
        if row.run_id != job.run_id or row.attempt != job.attempt:
            return None
        return row.last_error or ""

    def _owe(self, execution: Execution, error: Exception) -> None:
        """The guard gave up on this settle while the database was away: keep it, fenced on
        its lease token, for the claim loop to send the moment the database answers (issue 25
        item 1). Left to lapse, the row would wait for another worker's sweep; sent late, it
        lands unless another worker has claimed the job since, and is refused if one has."""
        if not failures.is_transient(error):
            return  # the statement itself was refused: sending it again changes nothing
        # A run cut short by its lease deadline keeps its attempt counted, as it would had the
        # lapse been swept (SPEC T4: a re-claim after a lapse is attempt+1). A run the outage
        # cut short (its connection failed, or its lease was lost meanwhile) goes back in its old
        # place once sent, ahead of the backlog, with no backoff: it lands only once the
        # database answers again (SPEC LEASE-20).
        value = execution.settle
        if isinstance(value, RetryAt) and (
            not value.counts_as_attempt or execution.outcome is Outcome.LEASE_LOST
        ):
            value = replace(value, keep_place=True)
        job = execution.job
        with self.runs.lock:
            self.runs.owed[job.lease_token] = (value, time.monotonic())

    def settle_owed(self) -> bool:
        """The presence renewal's first step after an outage (heartbeat thread): the settles
        owed are sent before the worker says it is present again, so no other worker takes a
        run as lapsed while its holder's result is on its way (a completion that landed first
        would have been refused, and the body run twice). True once nothing is owed."""
        if self.runs.owed:
            self.repay(section=False)
        return not self.runs.owed

    def repay(self, *, section: bool = True) -> None:
        """Send the settles owed since the outage, each fenced on its lease token: a run cut
        short goes back to ready at once instead of waiting for its lapse to be swept (issue
        25 item 1). The claim loop tries it every ``_REPAY_EVERY`` s (worker/loop.py) whatever
        the claims' backoff, the oldest settle first, alone: while it fails on a connection,
        nothing else is sent, so a pass during an outage costs one statement (SPEC LEASE-20).
        One that fails on a connection again stays owed for the next pass; any other failure,
        or ten minutes owed, drops it: its lease hands the job back as before."""
        with self._repaying:  # the claim loop's pass or the presence renewal's, one at a time
            watch = self.watch("claim") if section else contextlib.nullcontext()
            with watch:
                self._repay_owed()

    def _owed_oldest_first(self) -> list[Settle]:
        """The settles owed, the oldest first; one owed past ``_OWED_FOR`` is dropped."""
        now = self.repaid_at = time.monotonic()
        runs = self.runs
        with runs.lock:
            for token in [t for t, (_, at) in runs.owed.items() if now - at > _OWED_FOR]:
                del runs.owed[token]
            return [value for value, _ in sorted(runs.owed.values(), key=lambda owe: owe[1])]

    def _repay_owed(self) -> None:
        owed = self._owed_oldest_first()
        if not owed:
            return
        runs = self.runs
        kept: set[Any] = set()

        def guard(call: Any, values: Sequence[Settle], failed: Any) -> Any:
            try:
                return call()
            except Exception as error:
                if failures.is_transient(error):
                    kept.update(v.lease_token for v in values)
                return failed

        landed = settle(self.driver, owed[:1], guard)  # the probe
        if kept and self.database is not None:
            # the first statement after an outage meets the connection it broke: once more on a
            # fresh one, before this pass's claim could sweep these very rows
            connections[self.database].close()
            kept.clear()
            landed = settle(self.driver, owed[:1], guard)
        if kept:
            kept.update(value.lease_token for value in owed)  # still away: all stay owed
        else:
            landed |= settle(self.driver, owed[1:], guard)
        with runs.lock:
            for value in owed:
                if value.lease_token not in kept:
                    runs.owed.pop(value.lease_token, None)
        if len(kept) == len(owed):
            return  # the database still refuses them: nothing was sent
        log.event(
            logging.WARNING,
            "xjobs.worker.settled_after_outage",
            worker=self.worker_id,
            landed=len(landed),
            refused=len(owed) - len(landed) - len(kept),
        )
        # the database answers: the loop claims now, not after its backoff, and the runs handed
        # back are due now
        self.answered()

    def _hold_for(self, run: Run, body: Any) -> None:
        """SPEC EXEC-05: a body past its timeout still runs, so its fleet slot, its limit and a
        thread stay counted until it returns; a retry of a capped job waits for that slot."""
        metrics.gauge_add(_ABANDONED, 1)
        log.event(
            logging.WARNING,
            "xjobs.worker.body_abandoned",
            worker=self.worker_id,
            job=run.job.name,
            id=run.job.id,
            attempt=run.job.attempt,
            slot=f"{run.slot[0]}#{run.slot[1]}" if run.slot else None,
            hint="the body ignores ctx.signal; its capacity stays held until it returns",
        )
        body.when_ended(lambda: self.queue.put(Ended(run)))

    def body_ended(self, run: Run) -> None:
        if not self.runs.body_ended(run):
            return
        metrics.gauge_add(_ABANDONED, -1)
        log.event(
            logging.INFO,
            "xjobs.worker.body_ended",
            worker=self.worker_id,
            job=run.job.name,
            id=run.job.id,
            attempt=run.job.attempt,
        )
        self.release(run)
        self.restart(self.runs.lane_of[run.job.queue])  # its thread of the pool is free again
        self.wake.set()

    def release(self, run: Run) -> None:
        """Hand back the process limit and the fleet slot; a failure never fails the settle."""
        try:
            if run.limit_lease is not None:
                run.limit_lease.release()
            if run.slot is not None and self.driver.features.supports_fleet_slots:
                key, slot, holder = run.slot
                self.driver.limits().release_slot(key, slot, holder)
        except Exception as error:
            log.event(
                logging.WARNING, "xjobs.worker.lease_release_failed", id=run.job.id, error=error
            )
