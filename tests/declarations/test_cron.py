"""One cron string, one schedule (issue 23): the six-field form, which croniter reads with
seconds last and Quartz, Spring and node's parsers with seconds first, is refused; seconds are
asked for by name (``seconds=``); an out-of-range value names its field. Checked when ``@cron``
declares the schedule (DESIGN Q-06), above a function or a ``django.tasks`` task, and again by
``manage.py check`` (``django_xjobs.E016``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core import checks
from django.test import override_settings

from django_xjobs import cron
from django_xjobs.backends.tasks import task
from django_xjobs.declarations.cron import (
    CronHandle,
    occurrences_between,
    registered_crons,
    unregister,
)
from django_xjobs.declarations.registry import crons
from django_xjobs.errors import JobDefinitionError
from tests import crons as fixtures
from tests.backends.test_tasks_cron import TASKS, _report


def nothing(occurrence):
    return []


def declare(schedule: str, seconds: str | None, name: str) -> CronHandle:
    """``@cron`` as a user writes it: ``seconds=`` only when there are seconds."""
    extra = {} if seconds is None else {"seconds": seconds}
    return cron(schedule, tz="UTC", name=name, **extra)(nothing)


@pytest.mark.parametrize("schedule", ["*/20 * * * * *", "0 */20 * * * *", "* * * * * *"])
def test_a_six_field_schedule_is_refused_and_the_hint_names_seconds(schedule):
    with pytest.raises(JobDefinitionError) as caught:
        cron(schedule, tz="UTC", name="test_cron_meaning.six")(nothing)
    error = caught.value
    assert error.code == "X_CRON_INVALID" and "6 fields" in error.message
    assert "seconds=" in error.hint and "\n" not in str(error)
    assert "test_cron_meaning.six" not in {c.name for c in registered_crons()}


def test_the_hint_spells_both_readings_of_a_six_field_schedule():
    with pytest.raises(JobDefinitionError) as caught:
        cron("*/20 * * * * *", tz="UTC", name="test_cron_meaning.six")(nothing)
    assert '@cron("* * * * *", seconds="*/20", ...)' in caught.value.hint  # Quartz's reading
    assert '@cron("*/20 * * * *", seconds="*", ...)' in caught.value.hint  # croniter's


def test_a_six_field_schedule_above_a_task_is_refused_too():
    with override_settings(TASKS=TASKS), pytest.raises(JobDefinitionError) as caught:
        cron("*/20 * * * * *", tz="UTC", name="test_cron_meaning.task")(task(_report))
    assert caught.value.code == "X_CRON_INVALID" and "seconds=" in caught.value.hint
    assert "test_cron_meaning.task" not in {c.name for c in registered_crons()}


def test_seconds_by_name_fire_every_20_seconds():
    """The schedule the six-field string meant to a Quartz reader: three a minute, not 60."""
    handle = cron("* * * * *", seconds="*/20", tz="UTC", name="test_cron_meaning.every_20s")(
        nothing
    )
    try:
        start = datetime(2026, 7, 26, 12, 0, tzinfo=UTC)
        fired = occurrences_between(handle, start, start + timedelta(minutes=1), limit=100)
        assert [f.second for f in fired] == [20, 40, 0]
        assert handle.describe()["seconds"] == "*/20" and handle.schedule == "* * * * *"
    finally:
        unregister("test_cron_meaning.every_20s")


def test_a_cron_without_seconds_fires_at_second_zero_and_describes_no_seconds():
    start = datetime(2026, 7, 26, 2, 0, tzinfo=UTC)
    assert fixtures.daily.next_occurrence(start) == datetime(2026, 7, 26, 3, 0, tzinfo=UTC)
    assert "seconds" not in fixtures.daily.describe()


@pytest.mark.parametrize(
    ("schedule", "seconds", "field", "bound"),
    [
        ("60 * * * *", None, "minute", "0-59"),
        ("0 25 * * *", None, "hour", "0-23"),
        ("0 3-24 * * *", None, "hour", "0-23"),
        ("0 3 32 * *", None, "day-of-month", "1-31"),
        ("0 3 0 * *", None, "day-of-month", "1-31"),
        ("0 3 * 13 *", None, "month", "1-12"),
        ("0 3 * * 8", None, "day-of-week", "0-7"),
        ("* * * * *", "60", "seconds", "0-59"),
    ],
)
def test_an_out_of_range_value_names_its_field(schedule, seconds, field, bound):
    with pytest.raises(JobDefinitionError) as caught:
        declare(schedule, seconds, "test_cron_meaning.range")
    error = caught.value
    assert error.code == "X_CRON_INVALID"
    assert f"the {field} field" in error.message and bound in error.message
    assert "\n" not in str(error)


@pytest.mark.parametrize(
    ("schedule", "seconds", "field"),
    [("x * * * *", None, "minute"), ("*/0 * * * *", None, "minute"), ("* * * * *", "a", "seconds")],
)
def test_a_malformed_field_is_named(schedule, seconds, field):
    with pytest.raises(JobDefinitionError) as caught:
        declare(schedule, seconds, "test_cron_meaning.bad")
    assert f"the {field} field" in caught.value.message


@pytest.mark.parametrize("seconds", ["*/20 *", 20, ""])
def test_seconds_must_be_one_field(seconds):
    with pytest.raises(JobDefinitionError) as caught:
        cron("* * * * *", seconds=seconds, tz="UTC", name="test_cron_meaning.bad")(nothing)
    assert caught.value.code == "X_CRON_INVALID" and "seconds=" in caught.value.message


def test_check_refuses_a_registered_cron_whose_schedule_has_six_fields():
    """A handle registered without the decorator is read again by ``manage.py check``."""
    handle = CronHandle(
        nothing,
        name="test_cron_meaning.raw",
        schedule="*/20 * * * * *",
        tz="UTC",
        catch_up="skip",
        max_catch_up=10,
    )
    crons.register(handle)
    try:
        found = checks.run_checks()
    finally:
        unregister("test_cron_meaning.raw")
    [error] = [m for m in found if m.id == "django_xjobs.E016"]
    assert "test_cron_meaning.raw" in error.msg and "6 fields" in error.msg
    assert "seconds=" in error.hint
    assert not [m for m in checks.run_checks() if m.id == "django_xjobs.E016"]


def test_the_admin_and_the_manifest_show_the_seconds_apart(admin_client):
    """Every screen spells a seconds cron the way it was declared: never as a sixth field."""
    page = admin_client.get("/admin/django_xjobs/job/crons/")
    listed = {c["name"]: c for c in page.context["crons"]}
    assert listed["tests.every_second"]["schedule"] == "* * * * * seconds=*"
    assert listed["tests.daily"]["schedule"] == "0 3 * * *"
    described = fixtures.every_second.describe()
    assert (described["schedule"], described["seconds"]) == ("* * * * *", "*")


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("nightly\x00", "NUL"),
        ("nightly\udc80", "lone surrogate"),
        ("nightly\x1b[2J\x1b]0;owned\x07", "terminal escape"),
        ("night\nly", "control character"),
        ("n" * 201, "at most 200"),
    ],
)
def test_a_cron_name_is_checked_like_every_stored_name(name, says):
    """Issue 40: cron names were never checked; a NUL broke pause and resume and made ``xjobs
    crons`` report the database unavailable, and an escape in a name reached the terminal
    through every error message that quoted it."""
    with pytest.raises(JobDefinitionError) as caught:
        cron("0 3 * * *", tz="UTC", name=name)(nothing)
    assert says in caught.value.message and "\x1b" not in str(caught.value)
    assert name not in {c.name for c in registered_crons()}


def test_max_catch_up_is_bounded():
    with pytest.raises(JobDefinitionError, match="from 1 to 1,000"):
        cron("0 3 * * *", tz="UTC", name="test_cron_meaning.many", max_catch_up=10**9)(nothing)
    assert "test_cron_meaning.many" not in {c.name for c in registered_crons()}


@pytest.mark.parametrize(
    ("schedule", "warned"),
    [
        ("0 9 13 * 5", True),  # every Friday and every 13th, not Friday the 13th
        ("0 9 1-7 * mon", True),
        ("0 9 13 * *", False),
        ("0 9 * * 5", False),
        ("0 9 * * *", False),
    ],
)
def test_check_warns_when_both_day_fields_are_restricted(schedule, warned):
    """Issue 42: cron's OR rule for the two day fields reads as AND to most people."""
    cron(schedule, tz="UTC", name="test_cron_meaning.days")(nothing)
    try:
        found = [m for m in checks.run_checks() if m.id == "django_xjobs.W005"]
    finally:
        unregister("test_cron_meaning.days")
    assert bool(found) is warned
    if warned:
        [warning] = found
        assert "test_cron_meaning.days" in warning.msg and "either" in warning.msg
        assert warning.level == checks.WARNING and "return []" in warning.hint
