"""The operator's verbs on every job a filter admits (issue 45): retry, cancel, delete and
requeue by filter, done by the driver a batch at a time, each batch one fenced statement, so an
incident's 50,000 dead jobs are retried in one call without a lock held on more than a batch.

Each verb does to each job what its single-job verb does (``retry_job``, ``cancel_job``, the
retention's delete) and answers a ``BulkResult``: how many jobs matched, how many it changed,
how many it skipped because they moved on meanwhile. ``dry_run=True`` counts and shows a
sample, and changes nothing. Every call that acts is recorded in the audit trail.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from uuid import UUID

from .. import conf, redact
from ..declarations import registry
from ..drivers import get_driver
from ..drivers.contract import BulkAction, BulkVerb, JobDriver, JobFilter
from ..errors import BulkDeleteLiveError, InvariantError, QueueUnknownError
from ..states import FINISHED_STATES, LIVE_STATES, WAITING_STATES
from ..steps.children import cancel_children
from ..text import check_label, did_you_mean, storable
from . import audit
from .answers import BulkResult, JobSummary
from .filters import job_filter
from .jobs import summary_of

#: ids a batch names: one statement locks at most this many rows (SPEC BULK-03)
BATCH = 1000
#: ids one read of the walk names (SPEC BULK-20): a read locks nothing, and each read scans
#: what the filter still admits (past the last id only as a filter, when the plan reads an
#: index without the id), so twenty batches a read scan a twentieth as often; the read's sort of
#: 20,000 ids keeps within PostgreSQL's default work_mem (4 MB)
WALK = 20 * BATCH
#: the jobs a dry run shows
SAMPLE = 5
#: the stored states each verb acts on (a filter narrows them, never widens them)
VERB_STATES: dict[str, tuple[str, ...]] = {
    "retry": ("dead", "failed"),
    "cancel": LIVE_STATES,
    "delete": FINISHED_STATES,
    "requeue": ("ready", "delayed", "dead", "failed"),
}


def retry_jobs(
    filter: JobFilter | Mapping[str, object] | None = None,
    *,
    dry_run: bool = False,
    force: bool = False,
    by: str | None = None,
    **fields: object,
) -> BulkResult:
    """Run every dead or failed job the filter admits again, as ``retry_job`` does one: ready
    now, attempt 0, its steps replayed (SPEC BULK-06). ``force=True`` takes cancelled jobs too.
    A job whose idempotency key a live job holds is skipped::

        >>> retry_jobs(state="dead", queue="emails", error_code="X_TERMINAL")["changed"]
        4210
        >>> retry_jobs(input={"order_id": 4711}, dry_run=True)["matched"]
        3
    """
    states = verb_states("retry", force=force)
    return _bulk("retry", job_filter(filter, **fields), states, dry_run=dry_run, by=by)


def cancel_jobs(
    filter: JobFilter | Mapping[str, object] | None = None,
    *,
    reason: str | None = None,
    dry_run: bool = False,
    by: str | None = None,
    **fields: object,
) -> BulkResult:
    """Cancel every live job the filter admits, as ``cancel_job`` does one (SPEC BULK-05): a
    running one stops at its next heartbeat (its lease token is cleared, so nothing it settles
    lands), a parked parent's children are cancelled too, ``reason`` becomes ``last_error``::

        >>> cancel_jobs(queue="partner-sync", tenant_id="acme", reason="partner down")["changed"]
        118
    """
    if reason is not None and not isinstance(reason, str):
        raise InvariantError(f"reason={reason!r} must be a string or None")
    where = job_filter(filter, **fields)
    return _bulk("cancel", where, LIVE_STATES, dry_run=dry_run, by=by, reason=reason)


def delete_jobs(
    filter: JobFilter | Mapping[str, object] | None = None,
    *,
    dry_run: bool = False,
    by: str | None = None,
    **fields: object,
) -> BulkResult:
    """Delete every finished job the filter admits, with its steps (SPEC BULK-08). The filter
    must name finished states only: one that admits a live job (no ``state``, or ``ready``,
    ``running``, ...) raises ``BulkDeleteLiveError``, and nothing is deleted::

        >>> delete_jobs(state=["dead", "failed"], name="shop.jobs.old_report")["changed"]
        950
    """
    where = job_filter(filter, **fields)
    live = [s for s in where.state if s not in FINISHED_STATES]
    if not where.state or live:
        admitted = ", ".join(live) if live else "every state"
        raise BulkDeleteLiveError(
            f"delete_jobs deletes finished jobs only, and this filter admits {admitted}",
            hint=f"name the states to delete: state=[...] of {', '.join(FINISHED_STATES)}",
        )
    return _bulk("delete", where, FINISHED_STATES, dry_run=dry_run, by=by)


def requeue_jobs(
    filter: JobFilter | Mapping[str, object] | None = None,
    *,
    queue: str,
    dry_run: bool = False,
    by: str | None = None,
    **fields: object,
) -> BulkResult:
    """Move every job the filter admits to queue ``queue`` (SPEC BULK-07): a waiting one keeps
    its run_at, priority and attempt there; a dead or failed one runs again there, as
    ``retry_jobs`` runs it. A queue that is not ``default``, not declared by a job nor listed
    in ``XJOBS["QUEUES"]``, not set by an operator (paused, capped) and holds no job raises
    ``QueueUnknownError`` (``queue=`` is the target: the filter's own queue goes in the
    filter)::

        >>> requeue_jobs({"queue": "emails", "state": "ready"}, queue="emails-slow")["changed"]
        1200
    """
    conf.check_queue_name(queue, error=InvariantError)
    where = job_filter(filter, **fields)
    driver = get_driver()
    if queue not in _known_queues(driver):
        known = sorted(_known_queues(driver))
        guess = did_you_mean(queue, known)
        raise QueueUnknownError(
            f"requeue_jobs to queue {queue!r}: no job declares it, no setting lists it, no "
            "operator set it and no job is in it, so no worker would take the jobs",
            hint=f"{guess + ' ' if guess else ''}known queues: {', '.join(known)}",
        )
    return _bulk("requeue", where, VERB_STATES["requeue"], dry_run=dry_run, by=by, queue=queue)


def preview(verb: BulkVerb, where: JobFilter, *, force: bool = False) -> BulkResult:
    """A dry run of ``verb`` that needs none of its other arguments (``requeue``'s target
    queue): the count and sample the admin's confirmation page shows (SPEC BULK-16)."""
    if verb == "delete":  # refuses a filter that admits live jobs, as the verb does
        return delete_jobs(where, dry_run=True)
    return _bulk(verb, where, verb_states(verb, force=force), dry_run=True, by=None)


