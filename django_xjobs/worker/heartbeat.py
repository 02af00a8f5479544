"""Renew the leases of running jobs on a thread (and so a connection) of its own."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import connections

from .. import log
from ..errors import LeaseLostError

if TYPE_CHECKING:
    from ..drivers.base import JobDriver
    from .run import Run


class Heartbeat(threading.Thread):
    """Every ``interval`` seconds renew each in-flight lease; abort a run whose lease is gone.

    A renewal that fails is a warning while the lease still has room; an explicit "not yours"
    from the driver is a loss, reported once, and the run's signal aborts (SPEC LEASE-08/11).
    """

    def __init__(
        self,
        driver: JobDriver,
        runs: Callable[[], list[Run]],
        *,
        interval: float,
        visibility_timeout: float,
        worker_id: str,
        database: str | None,
    ) -> None:
        super().__init__(name="xjobs-heartbeat", daemon=True)
        self.driver, self.runs = driver, runs
        self.interval, self.visibility_timeout = interval, visibility_timeout
        self.worker_id, self.database = worker_id, database
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            while not self._halt.wait(self.interval):
                self.beat()
        finally:
            if self.database:
                connections[self.database].close()

    def beat(self) -> None:
        """Renew every in-flight lease once (also the one-shot entry point for tests)."""
        for run in self.runs():
            if run.settled.is_set() or run.lost:
                continue
            try:
                held = self.driver.heartbeat(
                    run.job.id, run.job.lease_token, self.visibility_timeout
                )
            except Exception as error:
                log.event(
                    logging.WARNING,
                    "xjobs.heartbeat.failed",
                    worker=self.worker_id,
                    job=run.job.name,
                    id=run.job.id,
                    error=error,
                )
                continue
            if held is not False or run.settled.is_set():
                continue  # SPEC LEASE-08/12: only an explicit False, and only for a live run
            row = self._row(run)
            if row is not None and row.state == "cancelled":  # SPEC CANCEL-05, DESIGN Q-08
                run.cancel(row.last_error)
                continue
            run.lose(
                LeaseLostError(
                    f"job {run.job.id} is no longer held by this worker",
                    hint="its lease lapsed and another worker claimed it; nothing this run "
                    "writes will land",
                )
            )

    def _row(self, run: Run) -> Any:
        try:
            return self.driver.get_job(run.job.id)
        except Exception:
            return None

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(timeout=10)
