"""The operator's hands on the transactional outbox: its backlog per database, and retry or
discard of a quarantined row."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from .. import conf
from ..drivers import get_driver
from ..drivers.contract import OutboxStore, QuarantinedRow
from ..drivers.reading import read_driver, reading_primary
from ..errors import (
    JobNotFoundError,
)
from . import audit
from .answers import OutboxAction, OutboxDatabase, OutboxReport, QuarantinedEntry
from .shared import check_by, iso, job_id_of


def inspect_outbox(limit: int = 100) -> OutboxReport:
    """Staged rows not yet published, per outbox database, the oldest one's age, and the rows in
    quarantine (issue 24: their publish failed for a reason that fails the same way again, so
    the relay leaves them for an operator; ``pending`` leaves them out)::

        inspect_outbox()  # {"pending": 3, "oldest_pending_seconds": 0.4, "quarantined": 1,
                          #  "entries": [{"id": ..., "error_code": "54000", ...}], "databases": {...}}

    A pending count that only grows means no relay is running (``manage.py xjobs_relay``).
    ``entries`` holds at most ``limit`` quarantined rows per database, oldest quarantine first:
    ``id`` (the job id its enqueue returned), ``database``, ``job``, ``queue``, ``tenant_id``,
    ``staged_at``, ``quarantined_at``, ``error_code`` (the SQLSTATE, else our code),
    ``error``, ``key_bytes``, ``tenant_bytes``, ``name_bytes`` and ``key_start`` (the
    key's first 80 characters).
    """
    driver, read = get_driver(), read_driver()[0]
    settings = conf.get()
    databases: dict[str, OutboxDatabase] = {}
    entries: list[QuarantinedEntry] = []
    for alias in settings.outbox_databases:
        # the jobs database's outbox read where its other reads are (SPEC READ-07); another
        # outbox database is its own
        store = read.outbox() if alias == settings.database else driver.outbox(alias)
        count, oldest = store.pending()
        quarantined = store.quarantine.count()
        databases[alias] = OutboxDatabase(
            pending=count, oldest_pending_seconds=oldest, quarantined=quarantined
        )
        if quarantined:
            entries.extend(_quarantined(alias, row) for row in store.quarantine.rows(limit))
    return OutboxReport(
        pending=sum(d.pending for d in databases.values()),
        oldest_pending_seconds=max(
            (d.oldest_pending_seconds for d in databases.values()), default=0.0
        ),
        quarantined=sum(d.quarantined for d in databases.values()),
        entries=entries,
        databases=databases,
    )


def _quarantined(alias: str, row: QuarantinedRow) -> QuarantinedEntry:
    return QuarantinedEntry(
        id=str(row.id),
        database=alias,
        job=row.job,
        queue=row.queue,
        tenant_id=row.tenant_id,
        staged_at=iso(row.staged_at),
        quarantined_at=iso(row.quarantined_at),
        error_code=row.error_code,
        error=row.error,
        key_bytes=row.key_bytes,
        tenant_bytes=row.tenant_bytes,
        name_bytes=row.name_bytes,
        key_start=row.idempotency_key[:80],
    )


def retry_outbox_entry(entry_id: UUID | str, *, by: str | None = None) -> OutboxAction:
    """Hand a quarantined outbox row back to the relay, whose next pass publishes it (or
    quarantines it again, if what refused it was not fixed); returns ``inspect_outbox()``.
    No quarantined row with this id raises ``JobNotFoundError``::

        >>> retry_outbox_entry("0197a3c2-...")["quarantined"]
        0
    """
    check_by(by)
    wanted = _outbox_act(entry_id, lambda store, wanted: store.quarantine.retry(wanted))
    audit.record("retry_outbox_entry", by=by, target=str(wanted))
    with reading_primary():  # the answer after its own write (SPEC READ-01)
        return inspect_outbox()


def discard_outbox_entry(entry_id: UUID | str, *, by: str | None = None) -> OutboxAction:
    """Delete a quarantined outbox row: it never becomes a job, and its id names nothing;
    returns ``inspect_outbox()``. No quarantined row with this id raises ``JobNotFoundError``::

        >>> discard_outbox_entry("0197a3c2-...")["quarantined"]
        0
    """
    check_by(by)
    wanted = _outbox_act(entry_id, lambda store, wanted: store.quarantine.discard(wanted))
    audit.record("discard_outbox_entry", by=by, target=str(wanted))
    with reading_primary():  # the answer after its own write (SPEC READ-01)
        return inspect_outbox()


def _outbox_act(entry_id: UUID | str, act: Callable[[OutboxStore, UUID], bool]) -> UUID:
    """``act(store, id)`` on each outbox database until one holds the quarantined row."""
    wanted = job_id_of(entry_id)
    driver = get_driver()
    for alias in conf.get().outbox_databases:
        if act(driver.outbox(alias), wanted):
            return wanted
    raise JobNotFoundError(
        f"no quarantined outbox row has id {wanted}",
        hint="list them: python manage.py xjobs outbox",
    )
