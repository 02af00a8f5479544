"""The routing driver's runs and steps: each queue claimed from the alias it lives in (one
listener per alias), and every write of a claimed run sent to the alias it was claimed from
(SPEC SHARD-05)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from ...history import Failure
from ..contract import (
    ClaimedJob,
    Complete,
    DeclaredVersions,
    Finish,
    Notifier,
    Presence,
    RetryAt,
    RunStore,
    Shed,
    StepRecord,
    SuspendUntil,
)
from ..rules import check_claim_args
from .place import Placement, is_down

if TYPE_CHECKING:
    from ...limits.claims import ClaimLimits


class Listening:
    """The listeners of every alias a worker claims from, stopped together."""

    def __init__(self, notifiers: Sequence[Notifier]) -> None:
        self.notifiers = list(notifiers)

    def stop(self) -> None:
        for notifier in self.notifiers:
            notifier.stop()


class RoutedRuns:
    """``RunStore`` over every alias."""

    def __init__(self, place: Placement) -> None:
        self.place = place
        self._turn = itertools.count()

    def _queues(self, queues: Iterable[str]) -> dict[str, list[str]]:
        """The queues to claim from each alias."""
        per_alias: dict[str, list[str]] = {}
        for queue in queues:
            for alias in self.place.routing.queue_aliases(queue):
                per_alias.setdefault(alias, []).append(queue)
        return per_alias

    def claim(
        self,
        *,
        queues: Sequence[str],
        limit: int,
        visibility_timeout: float,
        worker_id: str,
        lapsed: bool = True,
        limits: ClaimLimits | None = None,
        versions: DeclaredVersions | None = None,
        paused: frozenset[str] = frozenset(),
    ) -> list[ClaimedJob]:
        # each alias in turn goes first, so a busy one never starves the others; one that is
        # down is passed over (its queues wait for it, every other's keep running)
        check_claim_args(queues, limit, visibility_timeout)  # SPEC DRV-05, before any alias
        per_alias = list(self._queues(queues).items())
        start = next(self._turn) % len(per_alias)
        claimed: list[ClaimedJob] = []
        failure: Exception | None = None
        failed = 0
        for alias, names in per_alias[start:] + per_alias[:start]:
            wanted = limit - len(claimed)
            if wanted <= 0:
                break
            try:
                got = (
                    self.place.drivers[alias]
                    .runs()
                    .claim(
                        queues=names,
                        limit=wanted,
                        visibility_timeout=visibility_timeout,
                        worker_id=worker_id,
                        lapsed=lapsed,
                        limits=limits,
                        versions=versions,
                        paused=paused,
                    )
                )
            except Exception as error:
                if not is_down(error):
                    raise
                failure, failed = failure or error, failed + 1
                self.place.passed_over(alias, error, what="claim")
                continue
            for job in got:
                self.place.hold(alias, job.id, job.run_id)
            claimed.extend(got)
        if failure is not None and failed == len(per_alias):
            raise failure  # nothing answered: the worker's outage handling takes it
        return claimed

    def _runs_of(self, job_id: UUID) -> RunStore:
        return self.place.owner(job_id).runs()

    def _settle(self, job_id: UUID, write: Callable[[RunStore], bool]) -> bool:
        alias = self.place.find(job_id)
        runs = self.place.primary.runs() if alias is None else self.place.drivers[alias].runs()
        with self.place.settling(alias):
            settled = write(runs)
        self.place.release(job_id)
        return settled

    def complete(self, completes: Sequence[Complete]) -> set[UUID]:
        per_alias: dict[str, list[Complete]] = {}
        for each in completes:
            per_alias.setdefault(self.place.find(each.job_id) or "", []).append(each)
        done: set[UUID] = set()
        for alias, part in per_alias.items():
            driver = self.place.drivers.get(alias, self.place.primary)
            with self.place.settling(alias or None):
                done |= driver.runs().complete(part)
        for each in completes:
            self.place.release(each.job_id)
        return done

    def retry(self, retry: RetryAt) -> bool:
        return self._settle(retry.job_id, lambda runs: runs.retry(retry))

    def suspend(self, suspend: SuspendUntil) -> bool:
        return self._settle(suspend.job_id, lambda runs: runs.suspend(suspend))

    def shed(self, shed: Shed) -> bool:
        return self._settle(shed.job_id, lambda runs: runs.shed(shed))

    def finish(self, finish: Finish) -> bool:
        return self._settle(finish.job_id, lambda runs: runs.finish(finish))

    def restart(self, job_id: UUID, lease_token: UUID, version: int, entry: Failure) -> bool:
        return self._runs_of(job_id).restart(job_id, lease_token, version, entry)

    def progress(self, job_id: UUID, lease_token: UUID, progress: Mapping[str, object]) -> bool:
        return self._runs_of(job_id).progress(job_id, lease_token, progress)

    def heartbeat(self, job_id: UUID, lease_token: UUID, visibility_timeout: float) -> bool:
        held = self._runs_of(job_id).heartbeat(job_id, lease_token, visibility_timeout)
        if not held:  # lapsed, re-claimed or cancelled: no settle of this run will come
            self.place.release(job_id)
        return held

    # a worker's presence is in every alias: a lapsed run there is judged by it (SPEC LEASE-16)
    def renew_presence(self, presence: Presence, ttl: float) -> None:
        self.place.each_alias(lambda d: d.runs().renew_presence(presence, ttl), what="presence")

    def release_presence(self, worker_id: str) -> None:
        self.place.each_alias(lambda d: d.runs().release_presence(worker_id), what="presence")

    def stop_presence(self, worker_id: str) -> None:
        self.place.each_alias(lambda d: d.runs().stop_presence(worker_id), what="presence")

    def notify_on_ready(
        self,
        queues: Iterable[str],
        callback: Callable[[], None],
        on_control: Callable[[], None] | None = None,
        on_urgent: Callable[[str, int], None] | None = None,
    ) -> Notifier:
        # one listener per alias, each on the queues that live there (SPEC SHARD-05)
        return Listening(
            [
                self.place.drivers[alias]
                .runs()
                .notify_on_ready(names, callback, on_control, on_urgent)
                for alias, names in self._queues(queues).items()
            ]
        )


class RoutedSteps:
    """``StepStore`` over every alias: a run's records are in the alias it lives in."""

    def __init__(self, place: Placement) -> None:
        self.place = place

    @property
    def using(self) -> str:
        return self.place.primary.steps().using

    def alias(self, job_id: UUID) -> str:
        return self.place.owner(job_id).steps().alias(job_id)

    def now(self) -> datetime:
        return self.place.primary.steps().now()

    def list(self, run_id: UUID) -> list[StepRecord]:
        alias = self.place.run_alias(run_id)
        if alias is not None:
            return self.place.drivers[alias].steps().list(run_id)
        # an operator's read: a run's records are in one alias, so the others answer nothing
        found = self.place.gather(lambda driver: driver.steps().list(run_id))
        return [record for records in found for record in records]

    def put(self, record: StepRecord, *, job_id: UUID, lease_token: UUID) -> bool:
        steps = self.place.owner(job_id).steps()
        return steps.put(record, job_id=job_id, lease_token=lease_token)


__all__ = ["Listening", "RoutedRuns", "RoutedSteps"]
