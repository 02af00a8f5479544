"""Before a role starts: can it reach its database, and is the schema there? (PostgreSQL's
answer to ``JobDriver.preflight``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db import DatabaseError, connections

from ...errors import first_line
from .. import failures
from . import sql

STATEMENTS = sql.load(Path(__file__).with_name("preflight.sql"))


def preflight(alias: str, table: str) -> None:
    """Raise one clear ``DriverUnavailableError`` instead of a traceback at the first claim."""
    connection = connections[alias]
    params = connection.settings_dict
    where = (
        f"{params.get('HOST') or 'local socket'}:{params.get('PORT') or 5432}/{params.get('NAME')}"
    )
    try:
        connection.ensure_connection()
    except DatabaseError as error:
        first = first_line(error)
        name = params.get("NAME")
        hint = failures.UNREACHABLE_HINT
        if name and _database_missing(connection, name):
            hint = f"create it: createdb {name} (or CREATE DATABASE {name}), then migrate"
        raise failures.unreachable(alias, first, at=where, hint=hint) from None
    with connection.cursor() as cursor:
        cursor.execute(STATEMENTS["table_present"], [table])
        (present,) = cursor.fetchone()
    if not connection.in_atomic_block:  # a role's command queries no more on this thread:
        connection.close()  # no backend left idle for the process's lifetime
    if not present:
        raise failures.table_missing(alias, [table], at=where)


def _database_missing(connection: Any, name: str) -> bool:
    """Whether the server answers but has no database ``name`` (SQLSTATE 3D000 at connect).

    libpq reports a failed connect without a SQLSTATE, and the message is no contract: the
    server is asked instead, once, through its ``postgres`` database (as ``createdb`` does).
    Only on a failed connect; False when that cannot be told.
    """
    import psycopg

    params = {**connection.get_connection_params(), "dbname": "postgres", "connect_timeout": 5}
    params.pop("cursor_factory", None)
    params.pop("context", None)
    try:
        with psycopg.connect(**params, autocommit=True) as other:
            found = other.execute(STATEMENTS["database_present"], [name])
            return found.fetchone() is None
    except Exception:
        return False
