"""The driver itself: the protocol ``get_driver()`` answers with."""

from __future__ import annotations

from typing import Protocol

from .features import DriverFeatures
from .jobs import JobStore, ReadStore
from .limits import LimitStore
from .outbox import OutboxStore
from .runs import RunStore
from .scheduler import SchedulerStore
from .stores import BackfillLedger, BatchStore, EventStore, HistoryStore, StepStore


class JobDriver(Protocol):
    """A job store, reached one way: ``get_driver()`` (or the driver a role was handed), then
    the accessor of the store a verb belongs to — ``driver.runs().complete(...)``,
    ``driver.reads().get_job(id)``, ``driver.outbox(alias).stage(...)``.

    Every accessor is a method, with or without arguments, and answers the same object each
    time it is called with the same arguments: a driver builds each store once. A role that
    uses a store on its hot path binds it once (``self._runs = driver.runs()``). The root has
    no verb of its own but ``close()``.

    Every write on a claimed row is fenced on ``state='running'`` and its token. This protocol
    is the only door to storage: callers never ask a driver its name or probe it for
    attributes, so a third driver needs no edit outside its own module.
    """

    #: a label for logs and reports (never a switch)
    name: str
    #: the Django database alias holding the jobs, or None when they are not in a database
    database: str | None
    #: what it can do, asked as flags (fleet slots, the backfill ledger, child runs)
    features: DriverFeatures

    def jobs(self) -> JobStore:
        """Writing jobs: enqueue, the operator's actions on one job, pruning and ageing."""

    def runs(self) -> RunStore:
        """A claimed run's writes, from its claim to its settle, and the workers' presence."""

    def reads(self) -> ReadStore:
        """Reading jobs, queues and workers."""

    def limits(self) -> LimitStore:
        """What holds a claim back: queue and key controls and the fleet slots, the slots read
        when ``features.supports_fleet_slots`` (SPEC WORK-02)."""

    def history(self) -> HistoryStore:
        """The per-minute rollup its settles write and the queue depth sampled once a minute."""

    def steps(self) -> StepStore:
        """Step records of runs; writes fenced like settles, times on the store's clock."""

    def events(self, alias: str | None = None) -> EventStore:
        """The events published on database ``alias`` (``publish_event(using=...)``); None, or
        this driver's own database: the events beside its jobs (SPEC §4)."""

    def outbox(self, alias: str | None = None, claim_lease: object = None) -> OutboxStore:
        """The outbox that stages enqueues made inside ``atomic()`` on database ``alias`` (None:
        this driver's own); ``claim_lease`` (a duration) overrides
        ``XJOBS["OUTBOX_CLAIM_LEASE"]`` for its relay."""

    def batches(self) -> BatchStore:
        """Batches and their counts (``Batch``, issue 32)."""

    def backfills(self) -> BackfillLedger:
        """The backfill ledger, read when ``features.supports_backfill_ledger`` (SPEC BF-07)."""

    def scheduler(self) -> SchedulerStore:
        """The cron scheduler's watermarks and leader lease, beside these jobs."""

    def close(self) -> None:
        """Let go of connections and listeners this driver opened."""
