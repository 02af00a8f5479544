"""The scheduler role: on each tick, the leader dispatches every cron's due occurrences once."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db import connections

from .. import conf, log
from ..clock import Clock, system_clock
from ..declarations.cron import ONE_MICROSECOND, CronHandle, occurrences_between, registered_crons
from ..drivers import get_driver
from ..drivers.bounds import check_request
from ..drivers.contract import LEADER_KEY, JobDriver, NotLeaderError, SchedulerStore
from ..errors import XJobsError
from ..ids import uuid7, uuid7_for


@dataclass(frozen=True)
class Dispatch:
    """One occurrence of one cron, enqueued (a value a test can compare)."""

    cron: str
    occurrence: datetime
    catch_up: bool
    jobs: tuple[str, ...]


class Scheduler:
    """Fires each cron occurrence exactly once across a fleet of schedulers.

    * Leadership is an expiring lease row, taken (= renewed) at the start of every round
      (SPEC SCHED-09/14); only the leader dispatches.
    * Each cron has a durable, forward-only watermark; due occurrences are those in
      ``(watermark, now]`` (SCHED-02), dispatched by the cron's catch-up policy (SCHED-03..05).
    * On the database, an occurrence's jobs, the watermark advance and a leadership check
      commit in one transaction: a crash or a lost lease mid-dispatch re-dispatches nothing
      (DESIGN Q-07); keys scoped to the occurrence absorb the rest.
    """

    def __init__(
        self,
        *,
        driver: JobDriver | None = None,
        store: SchedulerStore | None = None,
        cron_names: list[str] | None = None,
        tick_interval: float = 1.0,
        leader_ttl: float = 30.0,
        holder: str | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self.driver = driver or get_driver()
        self.store = store or self.driver.scheduler()
        self.cron_names = cron_names
        self.tick_interval, self.leader_ttl = tick_interval, leader_ttl
        self.holder = holder or f"scheduler-{uuid7()}"
        self.clock = clock
        self.is_leader = False
        self.state = "idle"
        self._round: Future[list[Dispatch]] | None = None
        self._round_lock = threading.Lock()
        self._draining = threading.Event()
        #: the crons an operator paused, as the last round read them
        self.paused: frozenset[str] = frozenset()

    # --- rounds -----------------------------------------------------------------------------

    def tick(self) -> list[Dispatch]:
        """Run one round; a tick during a round joins it and returns its result (SCHED-10)."""
        with self._round_lock:
            joined = self._round
            if joined is None:
                mine: Future[list[Dispatch]] = Future()
                self._round = mine
        if joined is not None:
            return joined.result()
        try:
            result = self._run_round()
            mine.set_result(result)
            return result
        except BaseException as error:
            mine.set_exception(error)
            raise
        finally:
            with self._round_lock:
                self._round = None

    def _run_round(self) -> list[Dispatch]:
        if self._draining.is_set():
            return []  # SPEC SCHED-11: a round that starts during the drain does nothing
        if not self.store.acquire(LEADER_KEY, self.holder, self.leader_ttl):
            if self.is_leader:
                log.event(logging.WARNING, "xjobs.scheduler.leadership_lost", holder=self.holder)
            self.is_leader = False
            return []
        if not self.is_leader:
            log.event(logging.INFO, "xjobs.scheduler.leader", holder=self.holder)
        self.is_leader = True
        now = self.clock.now()
        self._read_paused()
        dispatched: list[Dispatch] = []
        for handle in self._crons():
            if self._draining.is_set():
                break  # checked again before each cron
            if handle.name in self.paused:
                # SPEC CRONCTL-02: the watermark stays, so resume catches up by the cron's rule
                continue
            try:
                dispatched += self._cron_round(handle, now)
            except NotLeaderError:
                log.event(logging.WARNING, "xjobs.scheduler.leadership_lost", holder=self.holder)
                self.is_leader = False
                break
            except Exception as error:  # one cron's failure never stops the others
                fields = (
                    {"code": error.code, "hint": error.hint}
                    if isinstance(error, XJobsError)
                    else {}
                )
                log.event(
                    logging.ERROR,
                    "xjobs.scheduler.cron_failed",
                    cron=handle.name,
                    error=error,
                    **fields,
                )
        return dispatched

    def _read_paused(self) -> None:
        """The paused crons, once a round: a failed read keeps the last set (SPEC CRONCTL-02)."""
        try:
            paused = self.store.paused_crons()
        except Exception as error:
            log.event(logging.WARNING, "xjobs.scheduler.tick_failed", error=error)
            return
        if paused != self.paused:
            log.event(
                logging.INFO,
                "xjobs.scheduler.paused_crons",
                holder=self.holder,
                paused=",".join(sorted(paused)) or "-",
            )
        self.paused = paused

    def _crons(self) -> list[CronHandle]:
        every = registered_crons()
        if self.cron_names is None:
            return every
        return [t for t in every if t.name in self.cron_names]

    def _cron_round(self, handle: CronHandle, now: datetime) -> list[Dispatch]:
        mark = self.store.watermark(handle.name)
        if mark is None:  # SPEC SCHED-01: arm, dispatch nothing
            self.store.mark_fired(handle.name, handle.next_occurrence(now) - ONE_MICROSECOND)
            return []
        due = occurrences_between(handle, mark, now, handle.max_catch_up)
        if not due:
            return []
        if handle.catch_up == "skip":  # SPEC SCHED-03: only the latest, flagged if it skipped any
            latest = _latest_due(handle, due, now)
            return [self._dispatch(handle, latest, catch_up=latest != due[0], mark=latest)]
        if handle.catch_up == "run-once":  # SPEC SCHED-04, SE-37: the earliest, then move to now
            first = due[0]
            missed = len(due) > 1 or handle.next_occurrence(first) <= now
            return [self._dispatch(handle, first, catch_up=missed, mark=max(first, now))]
        plan = []  # SPEC SCHED-05: every missed occurrence, each with its own payload
        for index, occurrence in enumerate(due):
            is_last = index == len(due) - 1 and handle.next_occurrence(occurrence) > now
            plan.append(self._dispatch(handle, occurrence, catch_up=not is_last, mark=occurrence))
        return plan

    def _dispatch(
        self, handle: CronHandle, occurrence: datetime, *, catch_up: bool, mark: datetime
    ) -> Dispatch:
        try:
            entries = handle.entries(occurrence)  # SPEC SCHED-07: from the occurrence
            requests = [
                _occurrence_request(handle, job, inputs, occurrence) for job, inputs in entries
            ]
        except Exception:
            self.store.mark_fired(handle.name, mark)  # skip this occurrence, once, loudly
            raise
        if conf.get().routing is not None:
            # SPEC SHARD-12: jobs routed to another database commit apart from the watermark; a
            # dispatch repeated after a crash between the two finds them by their ids
            requests = [
                request.with_id(uuid7_for(_ms(occurrence), handle.name, str(index)))
                for index, request in enumerate(requests)
            ]
        with self.store.transaction():
            results = [self.driver.jobs().enqueue(request) for request in requests]
            self.store.mark_fired(handle.name, mark)
            # on the database, a stalled leader's dispatch rolls back here (DESIGN Q-07)
            self.store.confirm(LEADER_KEY, self.holder)
        for (job, _), request, result in zip(entries, requests, results, strict=True):
            announce = getattr(job, "announce", None)  # a django.tasks task: task_enqueued
            if announce is not None and not result.deduped:
                announce(request, result.id)
        names = tuple(r.name for r in requests)
        log.event(
            logging.INFO,
            "xjobs.scheduler.dispatched",
            cron=handle.name,
            occurrence=occurrence.isoformat(),
            tz=handle.tz,
            catch_up=handle.catch_up,  # the policy; late says whether this one was caught up
            late=catch_up,
            jobs=",".join(names) or "-",
        )
        return Dispatch(handle.name, occurrence, catch_up, names)

    # --- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        """Round after round, ``tick_interval`` after each one ends, until ``stop()``."""
        # a stop() asked before this run (a SIGTERM while the process was starting) is kept:
        # the loop ends at once; the last run's stop was cleared when that run ended
        self.state = "running"
        log.event(logging.INFO, "xjobs.scheduler.started", holder=self.holder)
        try:
            while not self._draining.is_set():
                try:
                    self.tick()
                except Exception as error:  # SPEC SCHED-12
                    log.event(logging.ERROR, "xjobs.scheduler.tick_failed", error=error)
                self._draining.wait(self.tick_interval)
        finally:
            self._draining.clear()  # a stopped scheduler can run again
            if self.state == "running":
                self.state = "stopped"  # stopped before it began: stop() had nothing to do
            connections.close_all()
            log.event(logging.INFO, "xjobs.scheduler.stopped", holder=self.holder)

    def stop(self) -> None:
        """Drain: wait for the round in flight, then give up leadership (SPEC SCHED-11, SE-39)."""
        self.state = "draining"
        self._draining.set()
        with self._round_lock:
            current = self._round
        if current is not None:
            with contextlib.suppress(Exception):  # it logged its own failure
                current.result()
        try:
            if self.is_leader:
                self.store.release(LEADER_KEY, self.holder)
        finally:
            self.is_leader = False
            self.state = "stopped"

    def next_runs(self) -> dict[str, str]:
        """Each cron's next occurrence from now, ISO 8601 (for the manifest)."""
        now = self.clock.now()
        return {t.name: t.next_occurrence(now).isoformat() for t in self._crons()}


