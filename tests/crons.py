"""Module-level cron fixtures, imported by tests/jobs.py (only jobs.py is discovered)."""

from __future__ import annotations

from django_xjobs import cron

from . import jobs, tasks  # noqa: F401 - tasks: a cron above a django.tasks task


@cron("0 3 * * *", tz="UTC", name="tests.daily", catch_up="skip")
def daily(occurrence):
    return [(jobs.ok, {"n": int(occurrence.timestamp())})]


@cron("0 * * * *", tz="UTC", name="tests.hourly_once", catch_up="run-once")
def hourly_once(occurrence):
    return [(jobs.ok, {"n": int(occurrence.timestamp())})]


@cron("0 3 * * *", tz="UTC", name="tests.daily_all", catch_up="run-all")
def daily_all(occurrence):
    return [(jobs.ok, {"n": int(occurrence.timestamp())})]


@cron("0 2 * * *", tz="Europe/Berlin", name="tests.berlin_2am")
def berlin_2am(occurrence):
    return []


@cron("* * * * *", seconds="*", tz="UTC", name="tests.every_second")
def every_second(occurrence):
    """For the process test of racing schedulers: one job per occurrence."""
    return [(jobs.ok, {"n": int(occurrence.timestamp())})]
