"""The audit trail of operator actions (issue 45): every action of the operator API — on one
job, on a filter's jobs, on a queue, a cron, a batch or an outbox row — records who did it,
when, the verb, what it acted on, the reason and the counts, whichever surface called it (the
admin names its user, the command line its login and host, an API call its ``by=``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from uuid import UUID

from .. import conf, metrics, redact
from ..drivers import get_driver
from ..drivers.contract import OperatorRecord
from ..drivers.reading import read_driver
from ..durations import Duration, parse_duration
from ..errors import AuditRecordNotFoundError, InvariantError
from ..ids import uuid7
from ..text import check_label, storable
from .answers import AuditEntry
from .filters import shown_filter
from .shared import iso

#: who an API call was made by when it does not say (``by=None``)
API_ACTOR = "api"
_EPOCH = datetime.fromtimestamp(0).astimezone()


def record(
    verb: str,
    *,
    by: str | None,
    job_id: object = None,
    target: str | None = None,
    filter: Mapping[str, object] | None = None,
    reason: str | None = None,
    counts: tuple[int, int, int] | None = None,
    status: str | None = None,
    expected: int | None = None,
) -> UUID:
    """Keep one action in ``x_operator_actions`` (SPEC AUDIT-01), count it in
    ``xjobs_operator_actions_total{verb}`` and answer its id. A bulk action a background job
    does is recorded ``status="queued"`` with the ``expected`` count, and its job reports its
    progress to the same row (SPEC BULK-15). The filter's ``input`` values go through the
    redaction rules (``XJOBS["REDACT_KEYS"]``) and the reason through ``XJOBS["REDACT"]``
    before they are stored (SPEC AUDIT-03)."""
    shown = None if filter is None else shown_filter(filter)
    matched, changed, skipped = counts if counts is not None else (None, None, None)
    record_id = uuid7()
    get_driver().jobs().audit().record(
        OperatorRecord(
            id=record_id,
            at=_EPOCH,  # the store's clock sets it
            actor=by or API_ACTOR,
            verb=verb,
            job_id=None if job_id is None else str(job_id),
            target=target,
            filter=shown,
            reason=storable(redact.redact(reason)) if reason else None,
            matched=matched,
            changed=changed,
            skipped=skipped,
            status=status,
            expected=expected,
        )
    )
    metrics.inc("xjobs_operator_actions_total", verb=verb)
    return record_id


def inspect_audit(*, limit: int = 100, verb: str | None = None) -> list[AuditEntry]:
    """The audit trail, newest first (SPEC AUDIT-02): who did what, when, to which job or
    filter, why, and what it changed::

        >>> [(a["actor"], a["verb"], a["changed"]) for a in inspect_audit(limit=2)]
        [('cli:alice@web-1', 'retry_jobs', 4210), ('admin:bob', 'cancel', None)]
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvariantError(f"limit={limit!r} must be a positive integer")
    check_label(verb, "verb")
    rows = read_driver()[0].jobs().audit().recent(limit=limit, verb=verb)  # SPEC READ-10
    return [entry(r) for r in rows]


def inspect_action(action_id: str | UUID) -> AuditEntry | None:
    """One operator action by its id, or None: a background bulk action's progress — its
    ``status`` (queued, running, done, failed), ``matched``/``changed``/``skipped`` so far of
    the ``expected`` count, ``started_at``/``finished_at`` and the ``error`` of a failed run
    (SPEC BULK-15)::

        >>> a = inspect_action("0193a1c2-...")
        >>> (a["status"], a["changed"], a["expected"])
        ('running', 12000, 50000)
    """
    try:
        wanted = action_id if isinstance(action_id, UUID) else UUID(str(action_id))
    except ValueError:
        raise AuditRecordNotFoundError(f"{action_id!r} is not an audit record's id") from None
    driver = read_driver()[0]  # SPEC READ-10
    found = driver.jobs().audit().get(wanted)
    if found is None and driver is not get_driver():
        # an action just recorded (its id was just returned) the read database has not yet
        found = get_driver().jobs().audit().get(wanted)
    return None if found is None else entry(found)


def entry(r: OperatorRecord) -> AuditEntry:
    """A stored record as the trail's answer."""
    return AuditEntry(
        id=str(r.id),
        at=iso(r.at),
        actor=r.actor,
        verb=r.verb,
        job_id=r.job_id,
        target=r.target,
        filter=None if r.filter is None else dict(r.filter),
        reason=r.reason,
        matched=r.matched,
        changed=r.changed,
        skipped=r.skipped,
        status=r.status,
        expected=r.expected,
        started_at=iso(r.started_at) if r.started_at else None,
        finished_at=iso(r.finished_at) if r.finished_at else None,
        error=r.error,
        by_job=r.by_job,
    )


def prune_audit(older_than: Duration | None = None) -> int:
    """Delete the audit records older than ``older_than`` (default
    ``XJOBS["AUDIT_RETENTION"]``, 90 days); how many went (SPEC AUDIT-04). Workers run it with
    their hourly retention pass, and ``xjobs prune`` with its own::

        prune_audit()  # 12
    """
    seconds = (
        conf.get().audit_retention
        if older_than is None
        else parse_duration(older_than, field="older_than")
    )
    return get_driver().jobs().audit().prune(seconds)
