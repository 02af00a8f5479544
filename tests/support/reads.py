"""``XJOBS["READ_DATABASE"]``'s tests (issue 46 item 2): the ``replica`` alias (tests/settings.py,
a second database on the suite's server) holds rows the jobs database does not, so a surface
that shows them read from it, and one that shows the jobs database's rows did not."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from uuid import UUID

from django.conf import settings
from django.db import connections
from django.test import override_settings

from django_xjobs.drivers import create
from django_xjobs.drivers.contract import Finish, JobDriver
from tests.drivers.contract.support import claim, request
from tests.support.database import free_port

REPLICA = "replica"
#: the queue only the replica's rows are on
MIRRORED = "mirrored"
#: what a test that reads from the replica marks itself with
BOTH = ["default", REPLICA]


def reading_from(alias: str = REPLICA, **more: object) -> override_settings:
    return override_settings(XJOBS={**settings.XJOBS, "READ_DATABASE": alias, **more})


def replica() -> JobDriver:
    return create("postgres", using=REPLICA)


def seed_replica() -> tuple[UUID, UUID]:
    """Jobs only the replica holds, on queue ``mirrored``: one dead, then two ready; answers
    the first ready one's id and the dead one's."""
    driver = replica()
    driver.jobs().enqueue(request(name="tests.jobs.terminal", key="dead-there", queue=MIRRORED))
    [held] = claim(driver, queues=(MIRRORED,))
    driver.runs().finish(Finish(held.id, held.lease_token, state="dead", error="X_TERMINAL: no"))
    ready = driver.jobs().enqueue(request(key="only-on-the-replica", queue=MIRRORED)).id
    driver.jobs().enqueue(request(key="only-on-the-replica-2", queue=MIRRORED))
    return ready, held.id


@contextmanager
def alias_for(alias: str, **entry: object) -> Iterator[str]:
    """A DATABASES alias added for one test: the suite's ``default`` entry (every key Django
    fills in) with ``entry`` over it; its connection closed and the alias removed after."""
    settings.DATABASES[alias] = {**settings.DATABASES["default"], **entry}
    try:
        yield alias
    finally:
        if alias in connections:
            connections[alias].close()
            del connections[alias]
        del settings.DATABASES[alias]


@contextmanager
def gone_alias() -> Iterator[str]:
    """An alias in DATABASES whose server is not there: a replica that is down."""
    with alias_for("xjobs_gone", PORT=str(free_port())) as alias:
        yield alias


@contextmanager
def unreachable(alias: str) -> Iterator[str]:
    """Alias ``alias``'s server gone for the block: its connection on this thread closed and
    pointed at a port nothing listens on, then put back (a test of it is ``transaction=True``:
    a test's own transaction cannot outlive its connection)."""
    connection = connections[alias]
    port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = str(free_port())
    try:
        yield alias
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port
