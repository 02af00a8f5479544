"""The test settings with OpenTelemetry on: every finished span is written to stderr as JSON,
so a test reading a real worker's stderr sees what a trace exporter would have been sent."""

import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from tests.settings import *  # noqa: F403

_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
trace.set_tracer_provider(_provider)
