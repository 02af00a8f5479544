"""Named SQL statements: load a ``.sql`` file of ``-- name: <statement>`` blocks, and run one
on a database alias, turning a lost connection or a missing table into one clear error.

Every store's hot path goes through here, so each reports failures the same way, and each runs
as a server-side prepared statement (``XJOBS["PREPARED_STATEMENTS"]``): parsed and planned once
per connection instead of on every call.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from django.db import DataError, InterfaceError, OperationalError, ProgrammingError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

from .. import conf
from ..errors import (
    DriverUnavailableError,
    InvariantError,
    ValueRefusedError,
    XJobsError,
    first_line,
)

_HEADER = re.compile(r"^-- name: ([a-z_]+)\s*$", re.MULTILINE)
_LOOSE_HEADER = re.compile(r"^\s*--\s*name\s*:", re.IGNORECASE)  # what a header looks like
_TABLE = re.compile(r"\bx_[a-z_]+\b")

# SQLSTATE codes, so a server whose messages are in another language behaves the same
UNDEFINED_TABLE = "42P01"
UNIQUE_VIOLATION = "23505"
#: the connection itself failed (with class 08): an administrator or crash shutdown, a server
#: starting up, too many clients
CONNECTION = frozenset({"57P01", "57P02", "57P03", "53300"})
#: failures a second try can get past: the connection, a serialization failure, a deadlock
TRANSIENT = CONNECTION | {"40001", "40P01"}


def sqlstate(error: BaseException | None) -> str | None:
    """The SQLSTATE of ``error`` or of the driver error it wraps (None when there is none)."""
    while error is not None:
        code = getattr(error, "sqlstate", None)
        if isinstance(code, str):
            return code
        error = error.__cause__
    return None


def constraint(error: BaseException | None) -> str | None:
    """The name of the constraint ``error`` (or the driver error it wraps) violated."""
    while error is not None:
        name = getattr(getattr(error, "diag", None), "constraint_name", None)
        if name:
            return str(name)
        error = error.__cause__
    return None


def is_transient(error: BaseException) -> bool:
    """True when trying the same statement again may succeed: a lost or refused connection,
    a serialization failure or a deadlock. Everything else fails the same way twice."""
    return connection_failed(error) or sqlstate(error) in TRANSIENT


#: SQLSTATE classes of a statement refused for the values it carries: a data exception (22),
#: an integrity violation (23), a program limit such as an index entry too large (54). The same
#: values fail the same way however often they are sent.
PERMANENT_CLASSES = ("22", "23", "54")


def is_permanent(error: BaseException) -> bool:
    """True when ``error`` refused the values a statement carried (SQLSTATE classes 22, 23, 54):
    sending them again fails again. A connection, a timeout, a missing table or anything without
    a SQLSTATE is not: it says nothing against the row."""
    code = sqlstate(error)
    return code is not None and code.startswith(PERMANENT_CLASSES) and not is_transient(error)


def connection_failed(error: BaseException) -> bool:
    """True when the connection failed, not the statement: refused or lost, too many clients,
    an administrator or crash shutdown, a server starting up (by SQLSTATE and class)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OperationalError | InterfaceError) and sqlstate(seen) is None:
            return True  # no server answer at all: the connection itself failed
        seen = seen.__cause__
    code = sqlstate(error)
    return code is not None and (code.startswith("08") or code in CONNECTION)


@cache
def load(path: str | Path) -> dict[str, str]:
    """The statements of the ``.sql`` file at ``path`` (pass ``Path(__file__).with_name(...)``).

    A header that is misspelt or repeated, SQL before the first header, or a header with no
    statement is refused: each would otherwise merge into, replace or drop a neighbour silently.
    """
    text = Path(path).read_text()
    for line in text.splitlines():
        if _LOOSE_HEADER.match(line) and not _HEADER.match(line):
            raise _malformed(path, f"malformed header {line.strip()!r}")
    parts = _HEADER.split(text)
    if _code(parts[0]):
        raise _malformed(path, "SQL before the first '-- name:' header")
    statements: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in statements:
            raise _malformed(path, f"statement {name!r} is named twice")
        statements[name] = _code(body).rstrip(";").rstrip()
        if not statements[name]:
            raise _malformed(path, f"statement {name!r} is empty")
    return statements


