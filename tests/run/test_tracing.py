"""OpenTelemetry: the enqueue's trace is stamped on the row (SPEC ENQ-12, SE-55) and the run
executes in a child span ``job.<name>`` with its attributes (EXEC-11)."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from django_xjobs.run.tracing import current_traceparent
from django_xjobs.testing import run_until_idle
from tests import jobs

EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))


@pytest.fixture(autouse=True)
def tracer_provider(monkeypatch):
    monkeypatch.setattr(trace, "get_tracer", PROVIDER.get_tracer)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: PROVIDER)
    EXPORTER.clear()
    yield
    EXPORTER.clear()


def test_enq_12_an_enqueue_inside_a_span_stamps_its_traceparent_and_the_run_is_its_child(harness):
    """SPEC EXEC-11: the run executes in a span ``job.<name>``, a child of the row's
    ``traceparent``, with its attributes."""
    with PROVIDER.get_tracer("app").start_as_current_span("checkout") as span:
        job_id = jobs.important.using(enqueued_by="user:7").enqueue(n=1).id
        context = span.get_span_context()
    row = harness.row(job_id)
    flags = int(context.trace_flags)
    assert row.traceparent == f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"
    [run] = run_until_idle()
    assert run.outcome == "completed"
    [job_span] = [s for s in EXPORTER.get_finished_spans() if s.name == "job.tests.jobs.important"]
    assert job_span.parent.span_id == context.span_id
    assert job_span.context.trace_id == context.trace_id
    assert job_span.attributes["job.name"] == "tests.jobs.important"
    assert job_span.attributes["job.id"] == str(job_id)
    assert job_span.attributes["job.attempt"] == 1
    assert job_span.attributes["job.enqueued_by"] == "user:7"


def test_se_55_no_span_means_no_traceparent(harness):
    assert current_traceparent() is None
    job_id = jobs.ok.enqueue(n=1).id
    assert harness.row(job_id).traceparent is None
    run_until_idle()
    [job_span] = EXPORTER.get_finished_spans()
    assert job_span.parent is None  # a root span of its own


def test_without_a_configured_provider_runs_are_not_wrapped_in_spans(harness, monkeypatch):
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: trace.ProxyTracerProvider())
    jobs.ok.enqueue(n=3)
    [run] = run_until_idle()
    assert run.outcome == "completed" and EXPORTER.get_finished_spans() == ()
