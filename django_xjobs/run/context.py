"""What a running job sees: its ``ctx`` (the signal that tells it to stop is in ``run/stop.py``)."""

from __future__ import annotations

import contextvars
import functools
import logging
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn
from uuid import UUID

from ..errors import InvariantError
from .stop import StopSignal

if TYPE_CHECKING:
    from ..durations import Duration
    from ..steps import Steps
    from ..steps.asynchronous import AsyncSteps
    from .controls import RunControls


class JobLogger(logging.LoggerAdapter[logging.Logger]):
    """``ctx.logger``: each line starts with the job's name and id, so the default log format
    says which job wrote it; ``job``, ``job_id`` and ``attempt`` also ride on the record."""

    def __init__(self, job: str, job_id: UUID, attempt: int) -> None:
        # the adapter's fields are made when a line is logged, not for every run (most log
        # nothing): the base __init__ would take them as a finished dict
        self.logger = _logger(job)
        self._fields = (job, job_id, attempt)

    # a property over the base's plain attribute, so the fields are made only when read
    @property
    def extra(self) -> dict[str, Any]:  # type: ignore[override]
        job, job_id, attempt = self._fields
        return {"job": job, "job_id": str(job_id), "attempt": attempt}

    def process(self, msg: object, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        extra = self.extra  # a new dict each time
        kwargs["extra"] = {**extra, **kwargs.get("extra", {})}
        return f"[{extra['job']} {extra['job_id']}] {msg}", kwargs


@functools.cache
def _logger(job: str) -> logging.Logger:
    """One lookup per job name, not per run: ``getLogger`` takes the logging module's lock."""
    return logging.getLogger(f"django_xjobs.jobs.{job}")


@dataclass(frozen=True)
class JobContext:
    """The first argument of every handler. Frozen: a handler reads its run, never rewrites it.

    ``job_id`` and ``run_id`` (the row and this run of it), ``name``, ``queue``, ``attempt``
    (1 on the first run) of ``max_attempts``, the ``inputs``, ``tenant_id`` and
    ``enqueued_by`` (see ``Actor``), ``signal`` (set when the run must stop), ``logger`` (a
    logger whose records carry the job's fields) and ``step`` (durable steps)::

        @job(idempotency_key="receipt:{order_id}")
        def send_receipt(ctx, order_id: int):
            ctx.logger.info("attempt %s of %s", ctx.attempt, ctx.max_attempts)
            order = ctx.step.run("load", lambda: load_order(order_id))
            ctx.signal.raise_if_set()
    """

    job_id: UUID
    run_id: UUID
    name: str
    queue: str
    attempt: int
    max_attempts: int
    inputs: dict[str, Any]
    tenant_id: str | None
    enqueued_by: str | None
    signal: StopSignal
    logger: logging.LoggerAdapter[logging.Logger] = field(repr=False)
    #: the step runner (``ctx.step.run``, ``.atomic``, ``.sleep``, ``.wait_for_event``; awaitable in
    #: ``async def`` handlers)
    step: Steps | AsyncSteps = field(repr=False)
    #: the run's snooze budget and progress writer (None: a ctx a unit test built by hand)
    _controls: RunControls | None = field(default=None, repr=False, compare=False)

    def snooze(self, duration: Duration) -> NoReturn:
        """Put this run back for ``duration`` without spending an attempt, and end it here::

            if not partner_api.ready():
                ctx.snooze("30s")  # runs again in 30 s, same attempt

        The rest of the body does not run (steps it completed stay done). A job may snooze
        ``XJOBS["MAX_SNOOZES"]`` times; the next raises ``SnoozeLimitError`` (terminal)."""
        controls = self._need_controls("snooze")
        controls.snooze(duration)

    async def asnooze(self, duration: Duration) -> NoReturn:
        """``snooze`` for ``async def`` handlers: ``await ctx.asnooze("30s")``."""
        self.snooze(duration)

    def progress(self, done: float, total: float | None = None, note: str = "") -> None:
        """Record how far the run is: ``done`` of ``total`` (or just ``done``), with a note::

            for n, row in enumerate(rows, 1):
                copy(row)
                ctx.progress(n, total=len(rows), note="copying")

        Written on the job's row at most once a second, and once more when the body ends: a
        loop may call it for every item. The admin, ``xjobs show``/``ls`` and ``inspect_job``
        show it."""
        self._need_controls("progress").progress(done, total, note)

    async def aprogress(self, done: float, total: float | None = None, note: str = "") -> None:
        """``progress`` for ``async def`` handlers: ``await ctx.aprogress(3, total=10)``."""
        from asgiref.sync import sync_to_async

        await sync_to_async(self.progress)(done, total, note)

    def _need_controls(self, what: str) -> RunControls:
        if self._controls is None:
            raise InvariantError(
                f"ctx.{what}() needs a run claimed by a worker; this ctx was built by hand",
                hint="run the job through run_until_idle() or a worker to test it",
            )
        return self._controls


#: the run this thread (or task) is executing, for code below the handler (SPEC EXEC-09)
_current: contextvars.ContextVar[JobContext | None] = contextvars.ContextVar(
    "django_xjobs_current_job", default=None
)


def current_job() -> JobContext | None:
    """The ``JobContext`` of the run executing here, or None outside a run.

    Code below a handler (a model's ``save()``, a logging filter, a tenant guard, a nested
    enqueue) can read the job it runs in without having ``ctx`` passed down::

        job = current_job()
        if job is not None:
            audit.record(actor=job.enqueued_by, tenant=job.tenant_id)
    """
    return _current.get()


class JobContextFilter(logging.Filter):
    """Adds the running job's fields to every record logged during a run: ``job``,
    ``job_id``, ``attempt``, ``tenant_id`` and ``enqueued_by`` (None outside a run), so a
    format string or a JSON formatter can show them::

        LOGGING = {
            "filters": {"job": {"()": "django_xjobs.JobContextFilter"}},
            "handlers": {"console": {..., "filters": ["job"]}},
        }
    """

    def filter(self, record: logging.LogRecord) -> bool:
        job = _current.get()
        record.job = getattr(record, "job", None) or (job.name if job else None)
        record.job_id = getattr(record, "job_id", None) or (str(job.job_id) if job else None)
        record.attempt = getattr(record, "attempt", None) or (job.attempt if job else None)
        record.tenant_id = job.tenant_id if job else None
        record.enqueued_by = job.enqueued_by if job else None
        return True
