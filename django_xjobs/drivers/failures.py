"""What a database failure means, decided by SQLSTATE and exception class (never by message
text, so a server that speaks another language behaves the same): the connection failed, a second
try may pass, the values were refused, a table is missing — and the one clear error each becomes.

Roles ask these questions of any error a store raised; they never look at a driver's internals.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from django.db import InterfaceError, OperationalError

from ..errors import DriverUnavailableError, ValueRefusedError, XJobsError, first_line

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


# --- the DriverUnavailableError of each failure, spelt once ------------------------------------

#: the fix for a database that cannot be reached
UNREACHABLE_HINT = "check DATABASE_URL / DATABASES and that PostgreSQL is running"


def _where(database: str | None, at: str = "") -> str:
    """``database 'default'``, with where it is (``localhost:5432/shop``) when known."""
    where = f"database {database!r}" if database is not None else "the database"
    return f"{where} ({at})" if at else where


def migrate_hint(database: str | None) -> str:
    """The command that creates what a missing table or column belongs to."""
    if database is None:
        return "run: python manage.py migrate"
    return f"run: python manage.py migrate django_xjobs --database {database}"


def unreachable(
    database: str | None, detail: str, *, at: str = "", hint: str = UNREACHABLE_HINT
) -> DriverUnavailableError:
    """The connection to ``database`` failed (``detail``: the first line of the driver's error;
    ``at``: host, port and name, when known)."""
    return DriverUnavailableError(
        f"{_where(database, at)} is unavailable, cannot connect: {detail}", hint=hint
    )


def table_missing(
    database: str | None, tables: Sequence[str], *, at: str = ""
) -> DriverUnavailableError:
    """``tables`` (one of them, when a statement names several) do not exist: not migrated."""
    named = f"the {tables[0]} table" if len(tables) == 1 else f"a table of {', '.join(tables)}"
    return DriverUnavailableError(
        f"{named} does not exist in {_where(database, at)}", hint=migrate_hint(database)
    )


def schema_behind(database: str | None, what: str, detail: str) -> DriverUnavailableError:
    """A ``table`` or ``column`` a migration adds is missing, the server's line in ``detail``
    (a command's statement, whose tables are not named to it)."""
    return DriverUnavailableError(
        f"{_where(database)} is missing a {what} django_xjobs needs ({detail})",
        hint=migrate_hint(database),
    )


def gave_up(
    database: str | None, code: str | None, detail: str, *, retried: bool
) -> DriverUnavailableError:
    """The server rolled a statement back for a deadlock, a lock or statement timeout or a
    limit: not the connection. ``retried``: the caller tries it again itself, else the operator
    runs it again."""
    again = "; it is tried again" if retried else ": run it again"
    return DriverUnavailableError(
        f"{_where(database)} gave up on a statement (SQLSTATE {code}): {detail}",
        hint=f"a deadlock, a lock or statement timeout, or a server limit{again}",
        sqlstate=code,
    )


def statement_refused(database: str | None, detail: str) -> DriverUnavailableError:
    """A command's statement failed for a reason none of the above tells: most often a schema
    older than the code."""
    return DriverUnavailableError(
        f"{_where(database)} refused a statement: {detail}",
        hint=f"{migrate_hint(database)}, then retry; rerun with --traceback to see where",
    )


def live_key_lost(name: str) -> DriverUnavailableError:
    """An enqueue's insert was suppressed by the live-key index, yet no live row holds the key:
    the index is not the one the migrations made."""
    return DriverUnavailableError(
        f"enqueue of {name!r} was suppressed but no live row holds its key",
        hint="the live-key unique index is missing or drifted: run manage.py migrate django_xjobs",
    )


def translate(
    error: BaseException, using: str, statement: str, params: Mapping[str, object] | None = None
) -> XJobsError | None:
    """The one clear error for a missing table, an unusable connection or a refused value,
    decided by SQLSTATE and exception class, never by message text; None for anything else.

    Only a failed connection says the database is unavailable: a value the server refused
    (SQLSTATE classes 22, 54) names the largest values the statement carried, and a statement
    rolled back for another reason (a deadlock, a lock timeout) says so (issue 24)."""
    if sqlstate(error) == UNDEFINED_TABLE:
        return table_missing(using, sorted(set(_TABLE.findall(statement))))
    if connection_failed(error):
        return unreachable(using, first_line(error))
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
        return gave_up(using, code, first_line(error), retried=True)
    return None


#: parameters the library makes up itself (a lease token): never the value that broke
_OURS = frozenset({"token"})


def largest_values(params: Mapping[str, object], top: int = 2) -> str:
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