def _known_queues(driver: JobDriver) -> set[str]:
    """What ``requeue_jobs`` may move jobs to: a queue the code or settings declare, one an
    operator set (paused, capped), or one that holds jobs (SPEC BULK-09)."""
    known = registry.known_queues(conf.get().queues)
    known |= {state.queue for state in driver.limits().queue_controls()}
    known |= {stats.queue for stats in driver.reads().stats()}
    return known


def verb_states(verb: BulkVerb, *, force: bool = False) -> tuple[str, ...]:
    """The stored states ``verb`` acts on (``retry`` with ``force``: cancelled ones too)."""
    return VERB_STATES[verb] + (("cancelled",) if force and verb == "retry" else ())


def action_for(
    verb: BulkVerb,
    where: JobFilter,
    states: Sequence[str],
    *,
    reason: str | None = None,
    queue: str | None = None,
) -> BulkAction | None:
    """What ``verb`` does to each job ``where`` admits, fenced on the verb's states the
    filter's states allow; None when they allow none."""
    wanted = _stored(where.state)
    acting = tuple(s for s in states if not wanted or s in wanted)
    if not acting:
        return None
    # stored as last_error: through XJOBS["REDACT"], then the one sanitiser, as cancel_job
    stored_reason = storable(redact.redact(reason)) if reason else None
    return BulkAction(verb=verb, states=acting, reason=stored_reason, queue=queue)