def last_fired(handle: CronHandle, mark: datetime | None) -> datetime | None:
    """The occurrence ``handle`` last fired, from its watermark; None while it never fired.

    Arming (SPEC SCHED-01) writes the instant just before the next occurrence, a time still
    ahead when the page is read: shown as "last fired" it read 19:19:59 at 19:15 (issue 23). A
    mark one microsecond before an occurrence is that arming mark; a firing leaves the
    occurrence itself, or the round's now.
    """
    if mark is None or handle.next_occurrence(mark) == mark + ONE_MICROSECOND:
        return None
    return mark


def _latest_due(handle: CronHandle, due: list[datetime], now: datetime) -> datetime:
    """The last occurrence at or before ``now``, even past a bounded walk."""
    latest = due[-1]
    for _ in range(1_000_000):
        nxt = handle.next_occurrence(latest)
        if nxt > now:
            return latest
        latest = nxt
    return latest


def _ms(occurrence: datetime) -> int:
    return int(occurrence.timestamp() * 1000)


def _occurrence_request(
    handle: CronHandle,
    job: Any,
    inputs: Mapping[str, object],
    occurrence: datetime,
    scope: str | None = None,
) -> Any:
    """The job's request with an occurrence-scoped key and run_at (SPEC SCHED-06); ``scope``
    replaces the occurrence's time in the key (a "run now": SPEC CRONCTL-04)."""
    request = job.build_request(inputs)
    scope = scope or str(int(occurrence.timestamp() * 1000))
    scoped = replace(
        request,
        idempotency_key=f"{handle.name}:{scope}:{request.idempotency_key}",
        run_at=occurrence,
        delay=None,
        tenant_id=None,
    )
    # the occurrence's prefix makes the key longer than the one the job's own checks passed
    check_request(scoped, what=f"cron {handle.name!r} job {request.name!r}")
    return scoped
