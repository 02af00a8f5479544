"""The worker's admission: each claimed job takes the per-process limit, then its fleet slot,
or is shed straight back without spending an attempt (SPEC WORK-04/07/08). Its row's name is
resolved to what it runs here, once, and carried on the run."""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import log
from ..declarations import registry
from ..drivers.contract import ClaimedJob, JobDriver, Settle, Shed
from ..limits.worker import Limiter
from ..run.handle import Runnable
from ..run.settle import settle
from .inflight import InFlight
from .run import Run


@dataclass(frozen=True)
class Admit:
    """Admission said yes: ``run`` holds the limit and the slot it needs to start."""

    run: Run


class Admission:
    """Admits claimed jobs into ``runs`` or sheds them back; ``tick()``, ``run_until_idle()``
    and the claim loop all admit through one."""

    def __init__(
        self,
        runs: InFlight,
        driver: JobDriver,
        limiter: Limiter,
        *,
        worker_id: str,
        poll_interval: float,
        visibility_timeout: float,
        outcomes: Counter[str],
        watch: Callable[[str], Any] = lambda section: contextlib.nullcontext(),
    ) -> None:
        self.runs = runs
        self.driver = driver
        self.limiter = limiter
        caps = limiter.limits
        #: no cap configured: nothing to count, so a run takes no limiter lease at all
        self.limited = any(
            cap is not None
            for cap in (caps.global_, caps.per_queue, caps.per_tenant, caps.rate_per_tenant)
        )
        self.worker_id = worker_id
        self.poll_interval = poll_interval
        self.visibility_timeout = visibility_timeout
        self.outcomes = outcomes
        self.watch = watch

    def admit_all(
        self, claimed: Sequence[ClaimedJob], sent: float, *, section: str = "admit"
    ) -> tuple[list[Run], list[Shed]]:
        """Admit each claimed job or shed it back; the admitted are this worker's runs now.
        ``section``: the watchdog's name for the stretch (one per thread admitting)."""
        # Decide the whole batch (admit, or shed back) before starting any of it: a job that
        # kills its worker at once must not take down jobs this loop had yet to shed.
        admitted, shed = [], []
        with self.watch(section):
            for job in claimed:
                admission = self.admit(job)
                if isinstance(admission, Shed):
                    self.shed(job, admission)
                    shed.append(admission)
                    continue
                admission.run.renewed_at = sent
                self.runs.admit(admission.run)
                admitted.append(admission.run)
        return admitted, shed

    def admit(self, job: ClaimedJob) -> Admit | Shed:
        """Take the per-process limit, then the fleet slot; shed the job when either is full
        (SPEC WORK-04/07/08): it goes back to ready without spending an attempt."""

        def shed(reason: str, keep_place: bool = False) -> Shed:
            delay = self.poll_interval
            return Shed(job.id, job.lease_token, delay=delay, reason=reason, keep_place=keep_place)

        # a suspect (its last run died with its worker) is admitted as any run: it runs alone in
        # a child process, beside the others (worker/isolation.py), so nothing waits for it
        lease = None
        if self.limited:
            lease = self.limiter.acquire(job.queue, job.tenant_id)
            if lease is None:
                return shed(f"limited: {self.limiter.last_reason}")
        # resolved here, once: the run carries it to its body, its settle and its signals
        handle: Runnable | None = registry.get_job(job.name)
        slot = None
        fleet = self.driver.features.supports_fleet_slots
        # a per-key cap (limit_key) was decided in the claim: the per-name slot is not its
        per_key = getattr(getattr(handle, "limits", None), "key", None) is not None
        if handle is not None and handle.concurrency and fleet and not per_key:
            key, holder = f"job:{job.name}", f"{self.worker_id}:{job.id}"  # SPEC SLOT-02
            try:
                granted = self.driver.limits().acquire_slot(
                    key, handle.concurrency, self.visibility_timeout, holder
                )
            except Exception as error:
                if lease is not None:
                    lease.release()  # SPEC WORK-09, SE-09: never leak the process slot
                log.event(logging.ERROR, "xjobs.worker.slot_failed", id=job.id, error=error)
                return shed("the concurrency slot could not be taken")
            if granted is None:
                if lease is not None:
                    lease.release()
                return shed(f"job concurrency ({handle.concurrency})")
            slot = (key, granted, holder)
        run = Run(
            job,
            self.worker_id,
            self.visibility_timeout,
            slot=slot,
            limit_lease=lease,
            handle=handle,
        )
        return Admit(run)

    def shed(self, job: ClaimedJob, shed: Shed) -> None:
        """Hand a claimed job straight back: ready again after a poll, no attempt, no error."""
        log.event(
            logging.DEBUG,
            "xjobs.worker.shed",
            worker=self.worker_id,
            job=job.name,
            id=job.id,
            queue=job.queue,
            reason=shed.reason,
        )
        self.outcomes["shed"] += 1

        def guard(call: Any, values: Sequence[Settle], failed: Any) -> Any:
            try:
                return call()
            except Exception as error:  # the lease hands it back anyway
                log.event(logging.WARNING, "xjobs.worker.shed_failed", id=job.id, error=error)
                return failed

        settle(self.driver, [shed], guard)
