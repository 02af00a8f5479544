"""The operator API: look at jobs and queues, cancel a job, run a finished one again.

The admin, the ``xjobs`` management command and the tests all go through these functions, never
around them (DESIGN §3). Each looks the driver up when it is called, takes a job id as a
``UUID`` or a string, and returns plain JSON: ids and times as strings, durations in seconds.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from string import hexdigits
from typing import Any
from uuid import UUID

from .. import conf, log, metrics, redact
from ..backfills.status import backfill_section
from ..declarations import registry
from ..drivers import get_driver
from ..drivers.contract import JobDriver, JobSnapshot, QueueState, StepRecord
from ..durations import Duration, parse_duration
from ..errors import (
    InvariantError,
    JobIdAmbiguousError,
    JobNotCancellableError,
    JobNotFoundError,
)
from ..history import FailedAttempt
from ..retry import retry_schedule
from ..states import FINISHED_STATES, LIVE_STATES, WAITING_STATES, shown_state
from ..text import check_label, check_name, storable

RETRY_COMMAND = "python manage.py xjobs retry {id}"


def inspect_job(job_id: UUID | str, *, reveal: bool = False) -> dict[str, Any] | None:
    """The job with its step trace, retry schedule and failed attempts, or ``None`` when no job
    has this id (SPEC INSP-02/03). A value that is not a UUID at all raises
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
    """
    driver = get_driver()
    wanted = _job_id(job_id)
    row = driver.get_job(wanted)
    if row is not None:
        return _trace(driver, row, reveal)
    target = collapsed_into(wanted)
    row = None if target is None else driver.get_job(target)
    if row is None:
        return None
    return {**_trace(driver, row, reveal), "collapsed_from": str(wanted)}


def collapsed_into(job_id: UUID) -> UUID | None:
    """The job a staged enqueue with this id collapsed into at publish, if it did."""
    driver = get_driver()
    for alias in conf.get().outbox_databases:
        target = driver.outbox_store(alias).resolve(job_id)
        if target is not None:
            return target
    return None


def cancel_job(job_id: UUID | str, reason: str | None = None) -> dict[str, Any]:
    """Cancel a live job and return its trace (SPEC CANCEL-02, DESIGN Q-08/Q-09).

    A running job's worker finds out at its next heartbeat; whatever it settles after that is
    refused. ``reason`` becomes ``last_error``. Cancelling a cancelled job changes nothing; a
    ``done``, ``dead`` or ``failed`` job raises ``JobNotCancellableError``::

        >>> cancel_job(job_id, reason="customer asked")["state"]
        'cancelled'
    """
    if reason is not None and not isinstance(reason, str):
        raise InvariantError(f"reason={reason!r} must be a string or None")
    driver = get_driver()
    # stored as last_error: through XJOBS["REDACT"], then the one sanitiser (issue 24 §3)
    stored = storable(redact.redact(reason)) if reason else None
    row = driver.cancel(_job_id(job_id), stored)
    _cancel_children(driver, row.id, row.run_id)
    return _trace(driver, row)


def _cancel_children(driver: JobDriver, parent: UUID, run_id: UUID) -> None:
    """Cancel goes down: the live children a parked ``ctx.step.call``/``call_many`` of the
    cancelled job waits for are cancelled too, and theirs in turn (SPEC CHILD-06). Each is its
    own cancel: cancelling the parent again finishes a propagation a crash cut short."""
    for record in driver.steps.list(run_id):
        output = record.output
        if record.status != "waiting" or not isinstance(output, dict):
            continue
        for child_id in output.get("children") or ():
            child = driver.get_job(UUID(str(child_id)))
            if child is None or child.state not in LIVE_STATES:
                continue
            with contextlib.suppress(JobNotCancellableError):  # it ended meanwhile
                cancelled = driver.cancel(child.id, f"parent {parent} was cancelled")
                _cancel_children(driver, cancelled.id, cancelled.run_id)


def retry_job(
    job_id: UUID | str, from_step: str | None = None, force: bool = False
) -> dict[str, Any]:
    """Run a ``dead`` or ``failed`` job again, on the same run (SPEC INSP-06, DESIGN Q-03/Q-04).

    The job becomes ready with attempt 0 and no ``started_at`` / ``last_attempted_at`` (its
    next claim is a first attempt again); its completed steps replay from storage and its
    failed attempts stay in its history. With ``from_step`` that step and every step recorded
    after it run again. A ``cancelled`` job
    needs ``force=True``; a live or ``done`` one raises ``JobNotRetryableError``::

        >>> retry_job(job_id, from_step="charge")["state"]
        'ready'
    """
    check_name(from_step, "from_step")
    if from_step is not None and (not isinstance(from_step, str) or not from_step):
        raise InvariantError(f"from_step={from_step!r} must be a step name", hint='e.g. "charge"')
    driver = get_driver()
    row = driver.requeue(_job_id(job_id), from_step=from_step, force=bool(force))
    return _trace(driver, row)


def run_job_now(job_id: UUID | str, *, by: str | None = None) -> dict[str, Any]:
    """Make a waiting job due now — one enqueued for later, backing off after a failure, or
    snoozed — and return its trace (issue 42). Its run_at moves to now and its queue's workers
    are woken; it keeps its priority, its attempt and its expiry. A running, parked or ended job
    raises ``JobNotWaitingError``; ``by`` is logged with ``xjobs.job.run_now``::

        >>> run_job_now(job_id, by="ops:alice")["state"]
        'ready'
    """
    check_name(by, "by")
    driver = get_driver()
    row = driver.run_now(_job_id(job_id))
    metrics.inc("xjobs_jobs_run_now_total", queue=row.queue)
    log.event(logging.INFO, "xjobs.job.run_now", job=row.name, id=row.id, queue=row.queue, by=by)
    return _trace(driver, row)


def inspect_dead_letters(limit: int = 100) -> list[dict[str, Any]]:
    """The ``dead`` jobs, most recently failed first, each with the command that retries it
    (SPEC INSP-05)::

        >>> [(d["name"], d["retry_command"]) for d in inspect_dead_letters(limit=5)]
        [('shop.jobs.charge_order', 'python manage.py xjobs retry 0197a3c2-...')]
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvariantError(f"limit={limit!r} must be a positive integer")
    return [
        {
            "id": str(row.id),
            "name": row.name,
            "queue": row.queue,
            "attempt": row.attempt,
            "last_error": row.last_error,
            "stop_reason": row.stop_reason,
            "failed_at": row.updated_at.isoformat(),
            "retry_command": RETRY_COMMAND.format(id=row.id),
        }
        for row in get_driver().dead_letters(limit=limit)
    ]


