"""A bulk action too large for one request (issue 45): the admin's "retry / cancel / delete /
requeue all N matching" acts at once on a match of at most one batch, and otherwise hands the
filter to a job the library declares, ``django_xjobs.bulk_action`` on queue ``xjobs``, and
returns; the job walks the batches as the verbs do, and writes its progress — matched, changed,
skipped so far, started, finished, the error of a failed run — to the action's audit record,
which the admin's audit page and ``xjobs audit ID`` read (SPEC BULK-14, BULK-15).

The queue is its own so that an incident's backlog (or a pause) of ``default`` does not hold the
operator's action up; every worker started without ``--queues`` works it (a worker works every
queue a declared job names). Until a worker works it the action waits, recorded ``queued``, and
nothing is changed: the same action from the command line (``xjobs retry --state dead ...``)
is done in its own process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from .. import redact
from ..declarations.job import job
from ..drivers import get_driver
from ..drivers.contract import BulkVerb, JobFilter
from ..errors import InvariantError, describe_error
from ..retry import Retry
from ..text import storable
from . import audit, bulk
from .answers import Answer, BulkResult
from .filters import job_filter

#: the queue the library's own bulk job runs on
QUEUE = "xjobs"
#: the job that does a bulk action larger than a batch
JOB_NAME = "django_xjobs.bulk_action"
VERBS: tuple[BulkVerb, ...] = ("retry", "cancel", "delete", "requeue")
#: each verb by its name (what a form or a job's input gives)
NAMED: dict[str, BulkVerb] = {verb: verb for verb in VERBS}


@dataclass(frozen=True, eq=False)
class BulkStarted(Answer):
    """What ``act_on_matching`` did: the audit record to follow (``audit_id``), how many jobs
    matched when it was asked, and either the ``result`` of an action done at once or the
    ``job_id`` of the background job doing it (``background``)."""

    verb: str
    filter: dict[str, Any]
    matched: int
    audit_id: str | None
    background: bool
    job_id: str | None
    result: BulkResult | None


def act_on_matching(
    verb: str,
    filter: JobFilter | Mapping[str, object] | None = None,
    *,
    reason: str | None = None,
    queue: str | None = None,
    force: bool = False,
    by: str | None = None,
) -> BulkStarted:
    """Do bulk ``verb`` (retry, cancel, delete, requeue) to every job ``filter`` admits: at once
    when at most one batch (1,000) matches, else by the ``django_xjobs.bulk_action`` job on
    queue ``xjobs``, answering at once with the audit record its progress is written to (SPEC
    BULK-14). Every check of the verb runs first (an unknown target queue, a delete of live
    jobs): a refused action queues nothing::

        >>> started = act_on_matching("retry", state="dead", queue="emails")
        >>> started["background"], started["matched"]
        (True, 50000)
    """
    checked = _verb(verb)
    where = job_filter(filter)
    looked = _run(checked, where, dry_run=True, reason=reason, queue=queue, force=force, by=by)
    shown = where.to_json()
    if looked.matched <= bulk.BATCH:
        done = _run(checked, where, dry_run=False, reason=reason, queue=queue, force=force, by=by)
        return BulkStarted(verb, shown, done.matched, done.audit_id, False, None, done)
    record_id = audit.record(
        f"{verb}_jobs",
        by=by,
        target=queue,
        filter=shown,
        reason=reason,
        counts=(0, 0, 0),
        status="queued",
        expected=looked.matched,
    )
    # The filter goes as given: the job must match the real values. Its input is a job's
    # input like any other: sealed under ENCRYPTION_KEYS, shown masked by REDACT_KEYS (SPEC
    # REDACT-05/06). The reason goes as the audit keeps it, through XJOBS["REDACT"]: an input
    # is shown masked by its keys only, and the cancel stores it through the same scrub.
    kept = storable(redact.redact(reason)) if reason else reason
    queued = bulk_action.enqueue(
        action=str(record_id), verb=verb, filter=shown, reason=kept, queue=queue, force=force
    )
    get_driver().jobs().audit().progress(
        record_id, status="queued", counts=(0, 0, 0), by_job=str(queued.id)
    )
    return BulkStarted(verb, shown, looked.matched, str(record_id), True, str(queued.id), None)


def _verb(verb: object) -> BulkVerb:
    found = NAMED.get(verb) if isinstance(verb, str) else None
    if found is None:
        raise InvariantError(f"verb={verb!r} is not a bulk verb", hint=f"one of {', '.join(VERBS)}")
    return found


def _run(
    verb: BulkVerb,
    where: JobFilter,
    *,
    dry_run: bool,
    reason: str | None,
    queue: str | None,
    force: bool,
    by: str | None,
) -> BulkResult:
    if verb == "retry":
        return bulk.retry_jobs(where, dry_run=dry_run, force=force, by=by)
    if verb == "cancel":
        return bulk.cancel_jobs(where, reason=reason, dry_run=dry_run, by=by)
    if verb == "delete":
        return bulk.delete_jobs(where, dry_run=dry_run, by=by)
    if queue is None:
        raise InvariantError(
            "requeue needs the queue to move the jobs to", hint='queue="emails-slow"'
        )
    return bulk.requeue_jobs(where, queue=queue, dry_run=dry_run, by=by)


def resume(
    action: str,
    verb: str,
    filter: Mapping[str, object],
    *,
    reason: str | None = None,
    queue: str | None = None,
    force: bool = False,
) -> tuple[int, int, int]:
    """The background job's work: every batch of the filter acted on, the audit record
    ``action`` told after each; a run after a failed one adds to the counts the failed one
    left (the jobs it changed no longer match, and the batches are fenced: nothing is done
    twice). Answers (matched, changed, skipped) in all (SPEC BULK-15)."""
    store = get_driver().jobs().audit()
    record_id = UUID(action)
    row = store.get(record_id)
    matched = (row.matched or 0) if row else 0
    changed = (row.changed or 0) if row else 0
    counts = [matched, changed, 0]

    def report(status: str, error: str | None = None) -> None:
        store.progress(
            record_id,
            status=status,
            counts=(counts[0], counts[1], counts[0] - counts[1]),
            error=error,
        )

    where = job_filter(filter)
    checked = _verb(verb)
    planned = bulk.action_for(
        checked, where, bulk.verb_states(checked, force=force), reason=reason, queue=queue
    )
    report("running")
    try:
        if planned is not None:
            bulk.walk(get_driver(), planned, where, counts, lambda: report("running"))
    except Exception as error:
        # as every text a run produces: the run's secrets (its filter's, under REDACT_KEYS)
        # and XJOBS["REDACT"] scrubbed before the audit record keeps it (SPEC REDACT-05)
        report("failed", storable(redact.redact(describe_error(error))))
        raise
    report("done")
    return counts[0], counts[1], counts[0] - counts[1]


@job(
    name=JOB_NAME,
    idempotency_key="{action}",
    queue=QUEUE,
    retry=Retry(attempts=5, delay="10s", max_delay="5m"),
)
def bulk_action(
    ctx: object,
    action: str,
    verb: str,
    filter: dict[str, object],
    reason: str | None = None,
    queue: str | None = None,
    force: bool = False,
) -> dict[str, int]:
    """A bulk action larger than a batch, from the admin (``act_on_matching``): its input is
    the action's audit record, the verb and its filter; retried after a failure, it goes on
    where the failed run stopped."""
    matched, changed, skipped = resume(
        action, verb, filter, reason=reason, queue=queue, force=force
    )
    return {"matched": matched, "changed": changed, "skipped": skipped}
