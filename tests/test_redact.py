"""Redaction (issue 26, item 3): values under ``XJOBS["REDACT_KEYS"]`` are masked wherever
inputs are shown and scrubbed from every text a run produces; ``XJOBS["REDACT"]`` runs on every
such text after them. The worker-process proof is tests/test_redact_fleet.py."""

from __future__ import annotations

import json
import logging
import re

import pytest
from django.test import override_settings
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from django_xjobs import redact
from django_xjobs.drivers.contract import EnqueueRequest
from django_xjobs.errors import ConfigInvalidError
from django_xjobs.management import checks
from django_xjobs.testing import run_until_idle
from tests import jobs

SECRET = "pa55-word-in-process"
BASE = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "off"}


def scrub_cards(text: str) -> str:
    """An ``XJOBS["REDACT"]`` hook: card-like numbers no key names."""
    return re.sub(r"\b\d{4}-\d{4}-\d{4}-\d{4}\b", "[card]", text)


def test_values_under_secret_keys_are_masked_at_any_depth_and_any_case():
    """SPEC REDACT-01."""
    inputs = {
        "user": "ada",
        "DB_Password": "x",
        "nested": {"list": [{"X-Api-Key": "k" * 8, "ok": 1}], "Authorization": {"a": "b"}},
    }
    assert redact.mask(inputs) == {
        "user": "ada",
        "DB_Password": "[redacted]",
        "nested": {"list": [{"X-Api-Key": "[redacted]", "ok": 1}], "Authorization": "[redacted]"},
    }
    # every leaf under a secret key is searched for; too short a value is only masked
    assert redact.secrets_of(inputs) == {"k" * 8}
    assert redact.secrets_of({"token": {"a": "abcd1234", "b": [12345678]}}) == {
        "abcd1234",
        "12345678",
    }
    assert redact.redact("got abcd1234 and abcd", {"abcd1234", "abcd"}) == (
        "got [redacted] and [redacted]"
    )


def test_redact_keys_replace_the_defaults():
    """SPEC REDACT-01."""
    with override_settings(XJOBS={**BASE, "REDACT_KEYS": ["pin"]}):
        assert redact.mask({"password": "p", "card_pin": "1234"}) == {
            "password": "p",
            "card_pin": "[redacted]",
        }


def test_a_failed_runs_stored_texts_and_log_lines_hold_no_secret(harness, caplog):
    """SPEC REDACT-03."""
    caplog.set_level(logging.DEBUG, logger="django_xjobs")
    job_id = jobs.secret_echo.enqueue(user="ada", password=SECRET).id
    run_until_idle()
    row = harness.row(job_id)
    assert row.last_error == "ValueError: login failed for ada with [redacted]"
    [entry, *_] = row.errors
    assert "[redacted]" in entry.message and "[redacted]" in entry.traceback
    assert SECRET not in entry.message + entry.traceback
    assert [s.error for s in harness.driver.steps().list(row.run_id) if s.error] == []
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "traceback of tests.jobs.secret_echo" in logged and SECRET not in logged


def test_the_redact_hook_runs_on_every_stored_and_logged_text(harness, caplog):
    """SPEC REDACT-03, REDACT-04: the hook runs after the key scrub, and a value under 4
    characters (``pw``) is masked but not searched for."""
    caplog.set_level(logging.DEBUG, logger="django_xjobs")
    with override_settings(XJOBS={**BASE, "REDACT": "tests.test_redact.scrub_cards"}):
        job_id = jobs.secret_echo.enqueue(user="4111-1111-1111-1111", password="pw").id
        run_until_idle()
    row = harness.row(job_id)
    assert row.last_error == "ValueError: login failed for [card] with pw"
    assert "4111" not in row.errors[0].traceback + row.errors[0].message
    assert "4111" not in "\n".join(r.getMessage() for r in caplog.records)


def test_a_failed_runs_span_records_the_error_scrubbed(harness, monkeypatch):
    """SPEC REDACT-03."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer", provider.get_tracer)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    jobs.secret_echo.enqueue(user="ada", password=SECRET)
    run_until_idle()
    [span, *_] = [s for s in exporter.get_finished_spans() if s.name.startswith("job.")]
    [event] = [e for e in span.events if e.name == "exception"]
    assert event.attributes["exception.message"] == "login failed for ada with [redacted]"
    assert event.attributes["exception.type"] == "builtins.ValueError"
    assert "[redacted]" in event.attributes["exception.stacktrace"]
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "ValueError: login failed for ada with [redacted]"
    assert SECRET not in str([dict(e.attributes) for e in span.events]) + str(span.status)


@pytest.mark.parametrize(
    ("xjobs", "needle"),
    [
        ({"REDACT": "tests.test_redact.nothing_here"}, "cannot be imported"),
        ({"REDACT": "tests.test_redact.SECRET"}, "not callable"),
        ({"REDACT": 42}, "dotted path"),
        ({"REDACT_KEYS": "password"}, "list of key names"),
        ({"REDACT_KEYS": ["password", 3]}, "non-empty strings"),
    ],
)
def test_bad_redact_settings_fail_the_system_check(xjobs, needle):
    """SPEC REDACT-04."""
    with override_settings(XJOBS={**BASE, **xjobs}):
        [error] = checks.check_settings()
        assert error.id == "django_xjobs.E001" and needle in error.msg and error.hint
        with pytest.raises(ConfigInvalidError):
            from django_xjobs import conf

            conf.validate({**BASE, **xjobs})


def test_the_redact_hook_runs_on_a_parked_unknown_jobs_error_too(harness):
    """The unknown and undecodable paths settle texts the handler never saw: the hook still
    sees them before they are stored (here a name carrying what the hook masks). SPEC REDACT-04."""
    payload = {"n": 1}
    with override_settings(XJOBS={**BASE, "REDACT": "tests.test_redact.scrub_cards"}):
        job_id = (
            harness.driver.jobs()
            .enqueue(
                EnqueueRequest(
                    name="tests.jobs.gone.4111-1111-1111-1111",
                    idempotency_key="gone",
                    queue="default",
                    input=payload,
                    input_json=json.dumps(payload),
                    max_attempts=3,
                )
            )
            .id
        )
        run_until_idle()
    row = harness.row(job_id)
    assert row.state == "suspended" and row.last_error.startswith("X_JOB_UNKNOWN")
    assert "4111" not in row.last_error and "[card]" in row.last_error


def test_a_failed_steps_stored_error_holds_no_secret(harness):
    """SPEC REDACT-03."""
    job_id = jobs.secret_step.enqueue(user="ada", password=SECRET).id
    run_until_idle()
    row = harness.row(job_id)
    [step] = harness.driver.steps().list(row.run_id)
    assert step.error == "ValueError: step login failed for ada with [redacted]"
    assert SECRET not in row.last_error and row.state == "dead"
