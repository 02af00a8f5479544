"""Durations (SPEC §0 conventions, DESIGN §7): timedelta, seconds, or a string -> seconds.

Unreadable input raises ``DurationInvalidError`` (X_DURATION_INVALID); a readable duration that
is zero, negative, NaN or infinite raises ``InvariantError`` (X_INVARIANT) naming the field.
"""

import math
from datetime import timedelta
from decimal import Decimal

import pytest

from django_xjobs.durations import (
    format_seconds,
    parse_command_line,
    parse_duration,
    parse_optional,
)
from django_xjobs.errors import DurationInvalidError, InvariantError, XJobsError

# --- accepted forms -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("1ms", 0.001),
        ("30s", 30),
        ("2sec", 2),
        ("5m", 300),
        ("5min", 300),
        ("2h", 7200),
        ("3hr", 10800),
        ("3d", 259200),
        ("1w", 604800),
        ("1.5h", 5400),
        ("0.25s", 0.25),
    ],
)
def test_units(text, seconds):
    """Every unit of the SPEC convention: ms, s/sec, m/min, h/hr, d, w."""
    assert parse_duration(text) == pytest.approx(seconds)


def test_m_is_minutes_never_months():
    """SPEC §0: ``m`` is minutes, never months."""
    assert parse_duration("1m") == 60
    assert parse_duration("1M") == 60


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2h30m", 9000),
        ("1m30s", 90),
        ("1d2h", 93600),
        ("1h500ms", 3600.5),
        ("1w1d", 691200),
        ("2h 30m", 9000),
        ("  30s  ", 30),
        ("2H30M", 9000),
    ],
)
def test_compound_forms(text, seconds):
    """SPEC §0: compound forms such as ``2h30m`` are accepted."""
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("PT2H30M", 9000),
        ("PT30S", 30),
        ("PT5M", 300),
        ("PT1.5H", 5400),
        ("P1D", 86400),
        ("P1W", 604800),
        ("P1DT12H", 129600),
        ("pt2h30m", 9000),
    ],
)
def test_iso_8601(text, seconds):
    """SPEC §0: ISO-8601 durations (``PT2H30M``) are accepted."""
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("value", "seconds"), [(1, 1.0), (30, 30.0), (0.5, 0.5), (86400, 86400.0)])
def test_numbers_are_seconds(value, seconds):
    """DESIGN §7: a number is a count of seconds (not milliseconds)."""
    result = parse_duration(value)
    assert result == seconds
    assert isinstance(result, float)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (timedelta(seconds=30), 30),
        (timedelta(minutes=5), 300),
        (timedelta(milliseconds=250), 0.25),
        (timedelta(days=1, hours=2), 93600),
    ],
)
def test_timedelta(value, seconds):
    """DESIGN §7: a ``timedelta`` is accepted."""
    assert parse_duration(value) == pytest.approx(seconds)


# --- unreadable input: X_DURATION_INVALID ---------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "3",  # a bare numeric string is refused (SPEC §0)
        "30",
        "",
        "   ",
        "garbage",
        "5 parsecs",
        "5 years",
        "s",
        "h30m",
        "30s garbage",
        "1e3s",
        "P",
        "PT",
        "P1DT",
        "P1M",  # months are not a duration unit
        "inf",
        "nan",
    ],
)
def test_unreadable_strings_are_refused(value):
    with pytest.raises(DurationInvalidError) as caught:
        parse_duration(value, field="timeout")
    assert caught.value.code == "X_DURATION_INVALID"
    assert "timeout" in caught.value.message
    assert caught.value.hint


@pytest.mark.parametrize(
    "value",
    [True, False, None, [30], {"s": 30}, (30,), Decimal("30"), object()],
    ids=["True", "False", "None", "list", "dict", "tuple", "Decimal", "object"],
)
def test_non_duration_types_are_refused(value):
    """A bool is not a number of seconds here, and other types have no duration form."""
    with pytest.raises(DurationInvalidError) as caught:
        parse_duration(value, field="delay")
    assert caught.value.code == "X_DURATION_INVALID"
    assert "delay" in caught.value.message


# --- readable but not positive and finite: X_INVARIANT --------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        0,
        0.0,
        -1,
        -0.5,
        math.nan,
        math.inf,
        -math.inf,
        timedelta(0),
        timedelta(seconds=-5),
        "0s",
        "0ms",
        "0h0m",
        "PT0S",
        "1" * 400 + "s",  # overflows to infinity
    ],
    ids=lambda v: repr(v)[:20],
)
def test_zero_negative_nan_inf_raise_invariant_naming_the_field(value):
    """JOB-05 / DESIGN §7: zero, negative, NaN and infinite durations are refused."""
    with pytest.raises(InvariantError) as caught:
        parse_duration(value, field="step_timeout")
    error = caught.value
    assert error.code == "X_INVARIANT"
    assert "step_timeout" in error.message
    assert "step_timeout" in str(error)
    assert error.hint


def test_invariant_is_not_a_duration_invalid():
    """The two refusals are distinct codes: 0 is readable, only out of range."""
    with pytest.raises(XJobsError) as caught:
        parse_duration(0)
    assert not isinstance(caught.value, DurationInvalidError)


def test_negative_string_is_refused():
    """A negative string is not a positive duration, whichever code says so."""
    with pytest.raises((DurationInvalidError, InvariantError)):
        parse_duration("-5s")


