"""Keep the leases of running jobs alive, and notice the moment one is gone.

The window is measured on this worker's own clock from the last renewal that landed, never from
the database's ``visible_at`` (SPEC LEASE-04, SE-12). Renewals run on a small pool of their own
connections, one at a time per run, so a renewal that hangs cannot hide a lapse (LEASE-06/07).

Two bounds keep a worker whose connections went silent from holding jobs: a timer aborts each
run's signal at its local deadline (LEASE-15), and a run whose body returned is renewed only
while its settle is within the settle deadline (HANG-03).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from django.db import connections

from .. import log
from ..drivers import failures
from ..drivers.connections import close_stale_connections, mark_role_thread
from .run import DEADLINE_MARGIN

if TYPE_CHECKING:
    from ..drivers.contract import JobDriver, JobSnapshot
    from .presence import WorkerPresence
    from .run import Run


class Heartbeat(threading.Thread):
    def __init__(
        self,
        driver: JobDriver,
        runs: Callable[[], list[Run]],
        *,
        abandoned: Callable[[], list[Run]] = list,
        interval: float,
        visibility_timeout: float,
        worker_id: str,
        database: str | None,
        monotonic: Callable[[], float] = time.monotonic,
        submit: Callable[..., object] | None = None,
        settle_deadline: float | None = None,
        presence: WorkerPresence | None = None,
    ) -> None:
        super().__init__(name="xjobs-heartbeat", daemon=True)
        self.driver, self.runs, self.abandoned = driver, runs, abandoned
        #: the store every renewal writes to, bound once: a beat renews each run in flight
        self._run_store = driver.runs()
        self.interval, self.visibility_timeout = interval, visibility_timeout
        self.worker_id, self.database = worker_id, database
        self.monotonic = monotonic
        #: SPEC LEASE-15: a tenth of the timeout covers the renewal's trip and the handler's stop
        self.margin = visibility_timeout * DEADLINE_MARGIN
        #: SPEC HANG-03: how long a returned body's settle may take while its lease is renewed
        self.settle_deadline = visibility_timeout if settle_deadline is None else settle_deadline
        self.presence = presence
        self._pool: ThreadPoolExecutor | None = None
        if submit is None:
            self._pool = ThreadPoolExecutor(
                4, thread_name_prefix="xjobs-renew", initializer=mark_role_thread
            )
            submit = self._pool.submit
        self.submit = submit
        self._halt = threading.Event()
        self._timer = threading.Thread(target=self._deadlines, name="xjobs-deadline", daemon=True)

    def run(self) -> None:
        self._timer.start()
        try:
            while not self._halt.wait(self.interval):
                self.beat()
        finally:
            if self.database:
                connections[self.database].close()

    def _deadlines(self) -> None:
        """SPEC LEASE-15: abort each run's signal at its local deadline, not at the next tick."""
        while not self._halt.is_set():
            self._halt.wait(self.expire_due())

    def expire_due(self) -> float:
        """Lose every run past its local deadline; the seconds until the next one is due
        (at most a quarter second, so a run claimed meanwhile is seen in time)."""
        now = self.monotonic()
        wait = 0.25
        for run in self.runs():
            if run.settled.is_set() or run.lost or run.cancelled:
                continue
            due = run.deadline(self.margin)
            if due <= now:
                run.lose("deadline")
            else:
                wait = min(wait, due - now)
        return wait

    def beat(self) -> None:
        """One tick: report lapsed leases, start renewals that are due (the one-shot entry)."""
        if self.presence is not None and not self.presence.renewing:
            self.presence.renewing = True  # one statement per beat for the whole worker
            self.submit(self.renew_presence, self.presence)
        now = self.monotonic()
        for run in self.runs():
            if run.settled.is_set() or run.lost or run.cancelled:
                continue
            if now - run.renewed_at >= self.visibility_timeout:
                run.lose("expired")  # SPEC LEASE-06: no driver call for a lease already gone
                continue
            if run.renewing:
                continue  # SPEC LEASE-07: one renewal in flight, however long it takes
            if self._settle_overdue(run, now):
                continue  # SPEC HANG-03: its lease lapses, so another worker can take the job
            run.renewing = True
            self.submit(self.renew, run)
        for run in self.abandoned():
            # settled, but its body still runs: its fleet slot must outlive it (SPEC EXEC-05)
            if run.slot is not None and not run.renewing:
                run.renewing = True
                self.submit(self.renew_held_slot, run)

    def _settle_overdue(self, run: Run, now: float) -> bool:
        if run.returned_at is None or now - run.returned_at < self.settle_deadline:
            return False
        if not run.overdue:
            run.overdue = True
            log.event(
                logging.ERROR,
                "xjobs.worker.settle_overdue",
                worker=self.worker_id,
                job=run.job.name,
                id=run.job.id,
                attempt=run.job.attempt,
                waited=f"{now - run.returned_at:.1f}s",
                hint="its settle is stuck; the lease is no longer renewed and will lapse",
            )
        return True

    def renew(self, run: Run) -> None:
        started = self.monotonic()
        held: Any = None
        failure: BaseException | None = None
        try:
            try:
                held = self._run_store.heartbeat(
                    run.job.id, run.job.lease_token, self.visibility_timeout
                )
            except Exception as error:
                failure = error
            try:
                self._judge_renewal(run, started, held, failure)
            finally:
                run.renewing = False
            self._renew_slot(run)
        finally:
            if self._pool is not None:
                close_stale_connections()  # a pool thread's connection lives one renewal

    def renew_presence(self, presence: WorkerPresence) -> None:
        try:
            presence.renew()
        finally:
            if self._pool is not None:
                close_stale_connections()

    def _judge_renewal(
        self, run: Run, started: float, held: object, failure: BaseException | None
    ) -> None:
        """What one renewal of ``run``'s lease says: renewed, lost, or failed and retried."""
        if run.settled.is_set() or run.lost or run.cancelled:
            return  # SPEC LEASE-12, SE-15: the latch, read again after the call returned
        lapsed = self.monotonic() - run.renewed_at >= self.visibility_timeout
        if failure is not None:
            if failures.connection_failed(failure):
                run.unanswered = True  # SPEC LEASE-20: a loss from here on is the outage's
            if lapsed:
                run.lose("expired", failure)  # SPEC LEASE-10
            else:
                log.throttled(  # an outage fails every renewal: one line per kind of error
                    logging.WARNING,
                    "xjobs.heartbeat.failed",
                    kind=failures.sqlstate(failure) or type(failure).__name__,
                    worker=self.worker_id,
                    job=run.job.name,
                    id=run.job.id,
                    attempt=run.job.attempt,
                    error=failure,
                )  # SPEC LEASE-05: the window still has room
            return
        if held is False:  # SPEC LEASE-08: only an explicit False
            if run.settling:
                return  # its body returned: the settle may have landed; the settler reports
            row = self._row(run)
            if row is not None and row.state == "cancelled":  # SPEC CANCEL-05, DESIGN Q-08
                run.cancel(row.last_error)
            else:
                run.lose("not-ours")
            return
        if lapsed:
            run.lose("expired")  # SPEC LEASE-09, SE-13: too late; the window is not revived
            return
        run.renewed_at = started

    def _renew_slot(self, run: Run) -> None:
        fleet = self.driver.features.supports_fleet_slots
        if run.slot is None or not fleet or run.settled.is_set() or run.slot_lost:
            return  # SPEC SLOT-04: a lost slot is not renewed again
        key, slot, holder = run.slot
        try:
            kept = self.driver.limits().renew_slot(key, slot, self.visibility_timeout, holder)
        except Exception:
            return  # SPEC SLOT-04: the TTL covers a failed renewal
        if kept is False and not run.settled.is_set():
            run.lose_slot()

    def renew_held_slot(self, run: Run) -> None:
        fleet = self.driver.features.supports_fleet_slots
        try:
            if run.slot is not None and fleet and not run.slot_lost:
                key, slot, holder = run.slot
                if (
                    self.driver.limits().renew_slot(key, slot, self.visibility_timeout, holder)
                    is False
                ):
                    run.slot_lost = True  # SPEC SLOT-04: said once, then no longer renewed
                    log.event(
                        logging.ERROR,
                        "xjobs.worker.slot_lost",
                        worker=self.worker_id,
                        id=run.job.id,
                        lease_key=key,
                        slot=slot,
                        abandoned=True,
                    )
        except Exception:
            pass  # SPEC SLOT-04: the TTL covers a failed renewal
        finally:
            run.renewing = False
            if self._pool is not None:
                close_stale_connections()

    def _row(self, run: Run) -> JobSnapshot | None:
        try:
            return self.driver.reads().get_job(run.job.id)
        except Exception:
            return None

    def stop(self) -> None:
        # both loops wake on the halt at once; the bounds only cover a renewal still on the
        # wire, and they stay small so a drain's waits never add up to --shutdown-timeout
        self._halt.set()
        if self.is_alive():
            self.join(timeout=2)
        if self._timer.is_alive():
            self._timer.join(timeout=2)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
