"""What every ``xjobs`` management command shares: a failure is one line with its code and fix.

Before ``migrate``, or with the database down, an operator should read what to do, not a
traceback. ``XJobsCommand.execute`` is the one place a library error or a database error that got
past a store becomes a ``CommandError`` (Django prints it as one line and exits non-zero).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import logging
from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, InterfaceError, OperationalError

from ..drivers import failures
from ..errors import ValueRefusedError, XJobsError, first_line

# SQLSTATEs of a schema that is behind the code: a table or a column a migration adds
_SCHEMA_BEHIND = {"42P01": "table", "42703": "column"}
_GLOBAL_OPTIONS = (
    "verbosity",
    "settings",
    "pythonpath",
    "traceback",
    "no_color",
    "force_color",
    "skip_checks",
)


class XJobsCommand(BaseCommand):
    """A command whose errors are one line: ``CommandError: X_CODE: what happened — the fix``."""

    def execute(self, *args: Any, **options: Any) -> Any:
        try:
            return super().execute(*args, **options)
        except (XJobsError, DatabaseError) as error:
            if options.get("traceback"):
                raise  # asked for: the whole story, not the one line
            if isinstance(error, DatabaseError):
                error = database_error(error, options.get("database"))
            raise CommandError(str(error)) from None


@contextlib.contextmanager
def sentences_only() -> Iterator[None]:
    """An operator command's own sentence says what it did: where no logging is configured for
    the library's logger, its records are not also printed raw after it (Python's last-resort
    handler writes WARNING records to stderr, issue 42). Configured handlers get every record
    as ever: the audit trail stays where it was sent."""
    logger = logging.getLogger("django_xjobs")
    if logger.hasHandlers():
        yield
        return
    quiet = logging.NullHandler()
    logger.addHandler(quiet)
    try:
        yield
    finally:
        logger.removeHandler(quiet)


def database_error(error: DatabaseError, alias: object = None) -> XJobsError:
    """A database error as the operator's fix, told apart by SQLSTATE (never by message text)."""
    where = f"database {alias!r}" if isinstance(alias, str) else "the database"
    first = first_line(error)
    state = failures.sqlstate(error)
    database = alias if isinstance(alias, str) else None
    if state in _SCHEMA_BEHIND:
        return failures.schema_behind(database, _SCHEMA_BEHIND[state], first)
    if failures.connection_failed(error):  # only the connection's own failures (issue 24)
        return failures.unreachable(database, first)
    if state is not None and state.startswith(("22", "54")):
        return ValueRefusedError(
            f"{where} refused a value (SQLSTATE {state}): {first}",
            hint="the same value fails the same way: shorten or correct it; rerun with "
            "--traceback to see where",
        )
    if isinstance(error, OperationalError | InterfaceError):
        return failures.gave_up(database, state, first, retried=False)
    return failures.statement_refused(database, first)


def accept_global_options(parent: argparse.ArgumentParser, sub: argparse.ArgumentParser) -> None:
    """Let Django's global options follow a subcommand (``xjobs ls --settings X -v 2``).

    argparse gives a subparser only its own options, so each one repeats the global ones; their
    defaults are suppressed so that, when absent, the value given before the subcommand stands.
    """
    for action in parent._actions:
        if action.dest in _GLOBAL_OPTIONS:
            repeated = copy.copy(action)
            repeated.default = argparse.SUPPRESS
            repeated.help = argparse.SUPPRESS
            sub._add_action(repeated)