def inspect_queues() -> dict[str, Any]:
    """Depth per queue and totals (SPEC INSP-01); a due ``delayed`` job counts as ready (Q-05)::

        >>> inspect_queues()["totals"]
        {'ready': 4, 'delayed': 1, 'running': 2, 'suspended': 0, 'dead': 1}

    ``queues`` holds the same counts per queue, with the age of each queue's oldest ready job,
    ``paused`` (``pause_queue``) and ``limit`` (``set_queue_limit``, None: no cap); a paused or
    capped queue with no jobs is listed too, with zeros.
    """
    driver = get_driver()
    queues = metrics.queue_depths(driver)
    buckets = ("ready", "delayed", "running", "suspended", "dead")
    return {
        "driver": driver.name,
        "queues": queues,
        "totals": {b: sum(q[b] for q in queues) for b in buckets},
        "oldest_ready_seconds": max((q["oldest_ready_seconds"] for q in queues), default=0.0),
    }


def check_by(by: Any) -> None:
    """``by=`` of an operator call: None, or a name ``text.check_label`` keeps (no NUL, lone
    surrogate, control character or escape; at most 200 characters), else ``X_INVARIANT``."""
    if by is not None and not isinstance(by, str):
        raise InvariantError(f"by={by!r} must be a string or None", hint='e.g. "ops:alice"')
    check_label(by, "by")


def pause_queue(name: str, *, by: str | None = None) -> QueueState:
    """Stop every worker of the fleet claiming from queue ``name`` (SPEC CTRL-01/02).

    Stored in the database, so it outlives restarts and deploys; each worker leaves the queue out
    of its next claim, woken by a notification (at the latest a poll interval later). Runs in
    flight finish; enqueues into the queue still land and wait. Pausing a paused queue keeps its
    first ``paused_at`` and ``paused_by``::

        >>> pause_queue("emails", by="ops:alice")
        QueueState(queue='emails', paused=True, paused_at=datetime(...), paused_by='ops:alice')
    """
    conf.check_queue_name(name, error=InvariantError)
    check_by(by)
    state = get_driver().pause_queue(name, by)
    log.event(logging.WARNING, "xjobs.queue.paused", queue=name, by=by)
    return state


