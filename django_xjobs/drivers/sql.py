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

from ..errors import DriverUnavailableError

_HEADER = re.compile(r"^-- name: ([a-z_]+)\s*$", re.MULTILINE)
_MISSING_TABLE = re.compile(r'relation "(x_[a-z_]+)" does not exist')


@cache
def load(path: str | Path) -> dict[str, str]:
    """The statements of the ``.sql`` file at ``path`` (pass ``Path(__file__).with_name(...)``)."""
    text = Path(path).read_text()
    parts = _HEADER.split(text)
    statements: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.strip().splitlines() if not line.lstrip().startswith("--")]
        statements[name] = "\n".join(lines).strip().rstrip(";")
    return statements


@contextmanager
def execute(using: str, statement: str, params: dict[str, Any]) -> Iterator[Any]:
    """A cursor that has run ``statement`` on ``using`` (autocommit, or the caller's atomic)."""
    connection = connections[using]
    try:
        cursor = connection.cursor()
        cursor.execute(statement, params)
    except ProgrammingError as error:
        missing = _MISSING_TABLE.search(str(error))
        if missing:
            raise DriverUnavailableError(
                f"the {missing.group(1)} table does not exist in database {using!r}",
                hint=f"run: python manage.py migrate django_xjobs --database {using}",
            ) from error
        raise
    except (OperationalError, InterfaceError) as error:
        if not connection.in_atomic_block:
            connection.close()  # the next statement reconnects
        raise DriverUnavailableError(
            f"database {using!r} is unavailable: {first_line(error)}",
            hint="check DATABASES / DATABASE_URL and that PostgreSQL is running",
        ) from error
    try:
        yield cursor
    finally:
        cursor.close()


def fetch(using: str, statement: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The rows ``statement`` returned (none for a statement without a result)."""
    with execute(using, statement, params) as cursor:
        return list(cursor.fetchall()) if cursor.description else []


def count(using: str, statement: str, params: dict[str, Any]) -> int:
    """How many rows ``statement`` changed."""
    with execute(using, statement, params) as cursor:
        return int(cursor.rowcount)


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