def _code(body: str) -> str:
    """``body`` without its whole-line comments and surrounding blank lines."""
    lines = [line for line in body.strip().splitlines() if not line.lstrip().startswith("--")]
    return "\n".join(lines).strip()


def _malformed(path: str | Path, problem: str) -> InvariantError:
    return InvariantError(
        f"{Path(path).name}: {problem}",
        hint="each statement starts with a line '-- name: <lowercase_name>', once per file",
    )


class PreparedCursor(psycopg.Cursor[Any]):
    """A server-binding cursor whose every statement is prepared on first use, then reused
    by name on this connection (psycopg keeps the names, at most ``prepared_max`` of them)."""

    def execute(
        self,
        query: Any,
        params: Any = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> PreparedCursor:
        return super().execute(query, params, prepare=prepare is not False, binary=binary)


class LoggedCursor(CursorDebugWrapper):
    """Django's query log for a prepared statement: its text as written (psycopg keeps no
    interpolated text for a prepared execution, so Django's own log would record None)."""

    def execute(self, sql: Any, params: Any = None) -> Any:
        with self.debug_sql(sql, params):
            return CursorWrapper.execute(self, sql, params)


class DirectCursor:
    """What CursorWrapper does for a statement when no execute wrapper is installed, or each one
    installed says through an ``idle(connection)`` method that it would do nothing (the testing
    helpers' freezegun follower while no freeze is active): refuse a broken transaction and
    turn driver errors into Django's, without the per-call chain."""

    def __init__(self, cursor: PreparedCursor, connection: BaseDatabaseWrapper) -> None:
        self.cursor, self.db = cursor, connection

    def execute(self, sql: Any, params: Any = None) -> Any:
        self.db.validate_no_broken_transaction()
        with self.db.wrap_database_errors:
            return self.cursor.execute(sql, params)

    @property
    def description(self) -> Any:
        return self.cursor.description

    @property
    def rowcount(self) -> int:
        return self.cursor.rowcount

    def fetchall(self) -> list[Any]:
        with self.db.wrap_database_errors:
            return self.cursor.fetchall()

    def close(self) -> None:
        self.cursor.close()


#: the prepare threshold we give a connection Django opened with none (Django's default, kept
#: for poolers): only a statement asked to prepare (ours) is prepared, nothing by count
_NEVER_BY_COUNT = 1 << 30


def prepares(connection: BaseDatabaseWrapper) -> bool:
    """Whether statements on ``connection`` run prepared: ``PREPARED_STATEMENTS`` on, or
    "auto" and nothing says a transaction-mode pooler sits in front of it (``XJOBS["POOLER"]``,
    or Django's ``DISABLE_SERVER_SIDE_CURSORS``: a pooler that moves sessions between
    transactions would hand our prepared names to a server session that never saw them)."""
    settings = conf.get()
    mode = settings.prepared_statements
    if mode == "auto":
        return settings.pooler != "transaction" and not connection.settings_dict.get(
            "DISABLE_SERVER_SIDE_CURSORS"
        )
    return bool(mode)


def _cursor(connection: BaseDatabaseWrapper) -> Any:
    """Django's cursor wrapper (its execute wrappers, query log and error wrapping) around a
    preparing cursor on the raw connection, which keeps the caller's transaction and Django's
    adapters; Django's own cursor when statements are not prepared."""
    if not prepares(connection):
        return connection.cursor()
    connection.close_if_health_check_failed()
    connection.ensure_connection()  # also Django's refusal to run from an event loop
    raw = connection.connection
    if not isinstance(raw, psycopg.Connection):  # psycopg2 has no server-side binding
        return connection.cursor()
    connection.validate_thread_sharing()
    if raw.prepare_threshold is None:
        raw.prepare_threshold = _NEVER_BY_COUNT
    cursor = PreparedCursor(raw)
    if connection.queries_logged:
        return LoggedCursor(cursor, connection)
    if connection.execute_wrappers and not all(
        getattr(wrapper, "idle", _busy)(connection) for wrapper in connection.execute_wrappers
    ):
        return CursorWrapper(cursor, connection)
    return DirectCursor(cursor, connection)


def _busy(connection: BaseDatabaseWrapper) -> bool:
    """An execute wrapper that cannot say it is idle is never skipped."""
    return False


@contextmanager
def execute(using: str, statement: str, params: dict[str, Any]) -> Iterator[Any]:
    """A cursor that has run ``statement`` on ``using`` (autocommit, or the caller's atomic)."""
    connection = connections[using]
    try:
        cursor = _cursor(connection)
        cursor.execute(statement, params)
    except (ProgrammingError, OperationalError, InterfaceError, DataError) as error:
        translated = translate(error, using, statement, params)
        if translated is None:
            raise
        if connection_failed(error) and not connection.in_atomic_block:
            connection.close()  # the next statement reconnects
        raise translated from error
    try:
        yield cursor
    finally:
        cursor.close()


def translate(
    error: BaseException, using: str, statement: str, params: dict[str, Any] | None = None
) -> XJobsError | None:
    """The one clear error for a missing table, an unusable connection or a refused value,
    decided by SQLSTATE and exception class, never by message text; None for anything else.

    Only a failed connection says the database is unavailable: a value the server refused
    (SQLSTATE classes 22, 54) names the largest values the statement carried, and a statement
    rolled back for another reason (a deadlock, a lock timeout) says so (issue 24)."""
    if sqlstate(error) == UNDEFINED_TABLE:
        tables = sorted(set(_TABLE.findall(statement)))
        named = f"the {tables[0]} table" if len(tables) == 1 else f"a table of {', '.join(tables)}"
        return DriverUnavailableError(
            f"{named} does not exist in database {using!r}",
            hint=f"run: python manage.py migrate django_xjobs --database {using}",
        )
    if connection_failed(error):
        return DriverUnavailableError(
            f"database {using!r} is unavailable: {first_line(error)}",
            hint="check DATABASES / DATABASE_URL and that PostgreSQL is running",
        )
    code = sqlstate(error)
    if code is not None and code.startswith(("22", "54")):
        return ValueRefusedError(
            f"database {using!r} refused a value (SQLSTATE {code}): {first_line(error)}; "
            f"the largest values sent: {largest_values(params or {})}",
            hint="the same value fails the same way: shorten or correct it (an outbox row "
            "that carries it is quarantined: python manage.py xjobs outbox)",
            sqlstate=code,
        )
    if isinstance(error, OperationalError | InterfaceError):
        return DriverUnavailableError(
            f"database {using!r} gave up on a statement (SQLSTATE {code}): {first_line(error)}",
            hint="a deadlock, a lock or statement timeout, or a server limit; it is tried again",
            sqlstate=code,
        )
    return None


#: parameters the library makes up itself (a lease token): never the value that broke
_OURS = frozenset({"token"})


def largest_values(params: dict[str, Any], top: int = 2) -> str:
    """The ``top`` largest text values in ``params`` by UTF-8 size, named by parameter (and
    index, for an array): ``"keys[3] 3,000 bytes, names[3] 14 bytes"``."""
    sizes: list[tuple[int, str]] = []
    for name, value in params.items():
        if name in _OURS:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        for index, item in enumerate(values):
            if isinstance(item, str):
                label = name if values is not value else f"{name}[{index}]"
                sizes.append((len(item.encode("utf-8", "surrogatepass")), label))
    sizes.sort(reverse=True)
    found = ", ".join(f"{label} {n:,} bytes" for n, label in sizes[:top])
    return found or "none among the parameters: the statement read its values from a table"


def fetch(using: str, statement: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The rows ``statement`` returned (none for a statement without a result)."""
    with execute(using, statement, params) as cursor:
        return list(cursor.fetchall()) if cursor.description else []


def count(using: str, statement: str, params: dict[str, Any]) -> int:
    """How many rows ``statement`` changed."""
    with execute(using, statement, params) as cursor:
        return int(cursor.rowcount)
