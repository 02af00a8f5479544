"""The relay role: publish committed outbox rows to the job store, each exactly once in the
normal case, in stage order, under a lease that a crashed relay cannot hold forever."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.db import connections

from .. import bounds, conf, log, metrics, redact
from ..drivers import get_driver, sql
from ..drivers.base import JobDriver
from ..errors import first_line
from ..ids import uuid7
from ..text import storable
from .store import OutboxRow, OutboxStore

_PRUNE_EVERY = 60.0


def publish_batch(store: OutboxStore, driver: JobDriver, rows: list[OutboxRow], token: str) -> int:
    """Publish ``rows`` in order, marking each after its enqueue (SPEC OUTBOX-09).

    A failure that may pass (a lost connection, a deadlock, anything without a SQLSTATE that
    says otherwise) stops the batch and hands the rest back at once, so no later row overtakes
    it (SPEC OUTBOX-10, SE-29, SE-35). A failure that refuses the row's own values (SQLSTATE
    classes 22, 23, 54) would fail every pass and hold back every row behind it: that row is
    quarantined, and the rest of the batch is published in the same pass (issue 24). Returns how
    many were published.

    On the jobs' own database the batch is one transaction (mark, inserts, collapses); when it
    is refused, the batch is split in halves until the culprit stands alone, each part
    published in order as its own transaction.
    """
    if rows and store.publishes_together(driver):
        return _publish_together(store, driver, rows, token)[0]
    published = 0
    for index, row in enumerate(rows):
        try:
            _, marked = store.publish(driver, row, token)
        except Exception as error:
            if sql.is_permanent(error):
                _quarantine(store, row, token, error)
                continue
            _failed(row, published, len(rows) - index, error)
            _release(store, rows[index:], token)
            break
        if marked:
            published += 1
        else:  # another relay took the row after our lease lapsed; its mark stands
            log.event(logging.INFO, "xjobs.outbox.mark_refused", id=row.id, token=token)
    return published


def _publish_together(
    store: OutboxStore, driver: JobDriver, rows: list[OutboxRow], token: str
) -> tuple[int, bool]:
    """(rows published, whether a failure that may pass stopped the batch)."""
    try:
        marked = store.publish_claimed(driver, rows, token)
    except Exception as error:
        if not sql.is_permanent(error):
            _failed(rows[0], 0, len(rows), error)
            _release(store, rows, token)
            return 0, True
        if len(rows) == 1:
            _quarantine(store, rows[0], token, error)
            return 0, False
        # a bisection: the halves in order, so an earlier row is never behind a later one
        middle = len(rows) // 2
        first, stopped = _publish_together(store, driver, rows[:middle], token)
        if stopped:
            _release(store, rows[middle:], token)
            return first, True
        second, stopped = _publish_together(store, driver, rows[middle:], token)
        return first + second, stopped
    for row in rows:
        if row.id not in marked:  # another relay took the row after our lease lapsed
            log.event(logging.INFO, "xjobs.outbox.mark_refused", id=row.id, token=token)
    return len(marked), False


def _failed(row: OutboxRow, published: int, remaining: int, error: BaseException) -> None:
    log.event(
        logging.WARNING,
        "xjobs.outbox.publish_failed",
        job=row.job,
        id=row.id,
        published=published,
        remaining=remaining,
        error=error,
    )


def error_code(error: BaseException) -> str:
    """What a quarantined row records as its code: the SQLSTATE, else the library's code, else
    the exception's class."""
    return sql.sqlstate(error) or getattr(error, "code", None) or type(error).__name__


def describe_row(row: OutboxRow) -> str:
    """The sizes of the values the live-key index holds, against their limits."""
    tenant = "none" if row.tenant_id is None else f"{bounds.size(row.tenant_id):,} bytes"
    return (
        f"idempotency key {bounds.size(row.idempotency_key):,} bytes "
        f"(limit {bounds.MAX_KEY_BYTES:,}), tenant_id {tenant} "
        f"(limit {bounds.MAX_TENANT_BYTES:,}), job name {bounds.size(row.job):,} bytes"
    )


def _quarantine(store: OutboxStore, row: OutboxRow, token: str, error: BaseException) -> None:
    code = error_code(error)
    # stored and shown in the admin and the CLI: a refusal's first line can quote the value
    # that broke, so the row's secrets and XJOBS["REDACT"] go first, then NUL and size (issue 26)
    secrets = redact.secrets_of(row.input)
    refusal = storable(redact.redact(first_line(error), secrets))
    text = f"{refusal} [{describe_row(row)}]"
    try:
        held = store.quarantine(row.id, token, code, text)
    except Exception as quarantine_error:  # the lease hands it back; the next pass tries again
        log.event(logging.WARNING, "xjobs.outbox.release_failed", error=quarantine_error)
        return
    if held:
        metrics.inc("xjobs_outbox_quarantined_total", code=code)
        log.event(
            logging.ERROR,
            "xjobs.outbox.quarantined",
            job=row.job,
            id=row.id,
            code=code,
            key_bytes=bounds.size(row.idempotency_key),
            tenant_bytes=None if row.tenant_id is None else bounds.size(row.tenant_id),
            error=refusal,
        )


def _release(store: OutboxStore, rows: list[OutboxRow], token: str) -> None:
    try:
        store.release([r.id for r in rows], token)
    except Exception as release_error:  # the lease will hand them back anyway
        log.event(logging.WARNING, "xjobs.outbox.release_failed", error=release_error)


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

    def _listen(self) -> Any:
        if self.database is None:
            return None
        from ..connections import listen_alias
        from ..drivers.postgres import Listener

        alias = listen_alias(self.database, "xjobs_outbox")  # None: poll (a pooler, logged)
        if alias is None:
            return None
        listener = Listener(alias, "xjobs_outbox", self._wake.set)
        listener.start()
        return listener

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
        _stage_pending_commits(alias)
        store = driver.outbox_store(alias)
        rows = store.claim(10_000, relay_id)
        published += publish_batch(store, driver, rows, relay_id)
    return published


def _stage_pending_commits(alias: str) -> None:
    """Run the stage callbacks left for the commit of the transaction still open on ``alias``;
    a savepoint rolled back has already taken its callbacks away."""
    from .stage import stage_at_commit

    connection = connections[alias]
    if not connection.in_atomic_block:
        return
    mine = [
        entry
        for entry in connection.run_on_commit
        if getattr(entry[1], "func", None) is stage_at_commit
    ]
    for entry in mine:
        connection.run_on_commit.remove(entry)
        entry[1]()
