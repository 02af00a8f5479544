"""Time in tests follows freezegun on PostgreSQL (``django_xjobs.testing`` turns it on).

Python code reads ``clock.system_clock``, which reads ``datetime.now()``: freezegun patches
that, so the executor, the memory driver and the scheduler's cron occurrences already see the
frozen time. PostgreSQL does not: every due, lease and expiry comparison reads the database's
``now()`` (DESIGN: time two processes compare comes from the database), which no Python patch
reaches, and inside a test's transaction it does not move at all.

So while freezegun is active, the jobs database's ``now()`` is the frozen time: before each
statement on that connection, the frozen time is set as ``xjobs.now`` and the search path puts
``xjobs_clock.now()`` (which returns it) ahead of ``pg_catalog.now()``. Every statement the
library runs, and the test's own, then reads the clock freezegun holds: a job delayed ten
minutes is due after ``freezer.tick(timedelta(minutes=10))`` and not before. Inside a
transaction (a ``db`` test, a ``TestCase``) both settings are local to it; in autocommit they
last for the session, and the first statement after the freeze ends gives the server's clock
back. Django's
``Now()`` reads ``statement_timestamp()``, which stays the server's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

from ... import conf
from ...clock import frozen_now
from . import sql

STATEMENTS = sql.load(Path(__file__).with_name("frozen.sql"))
#: set on a connection whose now() may still be a frozen time
_FROZEN = "_xjobs_frozen"


def follow(connection: BaseDatabaseWrapper) -> None:
    """Make ``connection``'s ``now()`` the frozen time, or give back the server's once no
    freeze is active."""
    now = frozen_now()
    raw = connection.connection
    if now is None:
        if getattr(connection, _FROZEN, False):
            setattr(connection, _FROZEN, False)
            with raw.cursor() as cursor:
                cursor.execute(STATEMENTS["reset"])
        return
    setattr(connection, _FROZEN, True)
    with raw.cursor() as cursor:
        local = connection.in_atomic_block
        cursor.execute(STATEMENTS["follow"], {"now": now.isoformat(), "local": local})
        row = cursor.fetchone()
        if row is not None and not row[-1]:
            cursor.execute(STATEMENTS["create_schema"])
            cursor.execute(STATEMENTS["create_now"])


class _Follower:
    """The execute wrapper: follows freezegun before each statement. ``idle`` tells the
    driver's cursor choice (drivers/postgres/sql.py) that it would do nothing, so a test that freezes
    nothing runs the library's statements on the production fast path."""

    def __call__(
        self, execute: Callable[..., Any], sql: Any, params: Any, many: bool, context: Any
    ) -> Any:
        follow(context["connection"])
        return execute(sql, params, many, context)

    def idle(self, connection: BaseDatabaseWrapper) -> bool:
        # a connection still on a frozen time must run the wrapper once to get the server's back
        return frozen_now() is None and not getattr(connection, _FROZEN, False)


_wrapper = _Follower()


def _install(connection: BaseDatabaseWrapper) -> None:
    if connection.alias == conf.get().database and _wrapper not in connection.execute_wrappers:
        connection.execute_wrappers.append(_wrapper)


def _on_connect(sender: object, connection: BaseDatabaseWrapper, **kwargs: object) -> None:
    _install(connection)


def install() -> None:
    """Follow freezegun on the jobs database from its next connection on (``django_xjobs.testing``
    calls this when it is imported, maybe before the settings are: nothing here reads them);
    costs a dictionary lookup a statement while nothing is frozen, and leaves the library's
    statements on their fast path then (``_Follower.idle``). A connection already open
    follows from the first helper call."""
    connection_created.connect(_on_connect, dispatch_uid="django_xjobs.testing.frozen")


def catch_up() -> None:
    """Follow freezegun on the current thread's jobs-database connection too when it was
    opened before ``django_xjobs.testing`` was imported (the helpers call this). It opens no
    connection: a test on the memory driver may have no database access at all."""
    connection = connections[conf.get().database]
    _install(connection)
    if connection.connection is not None and frozen_now() is not None:
        follow(connection)