def test_default_field_name():
    with pytest.raises(InvariantError, match="duration"):
        parse_duration(0)


def test_str_of_error_starts_with_code():
    """SPEC §0: ``str(error)`` begins with the code."""
    with pytest.raises(DurationInvalidError) as caught:
        parse_duration("garbage")
    assert str(caught.value).startswith("X_DURATION_INVALID: ")


# --- parse_optional -------------------------------------------------------------------------


def test_parse_optional_lets_none_through():
    assert parse_optional(None, field="timeout") is None
    assert parse_optional("1m", field="timeout") == 60


def test_parse_optional_still_refuses_zero():
    with pytest.raises(InvariantError, match="event_poll"):
        parse_optional(0, field="event_poll")


# --- format_seconds -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.001, "1ms"),
        (0.5, "500ms"),
        (1, "1s"),
        (1.5, "1.5s"),
        (59, "59s"),
        (60, "1m"),
        (90, "1.5m"),
        (3600, "1h"),
        (5400, "1.5h"),
        (86400, "1d"),
        (172800, "2d"),
    ],
)
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text


@pytest.mark.parametrize("text", ["500ms", "30s", "5m", "2h", "3d", "1.5h"])
def test_format_seconds_round_trips(text):
    assert parse_duration(format_seconds(parse_duration(text))) == pytest.approx(
        parse_duration(text)
    )


# --- one parser everywhere (issue 10, item 6) ------------------------------------------------


def test_a_bare_numeric_string_in_python_says_it_needs_a_unit():
    """In Python and settings a string needs a unit; the error shows the fix."""
    with pytest.raises(DurationInvalidError) as caught:
        parse_duration("30", field="delay")
    assert str(caught.value).startswith("X_DURATION_INVALID: delay='30' has no unit")
    assert '"30s"' in caught.value.hint


def test_a_bare_numeric_string_in_settings_is_refused_and_a_number_is_seconds():
    from django_xjobs.conf import validate
    from django_xjobs.errors import ConfigInvalidError

    with pytest.raises(ConfigInvalidError, match=r"POLL_INTERVAL.*has no unit"):
        validate({"POLL_INTERVAL": "5"})
    assert validate({"POLL_INTERVAL": 5}).poll_interval == 5.0
    assert validate({"POLL_INTERVAL": "5s"}).poll_interval == 5.0


@pytest.mark.parametrize(
    ("text", "seconds"), [("30", 30.0), ("0.5", 0.5), ("90s", 90.0), ("2h30m", 9000.0)]
)
def test_on_the_command_line_a_bare_number_is_seconds(text, seconds):
    assert parse_command_line(text, flag="--older-than") == seconds


def test_an_option_not_given_stays_none():
    assert parse_command_line(None, flag="--poll-interval") is None


@pytest.mark.parametrize(
    ("text", "error", "wrong"),
    [
        ("0", InvariantError, "must be above zero"),
        ("-5", InvariantError, "must be above zero"),
        ("soon", DurationInvalidError, "is not a duration"),
        ("inf", DurationInvalidError, "is not a duration"),
    ],
)
def test_a_bad_command_line_duration_is_told_in_the_shells_words(text, error, wrong):
    with pytest.raises(error) as caught:
        parse_command_line(text, flag="--older-than")
    assert caught.value.message == f"--older-than {text} {wrong}"
    assert "timedelta" not in str(caught.value) and "seconds (30)" in caught.value.hint


# every duration option of every command goes through parse_command_line
DURATION_OPTIONS = [
    ("xjobs", ["prune"], "--older-than"),
    ("xjobs_worker", ["--burst"], "--visibility-timeout"),
    ("xjobs_worker", ["--burst"], "--poll-interval"),
    ("xjobs_relay", ["--once"], "--interval"),
    ("xjobs_relay", ["--once"], "--claim-lease"),
    ("xjobs_scheduler", [], "--tick-interval"),
    ("xjobs_scheduler", [], "--leader-ttl"),
]


@pytest.mark.parametrize(("command", "args", "flag"), DURATION_OPTIONS)
def test_every_duration_option_shares_the_command_line_parser(db, command, args, flag):
    """Refusing ``0`` in the shell's words proves the option went through the one parser."""
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError) as caught:
        call_command(command, *args, f"{flag}=0")
    assert str(caught.value).startswith(f"X_INVARIANT: {flag} 0 must be above zero")


def test_bare_numbers_are_accepted_by_the_relay(db):
    """``--claim-lease 30`` used to be handed to the settings parser, which wants a unit."""
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("xjobs_relay", "--once", "--claim-lease", "30", "--interval", "1", stdout=out)
    assert out.getvalue().strip() == "published 0"


@pytest.mark.parametrize("delay", [0, 0.0, timedelta(0)])
def test_delay_zero_means_now_on_both_drivers(harness, delay):
    """``delay=0`` is not refused as a non-positive duration: the job is due at once."""
    from django_xjobs.testing import run_until_idle
    from tests import jobs

    job_id = jobs.ok.using(delay=delay).enqueue(n=70).id
    assert harness.row(job_id).state == "ready"
    assert [e.job.id for e in run_until_idle()] == [job_id]
    assert harness.row(job_id).state == "done"
