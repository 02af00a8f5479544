"""Before a role starts: can it reach its database, and is the schema there?"""

from __future__ import annotations

from django.db import DatabaseError, connections

from ..conf import XJobsSettings
from ..errors import DriverUnavailableError, first_line


def preflight(
    settings: XJobsSettings, *, database: str | None = None, table: str = "x_jobs"
) -> None:
    """Raise one clear ``DriverUnavailableError`` instead of a traceback at the first claim."""
    if settings.driver != "postgres":
        return
    alias = database or settings.database
    connection = connections[alias]
    params = connection.settings_dict
    where = (
        f"{params.get('HOST') or 'local socket'}:{params.get('PORT') or 5432}/{params.get('NAME')}"
    )
    try:
        connection.ensure_connection()
    except DatabaseError as error:
        first = first_line(error)
        raise DriverUnavailableError(
            f"cannot connect to database {alias!r} ({where}): {first}",
            hint="check DATABASE_URL / DATABASES and that PostgreSQL is running",
        ) from None
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [table])
        (present,) = cursor.fetchone()
    if not connection.in_atomic_block:  # a role's command queries no more on this thread:
        connection.close()  # no backend left idle for the process's lifetime
    if not present:
        raise DriverUnavailableError(
            f"database {alias!r} ({where}) has no {table} table",
            hint=f"run: python manage.py migrate django_xjobs --database {alias}",
        )
