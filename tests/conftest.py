"""Shared fixtures (the contract harness runs each case on both drivers, the process tests'
``workers``), the lazy embedded PostgreSQL, and the ``unit`` lane.

A test is in the ``unit`` lane when it uses no database fixture, no ``django_db`` mark and no
subprocess (``process`` mark): ``pytest -m unit`` runs those without starting a server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.conf import settings
from django.test import TransactionTestCase

from django_xjobs.drivers import create, install, uninstall
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
        if item.get_closest_marker("process"):
            # Under xdist (`--dist loadgroup`) the process tests run one at a time, in one
            # worker, as in a single-process run: each starts real workers on a wall clock,
            # and two of them starving each other of the two cores missed their deadlines.
            item.add_marker(pytest.mark.xdist_group("process"))


#: under pytest-xdist, the workers that started an embedded server (each starts its own)
_WORKERS_STARTED: list[str] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: tell the controller, which prints the line
        workeroutput["xjobs_embedded_started"] = embedded_started()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    if getattr(node, "workeroutput", {}).get("xjobs_embedded_started"):
        _WORKERS_STARTED.append(node.gateway.id)


def pytest_terminal_summary(terminalreporter) -> None:
    """Say whether this run paid for a server (the unit lane must not)."""
    state = "started" if embedded_started() or _WORKERS_STARTED else "not started"
    terminalreporter.write_line(f"xjobs: embedded PostgreSQL {state}")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix) -> None:
    """The first test that uses the database starts the embedded server (unless DATABASE_URL
    names one); pytest-django runs this just before it creates the test databases.

    Under pytest-xdist each worker has its own test databases (pytest-django suffixes their
    names with the worker's id, ``test_postgres_gw0``) and its own embedded server. The
    ``orders`` database is named after the default one as a child process's settings name it
    (``<default>_orders``, tests/settings.py), so a worker started on ``test_postgres_gw0``
    finds ``test_postgres_gw0_orders`` rather than pytest-django's ``test_postgres_orders_gw0``;
    the ``replica`` database (``READ_DATABASE``'s tests) likewise.
    """
    start_lazily(settings.DATABASES)
    default = settings.DATABASES["default"]
    test_name = default.get("TEST", {}).get("NAME") or f"test_{default['NAME']}"
    settings.DATABASES["orders"].setdefault("TEST", {})["NAME"] = f"{test_name}_orders"
    settings.DATABASES["replica"].setdefault("TEST", {})["NAME"] = f"{test_name}_replica"
    settings.DATABASES["shard"].setdefault("TEST", {})["NAME"] = f"{test_name}_shard"


class Harness:
    """One driver plus the means to move its time: rows are shifted into the past, the same
    for both drivers, so no test waits for a lease or a delay to pass."""

    def __init__(self, driver) -> None:
        self.driver = driver

    def advance(self, seconds: float) -> None:
        self.driver.jobs().age(seconds, only={"jobs"})

    def row(self, job_id):
        return self.driver.reads().get_job(job_id)


def _installed(kind: str) -> Iterator[Harness]:
    driver = create(kind)
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
