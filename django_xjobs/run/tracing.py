"""Optional OpenTelemetry: an enqueue stamps the current trace on the job (SPEC ENQ-12), and a
run executes in a child span ``job.<name>`` (EXEC-11). Without ``opentelemetry-api`` installed
both are no-ops.

A span never records an exception's raw text: an error that ends the run is recorded through
``redact.redact`` (the run's secrets and ``XJOBS["REDACT"]``), like every stored or logged text."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterator
from typing import Any

from ..errors import StepSuspension
from ..redact import redact

try:  # an optional dependency: tracing is off without it
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    TRACING = True
except ImportError:  # pragma: no cover - depends on the environment
    TRACING = False


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, or None (no span, or an empty span id:
    never an all-zero header, SPEC SE-55)."""
    if not TRACING:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid or not context.span_id:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


#: what a run executes in when no tracer provider is configured (stateless, so shared)
_NO_SPAN: contextlib.AbstractContextManager[None] = contextlib.nullcontext()


def job_span(job: object) -> contextlib.AbstractContextManager[None]:
    """Run a job in span ``job.<name>``, a child of the trace that enqueued it when it had one."""
    if not TRACING or isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        # no provider configured: a no-op span would still cost a context switch per job, and
        # a generator-based context manager a few microseconds more
        return _NO_SPAN
    return _span(job)


@contextlib.contextmanager
def _span(job: Any) -> Iterator[None]:
    parent = None
    if getattr(job, "traceparent", None):
        parent = TraceContextTextMapPropagator().extract({"traceparent": job.traceparent})
    attributes = {"job.name": job.name, "job.id": str(job.id), "job.attempt": job.attempt}
    if job.enqueued_by:
        attributes["job.enqueued_by"] = job.enqueued_by
    tracer = trace.get_tracer("django_xjobs")
    # the SDK's own recording would put str(error) and the traceback on the span verbatim
    with tracer.start_as_current_span(
        f"job.{job.name}",
        context=parent,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except StepSuspension:  # a parked run is not an error
            raise
        except BaseException as error:
            record_error(span, error)
            raise


def record_error(span: Any, error: BaseException) -> None:
    """Record ``error`` on ``span`` as the SDK would (an ``exception`` event, an ERROR status),
    with every text scrubbed first."""
    kind = type(error)
    message = redact(str(error))
    span.add_event(
        "exception",
        {
            "exception.type": f"{kind.__module__}.{kind.__qualname__}",
            "exception.message": message,
            "exception.stacktrace": redact("".join(traceback.format_exception(error))),
            "exception.escaped": "True",
        },
    )
    span.set_status(Status(StatusCode.ERROR, f"{kind.__name__}: {message}"))
