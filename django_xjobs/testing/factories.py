"""factory-boy factories for the rows django_xjobs writes, in every state, with the history a
real run leaves (``pip install './django-xjobs[testing]'``).

An app's tests of its own admin views, dashboards, alerts and reports need a dead job or a
sleeping one without running a job into that state; these write the rows the library would
write for it, consistent with each other (attempt and history, state and lease, a suspended
run and its step rows), so ``inspect_job()``, the admin and ``xjobs show`` read them as their
own::

    from django_xjobs.testing.factories import DeadJobFactory, SleepingJobFactory

    def test_the_dead_letter_alert(db):
        job = DeadJobFactory(name="shop.jobs.charge", max_attempts=5)
        assert job.attempt == 5 and len(job.errors) == 5
        SleepingJobFactory(sleep_for=3600)  # a suspended run with its "sleeping" step

Times are the Python clock's (under freezegun, the frozen one). Rows go through the ORM, so
they exist only for the PostgreSQL driver (the memory driver keeps its rows in the process).
Batches are not covered yet.
"""

from __future__ import annotations

import json
import socket
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import psycopg

from .. import history
from ..drivers import bounds, failures
from ..errors import TerminalError, describe_error, first_line
from ..ids import uuid7
from ..models import Job, JobState, JobStep, OutboxEntry, StopReason, Worker

#: what to install when factory-boy is missing (one line, as the metrics extra says it)
MISSING = (
    "factory-boy is not installed: pip install './django-xjobs[testing]' "
    "(or factory-boy>=3.3) to use django_xjobs.testing.factories"
)

try:
    import factory
    from factory.django import DjangoModelFactory
except ImportError as error:  # pragma: no cover - exercised in a subprocess without the extra
    raise ImportError(MISSING) from error


__all__ = [
    "CancelledJobFactory",
    "DeadJobFactory",
    "DoneJobFactory",
    "JobFactory",
    "JobStepFactory",
    "QuarantinedOutboxFactory",
    "RetryingJobFactory",
    "RunningJobFactory",
    "SleepingJobFactory",
    "StagedOutboxFactory",
    "WaitingJobFactory",
]


def _now() -> datetime:
    return datetime.now(UTC)


def _raised(error: BaseException) -> BaseException:
    """``error`` with a real traceback, as an attempt that raised it would leave."""
    try:
        raise error
    except BaseException as caught:  # any error a job body can raise
        return caught


def _history(error: BaseException, attempts: int, last: history.Ending, at: datetime) -> list:
    """The ``errors`` a row holds after ``attempts`` attempts failed with ``error``: each
    stamped as the settle stamps it, the earlier ones retried, the last one ending ``last``;
    only the newest ``history.KEEP`` are kept, as the settle keeps them."""
    raised = _raised(error)
    entries = []
    for attempt in range(1, attempts + 1):
        outcome: history.Ending = last if attempt == attempts else "retried"
        failure = history.failure(raised, outcome, secrets=())
        entries.append({"attempt": attempt, "at": at.isoformat(), **asdict(failure)})
    return entries[-history.KEEP :]


class JobFactory(DjangoModelFactory):
    """A job as ``enqueue()`` publishes it: ready, due now, never attempted."""

    class Meta:
        model = Job
        skip_postgeneration_save = True  # the hooks write other rows, never this one

    class Params:
        #: the time the row's stamps are taken from
        now = factory.LazyFunction(_now)

    id = factory.LazyFunction(uuid7)
    name = "app.jobs.example"
    queue = "default"
    input = factory.LazyFunction(dict)
    idempotency_key = factory.Sequence(lambda n: f"factory:{n}")
    run_id = factory.LazyFunction(uuid7)
    attempt = 0
    max_attempts = 3
    state = JobState.READY
    priority = 0
    run_at = factory.SelfAttribute("now")
    errors = factory.LazyFunction(list)
    created_at = factory.SelfAttribute("now")
    updated_at = factory.SelfAttribute("now")


class JobStepFactory(DjangoModelFactory):
    """A step record of a run: ``completed`` with an output unless told otherwise."""

    class Meta:
        model = JobStep
        skip_postgeneration_save = True

    class Params:
        now = factory.LazyFunction(_now)

    run_id = factory.LazyFunction(uuid7)
    name = factory.Sequence(lambda n: f"step-{n}")
    status = "completed"
    output = None
    started_at = factory.SelfAttribute("now")
    completed_at = factory.LazyAttribute(lambda o: o.now if o.status == "completed" else None)
    attempts = 1
    position = 0


