"""The operator's calls on jobs: inspect one (its step trace, failed attempts and dependencies),
list them, cancel, retry, run now, the dead letters, and prune the finished ones."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol
from uuid import UUID

from .. import conf, crypt, log, metrics, redact
from ..declarations import registry
from ..drivers import get_driver
from ..drivers.contract import JobDriver, JobSnapshot, StepRecord
from ..drivers.reading import read_driver
from ..durations import Duration, parse_duration
from ..errors import InvariantError
from ..history import FailedAttempt
from ..payload import JSONValue
from ..retry import retry_schedule
from ..states import FINISHED_STATES, WAITING_STATES, shown_state
from ..steps.children import cancel_children
from ..text import check_name, storable
from . import audit
from .answers import (
    AttemptTrace,
    DeadLetter,
    Dependencies,
    JobSummary,
    JobTrace,
    StepTrace,
)
from .backfills import backfill_section
from .filters import job_filter
from .shared import check_by, iso, job_id_of

RETRY_COMMAND = "python manage.py xjobs retry {id}"


def inspect_job(job_id: UUID | str, *, reveal: bool = False) -> JobTrace | None:
    """The job with its step trace, retry schedule and failed attempts (a ``JobTrace``), or
    ``None`` when no job has this id (SPEC INSP-02/03). A value that is not a UUID at all raises
    ``JobNotFoundError``. The start of an id (4 hex digits or more) names the one job whose id
    starts so, here and in ``cancel_job`` and ``retry_job``; a prefix more than one id starts
    with raises ``JobIdAmbiguousError`` listing them, one no id starts with
    ``JobNotFoundError``.

    ``attempts`` holds the last 10 failed attempts, oldest first: ``attempt``, ``at``,
    ``code`` (ours, else None), ``message``, ``exception`` (the class path), ``traceback``
    (at most 16 KiB) and ``outcome``: retried, dead, failed, timeout, crashed (the run died
    alone, in the child process isolating it: counted), or lapsed (the lease ran out unsettled,
    the message says whether its worker died, stayed present or exited: never counted)::

        >>> trace = inspect_job("0197a3c2-...")
        >>> trace["state"], trace["attempt"], [s["name"] for s in trace["steps"]]
        ('dead', 3, ['load', 'charge'])
        >>> [(a["attempt"], a["exception"], a["outcome"]) for a in trace["attempts"]]
        [(1, 'builtins.ValueError', 'retried'), ..., (3, 'builtins.ValueError', 'dead')]

    The id an ``enqueue()`` inside ``atomic()`` returned answers too once its transaction has
    committed. If the publish found a live job with the same idempotency key, the staged enqueue
    collapsed into that job: the trace is that job's, with ``collapsed_from`` set to the id
    asked for. A rolled-back enqueue's id names nothing (``None``).

    ``progress`` is the run's latest ``ctx.progress()`` (``done``, ``total``, ``note``, ``at``)
    or None; ``snoozes`` counts its ``ctx.snooze()`` calls; ``expires_at`` is when, not started
    by then, it expires (None: never).

    A backfill's pass carries a ``backfill`` section, its ledger row: ``name``, ``status``,
    ``environment``, ``rows``, ``pages``, ``cursor``, ``started_at``, ``completed_at``,
    ``error``; any other job has ``backfill: None``.

    Values under ``XJOBS["REDACT_KEYS"]`` in the input, the result and step outputs read
    ``[redacted]`` unless ``reveal=True``.

    Read from ``XJOBS["READ_DATABASE"]`` when one is set (a job it has not replayed yet is
    read from the jobs database), as ``list_jobs`` is (SPEC READ-01).
    """
    driver, wanted = read_driver()[0], job_id_of(job_id)
    row = driver.reads().get_job(wanted)
    if row is None and driver is not get_driver():
        # SPEC READ-01: a job the read database has not replayed yet (just enqueued) is read
        # where it was written
        driver = get_driver()
        row = driver.reads().get_job(wanted)
    if row is not None:
        return _trace(driver, row, reveal)
    target = collapsed_into(wanted)
    row = None if target is None else driver.reads().get_job(target)
    if row is None:
        return None
    return replace(_trace(driver, row, reveal), collapsed_from=str(wanted))


def collapsed_into(job_id: UUID) -> UUID | None:
    """The job a staged enqueue with this id collapsed into at publish, if it did."""
    driver = get_driver()
    for alias in conf.get().outbox_databases:
        target = driver.outbox(alias).resolve(job_id)
        if target is not None:
            return target
    return None


def cancel_job(job_id: UUID | str, reason: str | None = None, *, by: str | None = None) -> JobTrace:
    """Cancel a live job and return its trace (SPEC CANCEL-02, DESIGN Q-08/Q-09).

    A running job's worker finds out at its next heartbeat; whatever it settles after that is
    refused. ``reason`` becomes ``last_error``. Cancelling a cancelled job changes nothing; a
    ``done``, ``dead`` or ``failed`` job raises ``JobNotCancellableError``. The audit trail
    records it, as done ``by`` (default ``"api"``)::

        >>> cancel_job(job_id, reason="customer asked")["state"]
        'cancelled'
    """
    if reason is not None and not isinstance(reason, str):
        raise InvariantError(f"reason={reason!r} must be a string or None")
    driver = get_driver()
    # stored as last_error: through XJOBS["REDACT"], then the one sanitiser (issue 24 §3)
    stored = storable(redact.redact(reason)) if reason else None
    check_by(by)
    row = driver.jobs().cancel(job_id_of(job_id), stored)
    cancel_children(driver, row.id, row.run_id)
    audit.record("cancel_job", by=by, job_id=row.id, reason=reason)  # SPEC AUDIT-01
    return _trace(driver, row)


def retry_job(
    job_id: UUID | str,
    from_step: str | None = None,
    force: bool = False,
    restart: bool = False,
    *,
    by: str | None = None,
) -> JobTrace:
    """Run a ``dead`` or ``failed`` job again, on the same run (SPEC INSP-06, DESIGN Q-03/Q-04).

    The job becomes ready with attempt 0 and no ``started_at`` / ``last_attempted_at`` (its
    next claim is a first attempt again); its completed steps replay from storage and its
    failed attempts stay in its history. With ``from_step`` that step and every step recorded
    after it run again. A ``cancelled`` job
    needs ``force=True``; a live or ``done`` one raises ``JobNotRetryableError``. The audit
    trail records it, as done ``by`` (default ``"api"``)::

        >>> retry_job(job_id, from_step="charge")["state"]
        'ready'

    ``restart=True`` starts the run again from the top under the code deployed now: every
    stored step is deleted and its next claim stamps the version its worker declares; it also
    takes a run a worker of a newer version parked (``old_runs="park"``, issue 44).
    """
    if restart and from_step is not None:
        raise InvariantError(
            "give from_step or restart, not both",
            hint="restart deletes every step; from_step only that step and the later ones",
        )
    check_name(from_step, "from_step")
    if from_step is not None and (not isinstance(from_step, str) or not from_step):
        raise InvariantError(f"from_step={from_step!r} must be a step name", hint='e.g. "charge"')
    check_by(by)
    driver = get_driver()
    row = driver.jobs().requeue(
        job_id_of(job_id), from_step=from_step, force=bool(force), restart=bool(restart)
    )
    audit.record("retry_job", by=by, job_id=row.id, target=from_step)  # SPEC AUDIT-01
    return _trace(driver, row)


def run_job_now(job_id: UUID | str, *, by: str | None = None) -> JobTrace:
    """Make a waiting job due now — one enqueued for later, backing off after a failure, or
    snoozed — and return its trace (issue 42). Its run_at moves to now and its queue's workers
    are woken; it keeps its priority, its attempt and its expiry. A running, parked or ended job
    raises ``JobNotWaitingError``; ``by`` is logged with ``xjobs.job.run_now``::

        >>> run_job_now(job_id, by="ops:alice")["state"]
        'ready'
    """
    check_name(by, "by")
    driver = get_driver()
    row = driver.jobs().run_now(job_id_of(job_id))
    metrics.inc("xjobs_jobs_run_now_total", queue=row.queue)
    audit.record("run_job_now", by=by, job_id=row.id)
    log.event(logging.INFO, "xjobs.job.run_now", job=row.name, id=row.id, queue=row.queue, by=by)
    return _trace(driver, row)


def inspect_dead_letters(limit: int = 100) -> list[DeadLetter]:
    """The ``dead`` jobs, most recently failed first, each with the command that retries it
    (SPEC INSP-05)::

        >>> [(d["name"], d["retry_command"]) for d in inspect_dead_letters(limit=5)]
        [('shop.jobs.charge_order', 'python manage.py xjobs retry 0197a3c2-...')]
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvariantError(f"limit={limit!r} must be a positive integer")
    return [
        DeadLetter(
            id=str(row.id),
            name=row.name,
            queue=row.queue,
            attempt=row.attempt,
            last_error=row.last_error,
            stop_reason=row.stop_reason,
            failed_at=row.updated_at.isoformat(),
            retry_command=RETRY_COMMAND.format(id=row.id),
        )
        for row in read_driver()[0].reads().dead_letters(limit=limit)  # SPEC READ-06
    ]


