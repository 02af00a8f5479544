"""The driver itself: the protocol ``get_driver()`` answers with."""

from __future__ import annotations

from typing import Any, Protocol

from .features import DriverFeatures
from .jobs import JobStore, ReadStore
from .limits import LeaseStore, LimitStore
from .outbox import OutboxStore
from .runs import RunStore
from .scheduler import SchedulerStore
from .stores import (
    BackfillLedger,
    BatchStore,
    DepthStore,
    EventStore,
    RollupStore,
    StepStore,
)


class JobDriver(JobStore, ReadStore, RunStore, LimitStore, Protocol):
    """A job store. Every write on a claimed row is fenced on ``state='running'`` and its token.

    This protocol is the only door to storage: callers never ask a driver its name or probe it
    for attributes, so a third driver needs no edit outside its own module.
    """

    #: a label for logs and reports (never a switch)
    name: str
    #: the Django database alias holding the jobs, or None when they are not in a database
    database: str | None
    #: what it can do, asked as flags (fleet slots, the backfill ledger, child runs)
    features: DriverFeatures

    # steps and events (SPEC §4)
    @property
    def steps(self) -> StepStore:
        """Step records of runs; writes fenced like settles, times on the store's clock."""

    @property
    def events(self) -> EventStore:
        """Published events; times on the store's clock."""

    @property
    def leases(self) -> LeaseStore:
        """Fleet concurrency slots, read when ``features.supports_fleet_slots`` (SPEC WORK-02)."""

    @property
    def backfills(self) -> BackfillLedger:
        """The backfill ledger, read when ``features.supports_backfill_ledger`` (SPEC BF-07)."""

    @property
    def rollups(self) -> RollupStore:
        """The per-minute rollup its settles write (rollup.py): read and pruned here."""

    @property
    def depths(self) -> DepthStore:
        """Queue depth sampled once a minute for the fleet (``x_queue_depth``)."""

    @property
    def batches(self) -> BatchStore:
        """Batches and their counts (``Batch``, issue 32)."""

    def event_store(self, alias: str) -> EventStore:
        """The events published on database ``alias`` (``publish_event(using=...)``): this
        driver's own ``events`` when ``alias`` is its database."""

    def outbox_store(self, alias: str, claim_lease: Any = None) -> OutboxStore:
        """The outbox that stages enqueues made inside ``atomic()`` on database ``alias``;
        ``claim_lease`` (a duration) overrides ``XJOBS["OUTBOX_CLAIM_LEASE"]`` for its relay."""

    def scheduler_store(self) -> SchedulerStore:
        """The cron scheduler's watermarks and leader lease, beside these jobs."""

    def close(self) -> None:
        """Let go of connections and listeners this driver opened."""
