"""One line for a demo that cannot use its database: the code, what failed, and the fix."""

from __future__ import annotations

from django.db import Error as DatabaseError

from django_xjobs.errors import DriverUnavailableError, XJobsError


def one_line(error: BaseException, *, given_url: bool = True) -> str:
    if isinstance(error, XJobsError):
        return str(error).splitlines()[0]
    if isinstance(error, DatabaseError):
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        fix = (
            "start that server or fix DATABASE_URL, or unset DATABASE_URL and make demo starts "
            "a throwaway embedded PostgreSQL"
            if given_url
            else "run `make demo` again; if it keeps failing, set DATABASE_URL to a server you run"
        )
        return str(DriverUnavailableError(f"the demo cannot use its database: {first}", hint=fix))
    return f"{type(error).__name__}: {error}"