def list_jobs(
    *,
    queue: str | None = None,
    name: str | None = None,
    state: str | None = None,
    limit: int = 100,
    error_code: str | None = None,
    input: Mapping[str, JSONValue] | str | None = None,
) -> list[JobSummary]:
    """Jobs newest first, ``limit`` after sorting (SPEC INSP-04), without their step traces;
    ``error_code`` and ``input`` filter as a bulk verb's filter does (SPEC BULK-11)::

    list_jobs(state="dead", queue="emails", error_code="X_TERMINAL", input={"order_id": 4711})
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvariantError(f"limit={limit!r} must be a positive integer")
    where = job_filter(error_code=error_code, input=input)
    driver = read_driver()[0]  # SPEC READ-01
    rows = driver.reads().list_jobs(
        queue=queue,
        name=name,
        state=state,
        limit=limit,
        error_code=where.error_code,
        input=where.input,
    )
    now = driver.steps().now() if rows else None  # the store's clock, as the counts use
    return [summary_of(row, now) for row in rows]


#: What ``prune`` deletes when no state is named: never ``dead``, whose jobs wait for an operator.
PRUNE_DEFAULT_STATES = ("done", "failed", "cancelled")


def prune_jobs(
    *, older_than: Duration, states: Sequence[str] | None = None, dry_run: bool = False
) -> dict[str, int]:
    """Delete finished jobs last updated more than ``older_than`` ago, with their steps, and
    return how many went per state. Without ``states``: done, failed and cancelled; a ``dead``
    job is deleted only when ``"dead"`` is named. ``dry_run`` counts and deletes nothing::

        prune_jobs(older_than="30d")  # {"done": 120, "failed": 3, "cancelled": 0}
        prune_jobs(older_than="90d", states=["dead"], dry_run=True)  # {"dead": 7}
    """
    seconds = parse_duration(older_than, field="older_than")
    chosen = list(PRUNE_DEFAULT_STATES if states is None else dict.fromkeys(states))
    if not chosen or set(chosen) - set(FINISHED_STATES):
        raise InvariantError(
            f"prune states {chosen!r} must be finished states",
            hint=f"choose from {', '.join(FINISHED_STATES)}",
        )
    return get_driver().jobs().prune(older_than=seconds, states=chosen, dry_run=bool(dry_run))


def summary_of(row: JobSnapshot, now: datetime | None) -> JobSummary:
    return JobSummary(
        id=str(row.id),
        name=row.name,
        queue=row.queue,
        state=row.state if now is None else shown_state(row.state, row.run_at, now),
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        stop_reason=row.stop_reason,
        last_error=row.last_error,
        run_at=iso(row.run_at),
        updated_at=iso(row.updated_at),
        started_at=iso(row.started_at),
        progress=row.progress,
    )


def _trace(driver: JobDriver, row: JobSnapshot, reveal: bool = False) -> JobTrace:
    shown: Callable[[JSONValue], JSONValue] = _as_stored if reveal else redact.mask
    waiting = row.state in WAITING_STATES  # only a waiting row's shown state needs the clock
    return JobTrace(
        id=str(row.id),
        name=row.name,
        queue=row.queue,
        state=shown_state(row.state, row.run_at, driver.steps().now()) if waiting else row.state,
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        priority=row.priority,
        # made from the inputs: a template that reads a secret input masks it (issue 40)
        idempotency_key=row.idempotency_key if reveal else key_shown(row),
        run_id=str(row.run_id),
        run_at=iso(row.run_at),
        created_at=iso(row.created_at),
        updated_at=iso(row.updated_at),
        started_at=iso(row.started_at),
        last_attempted_at=iso(row.last_attempted_at),
        attempted_by=row.attempted_by,
        last_error=row.last_error,
        stop_reason=row.stop_reason,
        input=shown(row.input),
        result=shown(row.result),
        tenant_id=row.tenant_id,
        traceparent=row.traceparent,
        enqueued_by=row.enqueued_by,
        steps=[_step(s, shown) for s in driver.steps().list(row.run_id)],
        retry_delays=_retry_delays(row.name),
        attempts=[_failed_attempt(a) for a in row.errors],
        backfill=backfill_section(row.name, row.run_id),
        # issue 29: the job controls; progress is {"done", "total", "note", "at"} or None
        expires_at=iso(row.expires_at),
        snoozes=row.snoozes,
        progress=row.progress,
        # issue 32: the jobs it runs after, how many are not done yet, the one that failed it
        dependencies=_dependencies(row),
        # issue 44: a run claimed before runs recorded their version reads as 1
        version=1 if row.version is None and row.started_at else row.version,
        parked=row.parked,
    )


class KeyedRow(Protocol):
    """A row with a job name and an idempotency key (a ``JobSnapshot``, an admin row)."""

    @property
    def name(self) -> str: ...

    @property
    def idempotency_key(self) -> str: ...


def key_shown(row: KeyedRow, *, values: bool = True) -> str:
    """``row``'s idempotency key as a viewer may see it (``redact.key_shown``): its job's key
    template tells which inputs it was made from."""
    handle = registry.jobs.get(row.name)
    template = None if handle is None else handle.idempotency_key
    return redact.key_shown(row.idempotency_key, template, values=values)


def _dependencies(row: JobSnapshot) -> Dependencies | None:
    """A job's dependencies (``using(after=...)``) and who waits for it; None when neither."""
    if row.after is None and row.dependants is None:
        return None
    return Dependencies(
        after=[str(a) for a in row.after or ()],
        waiting_on=row.waiting_on,
        failed=None if row.after_failed is None else str(row.after_failed),
        run_anyway=row.run_anyway,
        dependants=[str(d) for d in row.dependants or ()],
    )


