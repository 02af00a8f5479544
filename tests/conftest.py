"""Shared fixtures (the contract harness runs each case on both drivers, the process tests'
``workers``), the lazy embedded PostgreSQL, and the ``unit`` lane.

A test is in the ``unit`` lane when it uses no database fixture, no ``django_db`` mark and no
subprocess (``process`` mark): ``pytest -m unit`` runs those without starting a server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test import TransactionTestCase

from django_xjobs.drivers import install, uninstall
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.drivers.postgres import PostgresDriver
from django_xjobs.testing.postgres import embedded_started, start_lazily
from tests.support.process import WorkerProcess

#: fixtures that reach the database; a test whose fixture closure has none of them is a unit test
DATABASE_FIXTURES = frozenset({"django_db_setup", "db", "transactional_db", "live_server"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        uses_database = not DATABASE_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
        cls = getattr(item, "cls", None)  # Django's TestCase sets its database up itself
        uses_database |= cls is not None and issubclass(cls, TransactionTestCase)
        marked = item.get_closest_marker("django_db") or item.get_closest_marker("process")
        if not uses_database and marked is None:
            item.add_marker(pytest.mark.unit)


def pytest_terminal_summary(terminalreporter) -> None:
    """Say whether this run paid for a server (the unit lane must not)."""
    state = "started" if embedded_started() else "not started"
    terminalreporter.write_line(f"xjobs: embedded PostgreSQL {state}")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix) -> None:
    """The first test that uses the database starts the embedded server (unless DATABASE_URL
    names one); pytest-django runs this just before it creates the test databases."""
    start_lazily(settings.DATABASES)


class Harness:
    """One driver plus the means to move its time: rows are shifted into the past, the same
    for both drivers, so no test waits for a lease or a delay to pass."""

    def __init__(self, driver) -> None:
        self.driver = driver

    def advance(self, seconds: float) -> None:
        if isinstance(self.driver, MemoryDriver):
            self.driver.shift(seconds)
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE x_jobs SET run_at = run_at - %(d)s, visible_at = visible_at - %(d)s,"
                " created_at = created_at - %(d)s, updated_at = updated_at - %(d)s,"
                " started_at = started_at - %(d)s,"
                " last_attempted_at = last_attempted_at - %(d)s",
                {"d": timedelta(seconds=seconds)},
            )
            cursor.execute(
                "UPDATE x_workers SET started_at = started_at - %(d)s,"
                " last_seen = last_seen - %(d)s, seen_since = seen_since - %(d)s,"
                " expires_at = expires_at - %(d)s",
                {"d": timedelta(seconds=seconds)},
            )

    def row(self, job_id):
        return self.driver.get_job(job_id)


def _installed(kind: str) -> Iterator[Harness]:
    driver = MemoryDriver() if kind == "memory" else PostgresDriver("default")
    install(driver)
    try:
        yield Harness(driver)
    finally:
        uninstall(driver)


@pytest.fixture(params=["memory", "postgres"])
def harness(request, db) -> Iterator[Harness]:
    """Each case on both drivers, inside the test's transaction."""
    yield from _installed(request.param)


@pytest.fixture(params=["memory", "postgres"])
def live_harness(request, transactional_db) -> Iterator[Harness]:
    """Both drivers with committed rows, for workers whose threads use their own connections."""
    yield from _installed(request.param)


@pytest.fixture
def workers(transactional_db) -> Iterator[Callable[..., WorkerProcess]]:
    """Start ``manage.py xjobs_worker`` processes that see the committed rows; each one is
    killed at teardown, before the flush."""
    started: list[WorkerProcess] = []

    def start(*args: str, **kwargs) -> WorkerProcess:
        process = WorkerProcess(*args, **kwargs)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