class _Attempted(JobFactory):
    """A job a worker claimed at least once: the claim's stamps. ``steps=["a", "b"]`` adds
    the steps its run completed, in that order (their outputs are their positions)."""

    attempt = 1
    attempted_by = "worker-1"
    started_at = factory.SelfAttribute("now")
    last_attempted_at = factory.SelfAttribute("now")

    @factory.post_generation
    def steps(job: Job, create: bool, extracted: object, **kwargs: object) -> None:
        if not create or not extracted:
            return
        for position, name in enumerate(extracted):
            JobStepFactory(
                run_id=job.run_id, name=name, output=position, position=position, now=job.created_at
            )


class DoneJobFactory(_Attempted):
    """A job whose attempt returned ``result`` (SPEC STATE-01)."""

    state = JobState.DONE
    result = factory.LazyFunction(lambda: {"ok": True})


class RetryingJobFactory(_Attempted):
    """A job whose latest attempt failed and that waits for its retry: ``ready``, due
    ``retry_in`` seconds from now (a retry settles a job as ready again, due later), ``attempt``
    failures in its history, ``last_error`` the latest one."""

    class Params:
        error = factory.LazyFunction(lambda: ConnectionError("the upstream timed out"))
        retry_in = 60.0

    run_at = factory.LazyAttribute(lambda o: o.now + timedelta(seconds=o.retry_in))
    last_error = factory.LazyAttribute(lambda o: describe_error(o.error))
    errors = factory.LazyAttribute(lambda o: _history(o.error, o.attempt, "retried", o.now))


class DeadJobFactory(_Attempted):
    """A dead letter: every attempt failed (``attempts-exhausted``, one history entry per
    attempt), or with ``terminal=True`` the first raised ``TerminalError`` (``terminal``)."""

    class Params:
        terminal = False
        error = factory.LazyAttribute(
            lambda o: (
                TerminalError("the card was declined")
                if o.terminal
                else ValueError("the record is malformed")
            )
        )

    state = JobState.DEAD
    attempt = factory.LazyAttribute(lambda o: 1 if o.terminal else o.max_attempts)
    stop_reason = factory.LazyAttribute(
        lambda o: StopReason.TERMINAL if o.terminal else StopReason.ATTEMPTS_EXHAUSTED
    )
    last_error = factory.LazyAttribute(lambda o: _last_error(o.error))
    errors = factory.LazyAttribute(lambda o: _history(o.error, o.attempt, "dead", o.now))


def _last_error(error: BaseException) -> str:
    text = describe_error(error)
    if isinstance(error, TerminalError):  # what the executor appends to a terminal failure
        return f"{text} — not retried: the error is terminal"
    return text


class CancelledJobFactory(JobFactory):
    """A job an operator cancelled before it ran: the reason is its ``last_error``."""

    state = JobState.CANCELLED
    stop_reason = StopReason.CANCELLED
    last_error = "cancelled by an operator"


class _Suspended(_Attempted):
    """A run suspended on a step: the attempt is given back (a suspension is no failure) and
    the row is due when the step wakes."""

    state = JobState.SUSPENDED
    attempt = 0


class SleepingJobFactory(_Suspended):
    """A job suspended on ``ctx.step.sleep(step, sleep_for)`` after a completed step
    ``before``: its ``sleeping`` step wakes at the row's ``run_at``."""

    class Params:
        step = "nap"
        sleep_for = 3600.0
        before = "before"

    run_at = factory.LazyAttribute(lambda o: o.now + timedelta(seconds=o.sleep_for))
    completed_step = factory.RelatedFactory(
        JobStepFactory,
        run_id=factory.SelfAttribute("..run_id"),
        name=factory.SelfAttribute("..before"),
        output=0,
        position=0,
        now=factory.SelfAttribute("..now"),
    )
    sleeping_step = factory.RelatedFactory(
        JobStepFactory,
        run_id=factory.SelfAttribute("..run_id"),
        name=factory.SelfAttribute("..step"),
        status="sleeping",
        wake_at=factory.SelfAttribute("..run_at"),
        position=1,
        now=factory.SelfAttribute("..now"),
    )


