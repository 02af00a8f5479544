"""Scratch databases and unreachable servers, for tests of what a command says without its
database; who waits on a lock in this test's database, and whether a process's sessions still
run a statement."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django_xjobs.testing.postgres import database_url, url_for_database


def free_port() -> int:
    """A local port the OS just handed out and nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def closed_port_url() -> str:
    """A URL whose port nobody listens on."""
    return f"postgres://nobody:secret@127.0.0.1:{free_port()}/nothing"


@contextmanager
def unmigrated_database(prefix: str = "xjobs_unmigrated") -> Iterator[str]:
    """The URL of a new database on the test server where ``migrate`` never ran; dropped after
    (WITH FORCE: a child process may still hold a connection)."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    # through the server's own "postgres" database: the URL's database need not exist (CI
    # points DATABASE_URL at a name only the test runner's test_<name> is made beside)
    server = url_for_database(database_url(), "postgres")
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield url_for_database(database_url(), name)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def lock_waiters(cursor: Any, fragment: str) -> int:
    """Backends of this test's database waiting on a lock in a statement whose text holds
    ``fragment``. Only this database: the server's others belong to parallel test workers,
    whose statements may match as well. The activity view is read once per transaction unless
    cleared, so it is cleared first."""
    cursor.execute("SELECT pg_stat_clear_snapshot()")
    cursor.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND strpos(query, %s) > 0",
        [fragment],
    )
    return int(cursor.fetchone()[0])


def sessions_of(application_name: str) -> tuple[int, int]:
    """How many sessions ``application_name`` has (a child started with ``PGAPPNAME``), and how
    many of them still run a statement: a frozen client's last write, sent before SIGSTOP,
    runs and commits on the server after the client froze, so a test judges a frozen process
    only once this is 0."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*), count(*) FILTER (WHERE state NOT IN ('idle', 'idle in transaction'))"
            " FROM pg_stat_activity WHERE application_name = %s",
            [application_name],
        )
        sessions, busy = cursor.fetchone()
    return int(sessions), int(busy)


def no_history_days(driver) -> None:
    """Every day of the history dropped (issue 46). A worker's upkeep pass makes the days it
    needs on a connection of its own, and DDL outlives a test's rollback and flush: with
    ``XJOBS["HISTORY"]`` on by default an earlier test's worker leaves days behind, so a test
    that counts the days it makes starts from none."""
    from django_xjobs.states import FINISHED_STATES

    driver.history().drop_partitions(dict.fromkeys(FINISHED_STATES, -400 * 86400.0))