def resume_queue(name: str, *, by: str | None = None) -> QueueState:
    """Let the fleet claim from queue ``name`` again (SPEC CTRL-03); its waiting jobs run in
    their usual order. Resuming a queue that is not paused changes nothing::

        >>> resume_queue("emails").paused
        False
    """
    conf.check_queue_name(name, error=InvariantError)
    check_by(by)
    state = get_driver().resume_queue(name)
    log.event(logging.INFO, "xjobs.queue.resumed", queue=name, by=by)
    return state


def inspect_workers() -> list[dict[str, Any]]:
    """Every worker's presence row, oldest start first; ``alive`` is False once it went a
    visibility timeout without a heartbeat (killed, stopped or cut off), and ``state`` says
    which: ``alive``, ``lapsed``, or ``exited`` (``stopped_at`` set: it exited past its
    ``--shutdown-timeout`` with runs in flight, which return by their leases)::

        >>> [(w["id"], w["in_flight"], w["alive"]) for w in inspect_workers()]
        [('worker-0190…', 3, True)]
    """
    return [
        {
            "id": w.id,
            "host": w.host,
            "pid": w.pid,
            "queues": list(w.queues),
            "started_at": _iso(w.started_at),
            "last_seen": _iso(w.last_seen),
            "expires_at": _iso(w.expires_at),
            "in_flight": w.in_flight,
            "alive": w.alive,
            "stopped_at": _iso(w.stopped_at),
            "state": worker_state(w.alive, w.stopped_at),
        }
        for w in get_driver().workers()
    ]


def worker_state(alive: bool, stopped_at: datetime | None) -> str:
    """``alive``; ``exited`` when the process left past its shutdown timeout with runs in
    flight (they return by their leases); else ``lapsed``: no beat for a visibility timeout."""
    if stopped_at is not None:
        return "exited"
    return "alive" if alive else "lapsed"