class WaitingJobFactory(_Suspended):
    """A job suspended on ``ctx.step.wait_for_event(step, event)``: its ``waiting`` step is
    polled again at the row's ``run_at`` (``poll`` seconds on, the job's ``event_poll``)."""

    class Params:
        step = "shipped"
        event = "order.shipped"
        correlation_key = None
        poll = 5.0

    run_at = factory.LazyAttribute(lambda o: o.now + timedelta(seconds=o.poll))
    waiting_step = factory.RelatedFactory(
        JobStepFactory,
        run_id=factory.SelfAttribute("..run_id"),
        name=factory.SelfAttribute("..step"),
        status="waiting",
        wake_at=factory.SelfAttribute("..run_at"),
        event=factory.SelfAttribute("..event"),
        correlation_key=factory.SelfAttribute("..correlation_key"),
        position=0,
        now=factory.SelfAttribute("..now"),
    )


class RunningJobFactory(_Attempted):
    """A job a worker holds: a live lease (token, ``visible_at`` ``lease_for`` seconds on) and
    the worker's presence row, as a claim and the worker's heartbeat leave them."""

    class Params:
        lease_for = 30.0

    state = JobState.RUNNING
    claimed_by = factory.SelfAttribute("attempted_by")
    lease_token = factory.LazyFunction(uuid4)
    visible_at = factory.LazyAttribute(lambda o: o.now + timedelta(seconds=o.lease_for))

    @factory.post_generation
    def presence(job: Job, create: bool, extracted: object, **kwargs: object) -> None:
        if not create:
            return
        Worker.objects.update_or_create(
            id=job.claimed_by,
            defaults={
                "host": socket.gethostname(),
                "pid": 4242,
                "queues": [job.queue],
                "started_at": job.last_attempted_at,
                "last_seen": job.last_attempted_at,
                "seen_since": job.last_attempted_at,
                "expires_at": job.visible_at,
                "in_flight": 1,
            },
        )


class StagedOutboxFactory(DjangoModelFactory):
    """A job staged by ``enqueue()`` inside a transaction and not yet published by the relay:
    its id is the id ``enqueue()`` returned, the job's id once published."""

    class Meta:
        model = OutboxEntry
        skip_postgeneration_save = True

    class Params:
        now = factory.LazyFunction(_now)

    id = factory.LazyFunction(uuid7)
    job = "app.jobs.example"
    queue = "default"
    input = factory.LazyFunction(dict)
    idempotency_key = factory.Sequence(lambda n: f"factory:{n}")
    max_attempts = 3
    priority = 0
    run_at = factory.SelfAttribute("now")
    staged_at = factory.SelfAttribute("now")


class QuarantinedOutboxFactory(StagedOutboxFactory):
    """A staged row the relay could not publish for a reason that fails the same way again
    (issue 24): by default an idempotency key too large for the live-key index (SQLSTATE
    54000), with the sizes the relay reports."""

    idempotency_key = factory.Sequence(lambda n: f"{n}:".ljust(3000, "k"))
    quarantined_at = factory.SelfAttribute("now")
    error_code = "54000"
    error = factory.LazyAttribute(lambda o: _refused(o))
    tenant_id = None


def _refused(row: object) -> str:
    """The text the relay stores for a row PostgreSQL refused: the driver's one line for the
    refusal (``failures.translate``) and the sizes the live-key index holds."""
    refusal = psycopg.errors.ProgramLimitExceeded(
        f"index row size {bounds.size(row.idempotency_key) + 32} exceeds btree version 4 "
        'maximum 2704 for index "x_jobs_name_tenant_idempotency_live_idx"'
    )
    params = {"input": json.dumps(row.input), "idempotency_key": row.idempotency_key}
    translated = failures.translate(refusal, "default", "x_jobs", params)
    tenant = "none" if row.tenant_id is None else f"{bounds.size(row.tenant_id):,} bytes"
    sizes = (
        f"idempotency key {bounds.size(row.idempotency_key):,} bytes "
        f"(limit {bounds.MAX_KEY_BYTES:,}), tenant_id {tenant} "
        f"(limit {bounds.MAX_TENANT_BYTES:,}), job name {bounds.size(row.job):,} bytes"
    )
    return f"{first_line(translated or refusal)} [{sizes}]"