def _failed_attempt(entry: FailedAttempt) -> AttemptTrace:
    return AttemptTrace(
        attempt=entry.attempt,
        at=iso(entry.at),
        code=entry.code,
        message=entry.message,
        exception=entry.exception,
        traceback=entry.traceback,
        outcome=entry.outcome,
    )


def _as_stored(value: JSONValue) -> JSONValue:
    """A payload as stored, for a viewer who may see it whole: opened when sealed (CRYPT-04)."""
    return crypt.shown(value)


def _step(record: StepRecord, shown: Callable[[JSONValue], JSONValue]) -> StepTrace:
    done = record.completed_at
    return StepTrace(
        name=record.name,
        status=record.status,
        started_at=iso(record.started_at),
        completed_at=iso(done),
        wake_at=iso(record.wake_at),
        duration=None
        if done is None or record.started_at is None
        else (done - record.started_at).total_seconds(),
        attempts=record.attempts,
        error=record.error,
        output=shown(record.output),
    )


def _retry_delays(name: str) -> list[float]:
    """The registered job's full schedule; ``[]`` for a name this process does not know."""
    handle = registry.get_job(name)
    if handle is None:
        return []
    try:
        return retry_schedule(handle.retry)
    except Exception:  # SPEC INSP-03: a trace is never refused over its retry schedule
        return []
