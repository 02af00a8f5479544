"""Named SQL statements: load a ``.sql`` file of ``-- name: <statement>`` blocks, and run one
on a database alias, turning a lost connection or a missing table into one clear error.

Every store's hot path goes through here, so each reports failures the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from django.db import InterfaceError, OperationalError, ProgrammingError, connections

from ..errors import DriverUnavailableError, InvariantError, first_line

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


@contextmanager
def execute(using: str, statement: str, params: dict[str, Any]) -> Iterator[Any]:
    """A cursor that has run ``statement`` on ``using`` (autocommit, or the caller's atomic)."""
    connection = connections[using]
    try:
        cursor = connection.cursor()
        cursor.execute(statement, params)
    except (ProgrammingError, OperationalError, InterfaceError) as error:
        translated = translate(error, using, statement)
        if translated is None:
            raise
        if isinstance(error, OperationalError | InterfaceError) and not connection.in_atomic_block:
            connection.close()  # the next statement reconnects
        raise translated from error
    try:
        yield cursor
    finally:
        cursor.close()


def translate(error: BaseException, using: str, statement: str) -> DriverUnavailableError | None:
    """The one clear error for a missing table or an unusable connection, decided by SQLSTATE
    and exception class, never by message text; None for anything else."""
    if sqlstate(error) == UNDEFINED_TABLE:
        tables = sorted(set(_TABLE.findall(statement)))
        named = f"the {tables[0]} table" if len(tables) == 1 else f"a table of {', '.join(tables)}"
        return DriverUnavailableError(
            f"{named} does not exist in database {using!r}",
            hint=f"run: python manage.py migrate django_xjobs --database {using}",
        )
    if isinstance(error, OperationalError | InterfaceError):
        return DriverUnavailableError(
            f"database {using!r} is unavailable: {first_line(error)}",
            hint="check DATABASES / DATABASE_URL and that PostgreSQL is running",
        )
    return None


def fetch(using: str, statement: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The rows ``statement`` returned (none for a statement without a result)."""
    with execute(using, statement, params) as cursor:
        return list(cursor.fetchall()) if cursor.description else []


def count(using: str, statement: str, params: dict[str, Any]) -> int:
    """How many rows ``statement`` changed."""
    with execute(using, statement, params) as cursor:
        return int(cursor.rowcount)
