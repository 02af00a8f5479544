"""Module-level cron task fixtures (autodiscovered like tests/jobs.py)."""

from __future__ import annotations

from django_xjobs import task

from . import jobs


@task(cron="0 3 * * *", tz="UTC", name="tests.daily", catch_up="skip")
def daily(occurrence):
    return [(jobs.ok, {"n": int(occurrence.timestamp())})]


@task(cron="0 * * * *", tz="UTC", name="tests.hourly_once", catch_up="run-once")
def hourly_once(occurrence):
    return [(jobs.ok, {"n": int(occurrence.timestamp())})]


@task(cron="0 3 * * *", tz="UTC", name="tests.daily_all", catch_up="run-all")
def daily_all(occurrence):
    return [(jobs.ok, {"n": int(occurrence.timestamp())})]


@task(cron="0 2 * * *", tz="Europe/Berlin", name="tests.berlin_2am")
def berlin_2am(occurrence):
    return []


@task(cron="* * * * * *", tz="UTC", name="tests.every_second")
def every_second(occurrence):
    """For the process test of racing schedulers: one job per occurrence."""
    return [(jobs.ok, {"n": int(occurrence.timestamp())})]