def _bulk(
    verb: BulkVerb,
    where: JobFilter,
    states: Sequence[str],
    *,
    dry_run: bool,
    by: str | None,
    reason: str | None = None,
    queue: str | None = None,
) -> BulkResult:
    if by is not None and not isinstance(by, str):
        raise InvariantError(f"by={by!r} must be a string or None", hint='e.g. "ops:alice"')
    check_label(by, "by")
    driver = get_driver()
    store = driver.jobs().bulk()
    action = action_for(verb, where, states, reason=reason, queue=queue)
    shown = where.to_json()
    if action is None:
        note = (
            f"{verb} acts on {', '.join(states)} jobs, and the filter's states "
            f"({', '.join(where.state)}) admit none: nothing to do"
        )
        return BulkResult(verb, shown, bool(dry_run), 0, 0, 0, 0, [], note)
    if dry_run:  # SPEC BULK-02: counted and shown, nothing changed, nothing recorded
        matched = store.count(where, states=action.states)
        ids = store.match(where, states=action.states, after=None, limit=SAMPLE)
        sample = _sample(driver, ids)
        return BulkResult(verb, shown, True, matched, 0, 0, 0, sample, _nothing(matched))
    counts = [0, 0, 0]  # matched, changed, batches: what the batches that committed did

    def record() -> UUID:
        matched, changed, _ = counts
        return audit.record(
            f"{verb}_jobs",
            by=by,
            target=queue,
            filter=shown,
            reason=reason,
            counts=(matched, changed, matched - changed),
        )

    try:
        walk(driver, action, where, counts)
    except BaseException:
        # a batch failed (the database went away, the call was interrupted): the batches
        # before it committed, and the trail keeps what they did when it can be written
        with contextlib.suppress(Exception):
            record()
        raise
    record_id = record()
    matched, changed, batches = counts
    skipped = matched - changed
    return BulkResult(
        verb,
        shown,
        False,
        matched,
        changed,
        skipped,
        batches,
        [],
        _nothing(matched),
        str(record_id),
    )


def walk(
    driver: JobDriver,
    action: BulkAction,
    where: JobFilter,
    counts: list[int],
    on_batch: Callable[[], None] | None = None,
) -> None:
    """Each batch of ids in turn, acted on; ``counts`` (matched, changed, batches) kept as the
    batches commit, and ``on_batch`` told after each (a background action's progress)."""
    store = driver.jobs().bulk()
    after: UUID | None = None
    while True:  # SPEC BULK-03, BULK-20: ids read a walk's worth at a time, from where the
        # last read stopped, and acted on a batch per statement
        ids = store.match(where, states=action.states, after=after, limit=WALK)
        for start in range(0, len(ids), BATCH):
            batch = ids[start : start + BATCH]
            done, parked = store.act(action, batch, where)
            counts[0], counts[1] = counts[0] + len(batch), counts[1] + done
            counts[2] += 1
            for parent in parked:  # SPEC CHILD-06, as cancel_job does it
                row = driver.reads().get_job(parent)
                if row is not None:
                    cancel_children(driver, row.id, row.run_id)
            if on_batch is not None:  # a background action's progress, a batch at a time
                on_batch()
        if len(ids) < WALK:
            return
        after = ids[-1]


def _stored(shown: Sequence[str]) -> set[str]:
    """The stored states the shown ones may be held in: a waiting row is stored ready or
    delayed, and shown by its run_at."""
    stored = set(shown)
    if stored & set(WAITING_STATES):
        stored |= set(WAITING_STATES)
    return stored


def _nothing(matched: int) -> str | None:
    return "no job matches the filter: nothing to do" if matched == 0 else None


def _sample(driver: JobDriver, ids: Sequence[UUID]) -> list[JobSummary]:
    rows = [row for i in ids if (row := driver.reads().get_job(i)) is not None]
    now = driver.steps().now() if rows else None
    return [summary_of(row, now) for row in rows]
