"""Named SQL statements: load a ``.sql`` file of ``-- name: <statement>`` blocks, and run one
on a database alias, turning a lost connection or a missing table into one clear error.

Every store's hot path goes through here, so each reports failures the same way, and each runs
as a server-side prepared statement (``XJOBS["PREPARED_STATEMENTS"]``): parsed and planned once
per connection instead of on every call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache, partial
from pathlib import Path
from typing import Any

import psycopg
from django.db import DataError, InterfaceError, OperationalError, ProgrammingError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from psycopg.types.array import ListBinaryDumper

from ... import conf
from ...errors import InvariantError
from ..failures import connection_failed, translate

_HEADER = re.compile(r"^-- (name|fragment): ([a-z_]+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"^[ \t]*-- include: ([a-z_]+)[ \t]*$", re.MULTILINE)
#: what a header or an include looks like, spelt right or not
_LOOSE_HEADER = re.compile(r"^\s*--\s*(name|fragment|include)\s*:", re.IGNORECASE)
#: the sibling file whose fragments every file of its folder may include
FRAGMENTS = "fragments.sql"


@cache
def load(path: str | Path) -> dict[str, str]:
    """The statements of the ``.sql`` file at ``path`` (pass ``Path(__file__).with_name(...)``).

    A statement may hold a line ``-- include: <fragment>``: the ``-- fragment: <fragment>``
    block of that name, from the same file or from ``fragments.sql`` beside it, stands there
    (a part several statements must run alike, written once). A header that is misspelt or
    repeated, SQL before the first header, a header with no statement, an include of a fragment
    that does not exist, or a fragment that includes another is refused: each would otherwise
    merge into, replace or drop a neighbour silently.
    """
    path = Path(path)
    statements, fragments = _blocks(path)
    shared = path.with_name(FRAGMENTS)
    if shared != path and shared.exists():
        fragments = {**_blocks(shared)[1], **fragments}

    def include(match: re.Match[str]) -> str:
        if match[1] not in fragments:
            raise _malformed(path, f"no fragment {match[1]!r} to include")
        return fragments[match[1]]

    return {
        name: _code(_INCLUDE.sub(include, body)).rstrip(";").rstrip()
        for name, body in statements.items()
    }


def _blocks(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The raw bodies of the file's statements and of its fragments, each by name."""
    text = path.read_text()
    for line in text.splitlines():
        if _LOOSE_HEADER.match(line) and not (_HEADER.match(line) or _INCLUDE.match(line)):
            raise _malformed(path, f"malformed header {line.strip()!r}")
    parts = _HEADER.split(text)
    if _code(parts[0]):
        raise _malformed(path, "SQL before the first '-- name:' header")
    blocks: dict[str, dict[str, str]] = {"name": {}, "fragment": {}}
    for kind, name, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        what = "statement" if kind == "name" else "fragment"
        if name in blocks[kind]:
            raise _malformed(path, f"{what} {name!r} is named twice")
        if not _code(body).rstrip(";").rstrip():
            raise _malformed(path, f"{what} {name!r} is empty")
        if kind == "fragment":
            if _INCLUDE.search(body):
                raise _malformed(path, f"fragment {name!r} includes another")
            body = _code(body)  # stands inside a statement: no semicolon of its own to cut
        blocks[kind][name] = body
    return blocks["name"], blocks["fragment"]


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
    by name on this connection (psycopg keeps the names, at most ``prepared_max`` of them).

    Its list parameters (the ids, tokens and keys of a batch) go in PostgreSQL's binary array
    format: the text format quotes element by element in Python, a regular-expression search
    each, about seven times the binary format's cost for a list of UUIDs, and it was the
    largest piece of ``enqueue_many``'s Python (bench/README.md). Only this cursor's adapters
    change, and only for a statement with a list: registering copies the cursor's dumper maps,
    which cost a single-row statement (one enqueue) more than it saves. Django's own cursors on
    the connection keep their adapters."""

    _lists_binary = False

    def execute(
        self,
        query: Any,
        params: Any = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> PreparedCursor:
        if not self._lists_binary and params:
            values = params.values() if isinstance(params, dict) else params
            if list in map(type, values):
                self.adapters.register_dumper(list, ListBinaryDumper)
                self._lists_binary = True
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

    def execute(self, sql: object, params: object = None) -> Any:
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

    def returns_rows(self) -> bool:
        """Whether the statement returned a result set, as ``description`` is not None, without
        building a ``Column`` per column (``fetch`` asks after every statement, and the columns
        cost a single-row statement more than its parameters did)."""
        result = self.cursor.pgresult
        return result is not None and (result.nfields > 0 or result.status == _TUPLES_OK)

    def close(self) -> None:
        self.cursor.close()


_TUPLES_OK = psycopg.pq.ExecStatus.TUPLES_OK

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
def execute(using: str, statement: str, params: Mapping[str, object]) -> Iterator[Any]:
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


#: what ``pipeline`` hands its body: send a statement now, read its rows later
Send = Callable[[str, dict[str, Any]], Callable[[], list[tuple[Any, ...]]]]


def pipelines(using: str) -> bool:
    """Whether statements on ``using`` can be sent ahead of their answers (``pipeline``): a
    direct psycopg 3 connection whose statements run prepared, with a libpq that has pipeline
    mode. Behind a transaction-mode pooler statements go one at a time, as they always have."""
    connection = connections[using]
    if not prepares(connection):
        return False
    connection.ensure_connection()
    return isinstance(connection.connection, psycopg.Connection) and (
        psycopg.Pipeline.is_supported()
    )


@contextmanager
def pipeline(using: str) -> Iterator[Send]:
    """A ``send(statement, params)`` that puts the statement on the wire and returns at once,
    with a function that reads its rows once they are back: the server runs one statement while
    the caller makes the next one's parameters. Use it inside ``transaction.atomic(using)``
    when the statements must commit together (and only where ``pipelines(using)``); leaving the
    block waits for every answer. A failed statement's error is raised as ``execute`` raises it,
    at the latest on leaving, and the statements after it in the block are not run."""
    connection = connections[using]
    sent: tuple[str, dict[str, Any]] = ("", {})
    try:
        with connection.wrap_database_errors, connection.connection.pipeline():

            def send(statement: str, params: dict[str, Any]) -> Callable[[], list[Any]]:
                nonlocal sent
                sent = (statement, params)
                cursor = _cursor(connection)
                cursor.execute(statement, params)
                return partial(_rows, cursor)

            yield send
    except (ProgrammingError, OperationalError, InterfaceError, DataError) as error:
        translated = translate(error, using, *sent)
        if translated is None:
            raise
        raise translated from error


def _rows(cursor: Any) -> list[tuple[Any, ...]]:
    try:
        return list(cursor.fetchall())
    finally:
        cursor.close()


def fetch(using: str, statement: str, params: Mapping[str, object]) -> list[tuple[Any, ...]]:
    """The rows ``statement`` returned (none for a statement without a result)."""
    with execute(using, statement, params) as cursor:
        rows = cursor.returns_rows() if isinstance(cursor, DirectCursor) else cursor.description
        return list(cursor.fetchall()) if rows else []


def count(using: str, statement: str, params: Mapping[str, object]) -> int:
    """How many rows ``statement`` changed."""
    with execute(using, statement, params) as cursor:
        return int(cursor.rowcount)