def list_jobs(
    *,
    queue: str | None = None,
    name: str | None = None,
    state: str | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """Jobs newest first, ``limit`` after sorting (SPEC INSP-04), without their step traces::

    list_jobs(state="dead", queue="emails", limit=20)
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvariantError(f"limit={limit!r} must be a positive integer")
    driver = get_driver()
    rows = driver.list_jobs(queue=queue, name=name, state=state, limit=limit)
    now = driver.steps.now() if rows else None  # the store's clock, as the counts use
    return [_summary(row, now) for row in rows]


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
    return get_driver().prune(older_than=seconds, states=chosen, dry_run=bool(dry_run))


def _summary(row: JobSnapshot, now: datetime | None) -> dict[str, Any]:
    return {
        "id": str(row.id),
        "name": row.name,
        "queue": row.queue,
        "state": row.state if now is None else shown_state(row.state, row.run_at, now),
        "attempt": row.attempt,
        "max_attempts": row.max_attempts,
        "stop_reason": row.stop_reason,
        "last_error": row.last_error,
        "run_at": _iso(row.run_at),
        "updated_at": _iso(row.updated_at),
        "started_at": _iso(row.started_at),
        "progress": row.progress,
    }


#: the shortest id prefix looked up: fewer hex digits are likelier a typo than an id
MIN_PREFIX = 4
HEX_DIGITS = hexdigits.lower()
#: the jobs an ambiguous prefix's message lists
PREFIX_CANDIDATES = 5


def _job_id(value: UUID | str) -> UUID:
    """A job id, or the one job id a prefix of it names (``0197a3c2-5b1e``, as ``xjobs ls``
    prints them); an ambiguous prefix is refused with the ids it could mean."""
    if isinstance(value, UUID):
        return value
    text = str(value).strip()
    try:
        return UUID(text)
    except ValueError:
        pass
    digits = text.replace("-", "").lower()
    if len(digits) < MIN_PREFIX or len(digits) >= 32 or set(digits) - set(HEX_DIGITS):
        raise JobNotFoundError(
            f"no job {value!r} exists",
            hint="that is not a job id; a job id is a UUID such as "
            "0197a3c2-5b1e-7c4d-9f00-1a2b3c4d5e6f, or at least its first "
            f"{MIN_PREFIX} hex digits",
        )
    low, high = UUID(digits.ljust(32, "0")), UUID(digits.ljust(32, "f"))
    found = get_driver().job_ids_between(low, high, limit=PREFIX_CANDIDATES + 1)
    if not found:
        raise JobNotFoundError(
            f"no job id starts with {text!r}",
            hint="python manage.py xjobs ls lists recent jobs with their ids",
        )
    if len(found) > 1:
        listed = ", ".join(str(i) for i in found[:PREFIX_CANDIDATES])
        more = ", ..." if len(found) > PREFIX_CANDIDATES else ""
        raise JobIdAmbiguousError(
            f"{text!r} starts more than one job id: {listed}{more}",
            hint="give more of the id, or all of it",
        )
    return found[0]


def _trace(driver: JobDriver, row: JobSnapshot, reveal: bool = False) -> dict[str, Any]:
    shown: Callable[[Any], Any] = _as_stored if reveal else redact.mask
    waiting = row.state in WAITING_STATES  # only a waiting row's shown state needs the clock
    return {
        "id": str(row.id),
        "name": row.name,
        "queue": row.queue,
        "state": shown_state(row.state, row.run_at, driver.steps.now()) if waiting else row.state,
        "attempt": row.attempt,
        "max_attempts": row.max_attempts,
        "priority": row.priority,
        # made from the inputs: a template that reads a secret input masks it (issue 40)
        "idempotency_key": row.idempotency_key if reveal else key_shown(row),
        "run_id": str(row.run_id),
        "run_at": _iso(row.run_at),
        "created_at": _iso(row.created_at),
        "updated_at": _iso(row.updated_at),
        "started_at": _iso(row.started_at),
        "last_attempted_at": _iso(row.last_attempted_at),
        "attempted_by": row.attempted_by,
        "last_error": row.last_error,
        "stop_reason": row.stop_reason,
        "input": shown(row.input),
        "result": shown(row.result),
        "tenant_id": row.tenant_id,
        "traceparent": row.traceparent,
        "enqueued_by": row.enqueued_by,
        "steps": [_step(s, shown) for s in driver.steps.list(row.run_id)],
        "retry_delays": _retry_delays(row.name),
        "attempts": [_failed_attempt(a) for a in row.errors],
        "backfill": backfill_section(row.name, row.run_id),
        # issue 29: the job controls; progress is {"done", "total", "note", "at"} or None
        "expires_at": _iso(row.expires_at),
        "snoozes": row.snoozes,
        "progress": row.progress,
        # issue 32: the jobs it runs after, how many are not done yet, the one that failed it
        "dependencies": _dependencies(row),
    }


def key_shown(row: Any, *, values: bool = True) -> str:
    """``row``'s idempotency key as a viewer may see it (``redact.key_shown``): its job's key
    template tells which inputs it was made from."""
    handle = registry.jobs.get(row.name)
    template = getattr(handle, "idempotency_key", None)
    return redact.key_shown(row.idempotency_key, template, values=values)


def _dependencies(row: JobSnapshot) -> dict[str, Any] | None:
    """A job's dependencies (``using(after=...)``) and who waits for it; None when neither."""
    if row.after is None and row.dependants is None:
        return None
    return {
        "after": [str(a) for a in row.after or ()],
        "waiting_on": row.waiting_on,
        "failed": None if row.after_failed is None else str(row.after_failed),
        "run_anyway": row.run_anyway,
        "dependants": [str(d) for d in row.dependants or ()],
    }


def _failed_attempt(entry: FailedAttempt) -> dict[str, Any]:
    return {
        "attempt": entry.attempt,
        "at": _iso(entry.at),
        "code": entry.code,
        "message": entry.message,
        "exception": entry.exception,
        "traceback": entry.traceback,
        "outcome": entry.outcome,
    }


def _as_stored(value: Any) -> Any:
    return value


def _step(record: StepRecord, shown: Callable[[Any], Any]) -> dict[str, Any]:
    done = record.completed_at
    return {
        "name": record.name,
        "status": record.status,
        "started_at": _iso(record.started_at),
        "completed_at": _iso(done),
        "wake_at": _iso(record.wake_at),
        "duration": None
        if done is None or record.started_at is None
        else (done - record.started_at).total_seconds(),
        "attempts": record.attempts,
        "error": record.error,
        "output": shown(record.output),
    }


def _retry_delays(name: str) -> list[float]:
    """The registered job's full schedule; ``[]`` for a name this process does not know."""
    handle = registry.get_job(name)
    if handle is None:
        return []
    try:
        return retry_schedule(handle.retry)
    except Exception:  # SPEC INSP-03: a trace is never refused over its retry schedule
        return []


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def inspect_outbox(limit: int = 100) -> dict[str, Any]:
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
    driver = get_driver()
    databases: dict[str, dict[str, Any]] = {}
    entries: list[dict[str, Any]] = []
    for alias in conf.get().outbox_databases:
        store = driver.outbox_store(alias)
        count, oldest = store.pending()
        quarantined = store.quarantined_count()
        databases[alias] = {
            "pending": count,
            "oldest_pending_seconds": oldest,
            "quarantined": quarantined,
        }
        if quarantined:
            entries.extend(_quarantined(alias, row) for row in store.quarantined(limit))
    return {
        "pending": sum(d["pending"] for d in databases.values()),
        "oldest_pending_seconds": max(
            (d["oldest_pending_seconds"] for d in databases.values()), default=0.0
        ),
        "quarantined": sum(d["quarantined"] for d in databases.values()),
        "entries": entries,
        "databases": databases,
    }


def _quarantined(alias: str, row: Any) -> dict[str, Any]:
    return {
        "id": str(row.id),
        "database": alias,
        "job": row.job,
        "queue": row.queue,
        "tenant_id": row.tenant_id,
        "staged_at": _iso(row.staged_at),
        "quarantined_at": _iso(row.quarantined_at),
        "error_code": row.error_code,
        "error": row.error,
        "key_bytes": row.key_bytes,
        "tenant_bytes": row.tenant_bytes,
        "name_bytes": row.name_bytes,
        "key_start": row.idempotency_key[:80],
    }


def retry_outbox_entry(entry_id: UUID | str) -> dict[str, Any]:
    """Hand a quarantined outbox row back to the relay, whose next pass publishes it (or
    quarantines it again, if what refused it was not fixed); returns ``inspect_outbox()``.
    No quarantined row with this id raises ``JobNotFoundError``::

        >>> retry_outbox_entry("0197a3c2-...")["quarantined"]
        0
    """
    _outbox_act(entry_id, lambda store, wanted: store.unquarantine(wanted))
    return inspect_outbox()


def discard_outbox_entry(entry_id: UUID | str) -> dict[str, Any]:
    """Delete a quarantined outbox row: it never becomes a job, and its id names nothing;
    returns ``inspect_outbox()``. No quarantined row with this id raises ``JobNotFoundError``::

        >>> discard_outbox_entry("0197a3c2-...")["quarantined"]
        0
    """
    _outbox_act(entry_id, lambda store, wanted: store.discard(wanted))
    return inspect_outbox()


def _outbox_act(entry_id: UUID | str, act: Callable[[Any, UUID], bool]) -> None:
    """``act(store, id)`` on each outbox database until one holds the quarantined row."""
    wanted = _job_id(entry_id)
    driver = get_driver()
    for alias in conf.get().outbox_databases:
        if act(driver.outbox_store(alias), wanted):
            return
    raise JobNotFoundError(
        f"no quarantined outbox row has id {wanted}",
        hint="list them: python manage.py xjobs outbox",
    )


def inspect_manifest() -> dict[str, Any]:
    """Every declared job and cron, in code-unit order, as plain JSON (SPEC INSP-08): each
    handle's ``describe()`` row, and a cron's next run::

        inspect_manifest()["crons"][0]["next_run"]  # "2026-12-01T02:00:00+00:00"
    """
    from datetime import UTC, datetime

    from ..declarations.cron import registered_crons

    now = datetime.now(UTC)
    return {
        "jobs": [h.describe() for h in registry.registered_jobs()],
        "crons": [
            {**c.describe(), "next_run": c.next_occurrence(now).isoformat()}
            for c in registered_crons()
        ],
    }
