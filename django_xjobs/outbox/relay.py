"""The relay role: publish committed outbox rows to the job store, each exactly once in the
normal case, in stage order, under a lease that a crashed relay cannot hold forever."""

from __future__ import annotations

import logging
import threading
import time

from django.db import connections

from .. import conf, log
from ..drivers import get_driver
from ..drivers.contract import JobDriver, Notifier, OutboxStore
from ..ids import uuid7
from ..run.enqueue import run_pending_commits
from ..run.publish import publish_batch

_PRUNE_EVERY = 60.0


class Relay:
    """Moves committed ``x_outbox`` rows into the job store.

    ``tick()`` runs one pass; ``run()`` loops until ``stop()``, waking early when a commit
    staged rows. Passes never overlap, and ``stop()`` returns only after the pass in flight
    has marked its rows (SPEC OUTBOX-17/18, SE-33).
    """

    def __init__(
        self,
        *,
        store: OutboxStore,
        driver: JobDriver | None = None,
        batch_size: int | None = None,
        interval: float | None = None,
        relay_id: str | None = None,
        database: str | None = None,
    ) -> None:
        settings = conf.get()
        self.store = store
        self.driver = driver or get_driver()
        self.batch_size = batch_size or settings.relay_batch_size
        self.interval = interval or settings.relay_interval
        self.relay_id = relay_id or f"relay-{uuid7()}"  # SPEC OUTBOX-15
        self.database = database
        self.published = 0
        self._pass = threading.Lock()
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._last_prune = 0.0

    def tick(self) -> int:
        """One pass: claim a batch and publish it. Joins (waits out) a pass already running."""
        with self._pass:
            if self._stopping.is_set():
                return 0
            rows = self.store.claim(self.batch_size, self.relay_id)
            done = publish_batch(self.store, self.driver, rows, self.relay_id)
            self.published += done
            self._maybe_prune()
            return done

    def run(self) -> None:
        listener = self._listen()
        log.event(logging.INFO, "xjobs.relay.started", relay=self.relay_id, database=self.database)
        try:
            while not self._stopping.is_set():
                self._wake.clear()
                try:
                    done = self.tick()
                except Exception as error:  # SPEC OUTBOX-17, SE-34: log, and go on
                    log.event(
                        logging.ERROR, "xjobs.outbox.tick_failed", relay=self.relay_id, error=error
                    )
                    done = 0
                if done < self.batch_size:  # a full batch means more may be waiting
                    self._wake.wait(self.interval)
        finally:
            if listener is not None:
                listener.stop()
            connections.close_all()  # this thread's connections
            log.event(
                logging.INFO, "xjobs.relay.stopped", relay=self.relay_id, published=self.published
            )

    def stop(self) -> None:
        """Stop looping; return once the pass in flight has finished (idempotent)."""
        self._stopping.set()
        self._wake.set()
        with self._pass:
            pass

    def _listen(self) -> Notifier | None:
        if self.database is None:
            return None
        return self.store.notify_on_staged(self._wake.set)

    def _maybe_prune(self) -> None:
        if time.monotonic() - self._last_prune < _PRUNE_EVERY:
            return
        self._last_prune = time.monotonic()
        try:
            self.store.prune(conf.get().outbox_retention)
        except Exception as error:
            log.event(logging.WARNING, "xjobs.outbox.prune_failed", error=error)


def publish_visible(driver: JobDriver, relay_id: str) -> int:
    """Publish at once every outbox row this connection can see, as one relay pass would; the
    count published. Also what a transaction that never commits (a test's) staged: the stage
    callbacks a store outside the database (the memory driver's) left for that commit run
    first, as the commit would have run them. ``Worker.tick()`` and ``testing.relay_staged``
    start here, so a staged enqueue is visible to them under the id ``enqueue()`` returned."""
    published = 0
    for alias in conf.get().outbox_databases:
        run_pending_commits(alias)
        store = driver.outbox(alias)
        rows = store.claim(10_000, relay_id)
        published += publish_batch(store, driver, rows, relay_id)
    return published
