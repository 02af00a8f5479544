"""``XJOBS["RETENTION"]`` applied by a worker: finished jobs deleted per state, at most hourly,
on a thread of its own so the claim loop never waits for it; expired events purged in the same
pass, so they go even where nothing publishes (SPEC EVT-04), and the rollup's minutes older than
``XJOBS["ROLLUP_RETENTION"]`` with them (rollup.py), the queue depth samples of the same
age (worker/depth.py), the state of limit keys idle for a day (SPEC LIMIT-18), so
``x_limit_keys`` holds the keys in use, not every tenant ever seen, and the operators' audit
records older than ``XJOBS["AUDIT_RETENTION"]`` (SPEC AUDIT-04).

With ``XJOBS["HISTORY"]`` on (issue 46), the same thread moves finished jobs to the history every
minute (HIST-02: bounded batches, ``HISTORY_GRACE`` after they finished, partitions made
``HISTORY_AHEAD`` days ahead first) and the hourly pass drops the history's days past
``RETENTION`` (HIST-03), a partition at a time."""

from __future__ import annotations

import logging
import threading
import time

from django.db import connections

from .. import conf, log, metrics
from ..drivers.contract import JobDriver
from ..limits.claims import KEY_SHOWN_FOR
from ..limits.worker import declared_limits

_PRUNE_EVERY = 3600.0
#: how often finished jobs are moved to the history, and the batches one pass moves at most
#: (a backlog, e.g. the rows a site had before turning HISTORY on, drains over several passes)
_MOVE_EVERY = 60.0
_MOVE_BATCHES = 100


class Retention:
    def __init__(self, driver: JobDriver) -> None:
        self.driver = driver
        #: set while a prune runs; the next one waits its turn
        self.running = threading.Event()
        self._last = -_PRUNE_EVERY
        self._last_move = -_MOVE_EVERY

    def maybe_prune(self) -> None:
        """Start a prune when one is due and none is running; else a move to the history."""
        settings = conf.get()
        now = time.monotonic()
        if self.running.is_set():
            return
        if now - self._last >= _PRUNE_EVERY:
            self._last = self._last_move = now
            self.running.set()
            threading.Thread(
                target=self._prune,
                args=(settings.retention, settings.rollup_retention, settings.audit_retention),
                name="xjobs-prune",
                daemon=True,
            ).start()
        elif settings.history and now - self._last_move >= _MOVE_EVERY:
            self._last_move = now
            self.running.set()
            threading.Thread(target=self._move, name="xjobs-history", daemon=True).start()

    def _move(self) -> None:
        try:
            self.move_to_history()
        except Exception as error:
            log.event(logging.WARNING, "xjobs.worker.history_failed", error=error)
        finally:
            self._done()

    def move_to_history(self) -> int:
        """HIST-02/06: the days ahead made, then the finished jobs past the grace moved."""
        settings = conf.get()
        history = self.driver.history()
        history.ensure_partitions(settings.history_ahead)
        moved = history.move_finished(grace=settings.history_grace, batches=_MOVE_BATCHES)
        if moved:
            metrics.inc("xjobs_history_moved_total", moved)
            log.event(logging.INFO, "xjobs.worker.history_moved", moved=moved)
        return moved

    def _prune(
        self, retention: dict[str, float], rollup_retention: float, audit_retention: float
    ) -> None:
        try:
            purged = self.driver.events().purge()
            if purged:
                log.event(logging.INFO, "xjobs.worker.events_purged", deleted=purged)
            rolled = self.driver.history().prune_rollups(rollup_retention)
            if rolled:
                log.event(logging.INFO, "xjobs.worker.rollup_pruned", deleted=rolled)
            sampled = self.driver.history().prune_depths(rollup_retention)
            if sampled:
                log.event(logging.INFO, "xjobs.worker.depth_pruned", deleted=sampled)
            audited = self.driver.jobs().audit().prune(audit_retention)
            if audited:
                log.event(logging.INFO, "xjobs.worker.audit_pruned", deleted=audited)
            windows = {j.name: j.window for j in declared_limits()[0] if j.window is not None}
            keys = self.driver.limits().prune_limit_keys(windows, idle_for=KEY_SHOWN_FOR)
            if keys:
                log.event(logging.INFO, "xjobs.worker.limit_keys_pruned", deleted=keys)
            if conf.get().history:
                self.move_to_history()
                for day in self.driver.history().drop_partitions(retention):
                    metrics.inc("xjobs_history_dropped_total", state=day.state)
                    log.event(logging.INFO, "xjobs.worker.history_dropped", partition=day.name)
            for state, older_than in retention.items():
                deleted = self.driver.jobs().prune(older_than=older_than, states=[state])[state]
                if deleted:
                    log.event(logging.INFO, "xjobs.worker.pruned", state=state, deleted=deleted)
        except Exception as error:
            log.event(logging.WARNING, "xjobs.worker.prune_failed", error=error)
        finally:
            self._done()

    def _done(self) -> None:
        if self.driver.database:
            connections[self.driver.database].close()
        self.running.clear()
