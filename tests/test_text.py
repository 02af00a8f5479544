"""An error message that cannot be stored as it is (issue 24 §3): one sanitiser
(``django_xjobs.text.storable``) makes every stored text storable and bounded, so a NUL, a lone
surrogate or 100 KB of message no longer makes every settle fail until the job ends as
``X_JOB_CRASHED`` with the real error lost.
"""

from __future__ import annotations

import json
import logging
from io import StringIO

import pytest
from django.core.management import call_command

from django_xjobs import InvariantError, cancel_job, inspect_job, log
from django_xjobs.run.execution import Outcome
from django_xjobs.testing import run_until_idle
from django_xjobs.text import MESSAGE_LIMIT, TRACEBACK_LIMIT, check_name, printable, storable
from tests import jobs

# --- the sanitiser -------------------------------------------------------------------------------


def test_storable_escapes_nul_and_lone_surrogates_and_keeps_the_rest():
    assert storable("a\x00b") == "a\\x00b"
    assert storable("half \ud83d!") == "half \\ud83d!"
    assert storable("café ☕ \U0001f600") == "café ☕ \U0001f600"
    storable("half \ud83d!").encode()  # encodes: what psycopg needs


def test_storable_caps_a_message_keeping_its_head_and_tail():
    text = storable("head " + "x" * 100_000 + " tail")
    assert len(text.encode()) <= MESSAGE_LIMIT
    assert text.startswith("head ") and text.endswith(" tail") and "bytes cut" in text
    assert len(storable("y" * 100_000, TRACEBACK_LIMIT).encode()) <= TRACEBACK_LIMIT


def test_storable_is_idempotent():
    for text in ("a\x00b", "half \ud83d", "z" * 50_000):
        once = storable(text)
        assert storable(once) == once


def test_check_name_refuses_what_storable_would_change():
    check_name("tenant-1", "tenant_id")
    with pytest.raises(InvariantError, match="NUL"):
        check_name("a\x00", "tenant_id")
    with pytest.raises(InvariantError, match="lone surrogate"):
        check_name("a\udc80", "tenant_id")


def test_printable_drops_terminal_escape_sequences():
    shown = printable("red \x1b[31mALERT\x1b[0m \x1b]0;owned\x07title\rback\x08 tab\tnl\n")
    assert shown == "red ALERT titleback tab\tnl\n"


# --- settling an error whose text PostgreSQL cannot store --------------------------------------


@pytest.mark.parametrize(
    ("kind", "stored"), [("nul", "bad \\x00 byte"), ("surrogate", "half an emoji: \\ud83d")]
)
def test_an_unstorable_error_settles_with_its_text_escaped(harness, kind, stored):
    job_id = jobs.unstorable_error.enqueue(kind=kind).id
    [execution] = run_until_idle()
    assert execution.outcome == Outcome.RETRIED  # settled: not left running on its lease
    row = harness.row(job_id)
    assert (row.state, row.attempt) in {("ready", 1), ("delayed", 1)}
    assert row.last_error == f"ValueError: {stored}"
    assert row.errors[-1].message == stored


def test_a_terminal_error_with_a_nul_is_dead_at_once_with_its_message(harness):
    job_id = jobs.unstorable_error.enqueue(kind="terminal-nul").id
    [execution] = run_until_idle()
    assert execution.outcome == Outcome.DEAD_LETTERED
    row = harness.row(job_id)
    assert (row.state, row.stop_reason, row.attempt) == ("dead", "terminal", 1)
    assert row.last_error.startswith("X_TERMINAL: declined \\x00 for good")


def test_a_huge_error_is_stored_capped(harness):
    job_id = jobs.unstorable_error.enqueue(kind="huge").id
    run_until_idle()
    row = harness.row(job_id)
    assert row.last_error.startswith("ValueError: xxx")
    assert len(row.last_error.encode()) <= MESSAGE_LIMIT  # was stored whole: 100 KB
    assert "bytes cut" in row.last_error


def test_a_step_failing_with_a_nul_records_it_escaped(harness):
    job_id = jobs.unstorable_step_error.enqueue(kind="nul").id
    run_until_idle()
    trace = inspect_job(job_id)
    assert trace["state"] == "dead"
    [step] = trace["steps"]
    assert step["error"] == "ValueError: bad \\x00 byte"


def test_a_cancel_reason_is_stored_through_the_sanitiser(harness):
    job_id = jobs.ok.enqueue(n=41).id
    trace = cancel_job(job_id, reason="asked \x00 by \ud83d" + "!" * 10_000)
    assert trace["state"] == "cancelled"
    stored = harness.row(job_id).last_error
    assert stored.startswith("asked \\x00 by \\ud83d!!!")
    assert len(stored.encode()) <= MESSAGE_LIMIT


def test_the_cli_prints_stored_text_without_escape_sequences(harness):
    job_id = jobs.ok.enqueue(n=42).id
    cancel_job(job_id, reason="\x1b[2J\x1b[31mwiped\x1b[0m")
    out = StringIO()
    call_command("xjobs", "show", str(job_id), stdout=out)
    assert "\x1b" not in out.getvalue() and "wiped" in out.getvalue()
    out = StringIO()
    call_command("xjobs", "show", str(job_id), "--json", stdout=out)
    assert json.loads(out.getvalue())["last_error"] == "\x1b[2J\x1b[31mwiped\x1b[0m"


def test_a_log_line_carries_no_nul_lone_surrogate_or_megabyte(caplog):
    """A log line is printed text (issue 24 §3): a file handler writing UTF-8 cannot encode a
    lone surrogate, and a 1 MB message would be copied whole into every line."""
    caplog.set_level(logging.INFO, logger="django_xjobs")
    log.event(logging.ERROR, "xjobs.test.text", error="a \x00 b \ud83d c" + "x" * 1_000_000)
    [record] = caplog.records
    message = record.getMessage()
    message.encode()  # no lone surrogate left
    assert "a \\x00 b \\ud83d c" in message and "\x00" not in message
    assert len(message.encode()) < 17 * 1024
    assert record.fields["error"].startswith("a \\x00 b \\ud83d c")


# --- did you mean (issue 42) -------------------------------------------------------------------


def test_did_you_mean_names_the_close_one_or_nothing():
    from django_xjobs.text import did_you_mean

    keys = ["VISIBILITY_TIMEOUT", "POLL_INTERVAL", "QUEUES"]
    assert did_you_mean("VISIBILTY_TIMEOUT", keys) == "did you mean 'VISIBILITY_TIMEOUT'?"
    assert did_you_mean("visibility_timeout", keys) == "did you mean 'VISIBILITY_TIMEOUT'?"
    assert did_you_mean("QUEUE", keys) == "did you mean 'QUEUES'?"
    assert did_you_mean("SOMETHING_ELSE", keys) == ""
    assert did_you_mean(3, keys) == ""
