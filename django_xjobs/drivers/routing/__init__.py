"""The routing driver (issue 48): jobs in several PostgreSQL databases, one driver per Django
alias behind the one ``JobDriver`` protocol. ``get_driver()`` builds it when
``XJOBS["QUEUE_DATABASES"]`` or ``XJOBS["ROUTER"]`` is set, and never otherwise, so a site on
one database runs exactly the statements it ran before (docs/howto/sharding.md)."""

from __future__ import annotations

from collections.abc import Mapping

from ...conf.routing import Routing
from ..contract import (
    BackfillLedger,
    BatchStore,
    DriverFeatures,
    EventStore,
    HistoryStore,
    JobDriver,
    JobStore,
    LimitStore,
    OutboxStore,
    ReadStore,
    RunStore,
    SchedulerStore,
    StepStore,
)
from .events import RoutedEvents
from .jobs import RoutedJobs, RoutedReads
from .place import Placement
from .runs import RoutedRuns, RoutedSteps
from .stores import RoutedBatches, RoutedHistory, RoutedLimits


class RoutingDriver:
    """Jobs in the aliases ``routing`` names, each alias's own driver in ``drivers``.

    Each job and all it lives by (its steps, its batch, its limit keys' state, its history) is
    in the alias its queue and tenant route to; an action on one job goes to the alias holding
    it; every read asks every alias and merges. The cron scheduler, the backfill ledger, the
    fleet slots and the outboxes stay in the jobs database (``XJOBS["DATABASE"]``); an event is
    stored where it is published and copied to every jobs database.
    """

    name = "routing"
    #: the jobs are in no one database: a publish from an outbox is always one across
    #: databases (claim, insert, mark), made exactly once by the staged id (SPEC SHARD-03)
    database: str | None = None

    def __init__(self, routing: Routing, drivers: Mapping[str, JobDriver]) -> None:
        self.place = Placement(routing, drivers)
        self.features: DriverFeatures = self.place.primary.features
        self._jobs = RoutedJobs(self.place)
        self._reads = RoutedReads(self.place)
        self._runs = RoutedRuns(self.place)
        self._steps = RoutedSteps(self.place)
        self._limits = RoutedLimits(self.place)
        self._history = RoutedHistory(self.place)
        self._batches = RoutedBatches(self.place)
        self._events: dict[str, EventStore] = {}

    def jobs(self) -> JobStore:
        return self._jobs

    def runs(self) -> RunStore:
        return self._runs

    def reads(self) -> ReadStore:
        return self._reads

    def limits(self) -> LimitStore:
        return self._limits

    def history(self) -> HistoryStore:
        return self._history

    def steps(self) -> StepStore:
        return self._steps

    def events(self, alias: str | None = None) -> EventStore:
        """The events of ``alias`` (None: the jobs database), each publish told to every jobs
        database (SPEC SHARD-08)."""
        alias = self.place.routing.default if alias is None else alias
        store = self._events.get(alias)
        if store is None:
            built = RoutedEvents(self.place, alias, self.place.primary.events(alias))
            store = self._events.setdefault(alias, built)
        return store

    def outbox(self, alias: str | None = None, claim_lease: object = None) -> OutboxStore:
        return self.place.primary.outbox(alias, claim_lease)

    def batches(self) -> BatchStore:
        return self._batches

    def backfills(self) -> BackfillLedger:
        return self.place.primary.backfills()

    def scheduler(self) -> SchedulerStore:
        return self.place.primary.scheduler()

    def close(self) -> None:
        for driver in self.place.drivers.values():
            driver.close()


__all__ = ["RoutingDriver"]
