"""Publishing claimed outbox rows to the job store, in stage order: a failure that may pass
stops the batch and hands the rest back; a row whose own values are refused is quarantined and
its batch-mates go on (SPEC OUTBOX-09, OUTBOX-10). The relay role and staging's after-commit path
both publish through here."""

from __future__ import annotations

import logging

from .. import log, metrics, redact
from ..drivers import bounds, failures
from ..drivers.contract import JobDriver, OutboxRow, OutboxStore
from ..errors import XJobsError, first_line
from ..text import storable

#: the library's refusals of a row's own values, raised while the store builds its job (a
#: dependency that does not exist, a job given itself to wait for): the same row is refused the
#: same way on every pass, like a value the server refuses (issue 40)
ROW_REFUSALS = frozenset(
    {
        "X_INPUT_INVALID",
        "X_PAYLOAD_TOO_LARGE",
        "X_VALUE_REFUSED",
        "X_DEPENDENCY_CYCLE",
        "X_DEPENDENCY_UNKNOWN",
    }
)


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

    Each row's job is built from its values first: a row that cannot be (its limit key cannot
    be rendered from its input, it waits for itself; anything raised) is quarantined before the
    batch goes to the store, so it never holds back the rows behind it (issue 40).
    """
    rows = _buildable(store, rows, token)
    if rows and store.publishes_together(driver):
        return _publish_together(store, driver, rows, token)[0]
    published = 0
    for index, row in enumerate(rows):
        try:
            _, marked = store.publish(driver, row, token)
        except Exception as error:
            if refuses_row(error):
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
        if not refuses_row(error):
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


def refuses_row(error: BaseException) -> bool:
    """Whether ``error`` refuses the row's own values, so that sending it again fails again:
    a value the server refused (SQLSTATE classes 22, 23, 54) or one of ``ROW_REFUSALS``."""
    if failures.is_permanent(error):
        return True
    return isinstance(error, XJobsError) and error.code in ROW_REFUSALS


def _buildable(store: OutboxStore, rows: list[OutboxRow], token: str) -> list[OutboxRow]:
    """The rows whose job request can be built and passes the enqueue's own checks
    (``bounds.check_derived``); every other row is quarantined with what building it raised."""
    kept = []
    for row in rows:
        try:
            bounds.check_derived(row.request(), what=f"outbox row {row.id}")
        except Exception as error:  # anything: a row that cannot be built never will be
            _quarantine(store, row, token, error)
        else:
            kept.append(row)
    return kept


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
    return failures.sqlstate(error) or getattr(error, "code", None) or type(error).__name__


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
        held = store.quarantine.hold(row.id, token, code, text)
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
