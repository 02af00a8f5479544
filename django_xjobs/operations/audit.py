"""The audit trail of operator actions (issue 45): every action of the operator API — on one
job, on a filter's jobs, on a queue, a cron, a batch or an outbox row — records who did it,
when, the verb, what it acted on, the reason and the counts, whichever surface called it (the
admin names its user, the command line its login and host, an API call its ``by=``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from .. import conf, metrics, redact
from ..drivers import get_driver
from ..drivers.contract import OperatorRecord
from ..durations import Duration, parse_duration
from ..errors import InvariantError
from ..ids import uuid7
from ..text import check_label, storable
from .answers import AuditEntry
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
) -> None:
    """Keep one action in ``x_operator_actions`` (SPEC AUDIT-01) and count it in
    ``xjobs_operator_actions_total{verb}``. The filter's ``input`` values go through the
    redaction rules (``XJOBS["REDACT_KEYS"]``) and the reason through ``XJOBS["REDACT"]``
    before they are stored (SPEC AUDIT-03)."""
    shown = None
    if filter is not None:
        shown = dict(filter)
        if shown.get("input") is not None:
            shown["input"] = redact.mask(shown["input"])
    matched, changed, skipped = counts if counts is not None else (None, None, None)
    get_driver().jobs().audit().record(
        OperatorRecord(
            id=uuid7(),
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
        )
    )
    metrics.inc("xjobs_operator_actions_total", verb=verb)


def inspect_audit(*, limit: int = 100, verb: str | None = None) -> list[AuditEntry]:
    """The audit trail, newest first (SPEC AUDIT-02): who did what, when, to which job or
    filter, why, and what it changed::

        >>> [(a["actor"], a["verb"], a["changed"]) for a in inspect_audit(limit=2)]
        [('cli:alice@web-1', 'retry_jobs', 4210), ('admin:bob', 'cancel', None)]
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvariantError(f"limit={limit!r} must be a positive integer")
    check_label(verb, "verb")
    return [
        AuditEntry(
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
        )
        for r in get_driver().jobs().audit().recent(limit=limit, verb=verb)
    ]


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
