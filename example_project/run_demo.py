"""``make demo``: start PostgreSQL if DATABASE_URL is unset, migrate, run the demo command.

A database that cannot be reached or set up ends the demo with one line, the error's code and
the fix, and exit status 1: a traceback would bury the one thing to do.
"""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]


def main() -> int:
    from concurrent.futures import ThreadPoolExecutor

    from django_xjobs.testing.postgres import database_url

    given = "DATABASE_URL" in os.environ
    if not given:
        print("DATABASE_URL is not set: starting a throwaway embedded PostgreSQL ...", flush=True)
    # The server's initdb runs in processes of its own: import Django meanwhile (a first run
    # also compiles what it imports). Nothing imported here reads the settings.
    with ThreadPoolExecutor(max_workers=1) as pool:
        server = pool.submit(database_url)
        import django
        import django.db.backends.postgresql.base
        import django.db.migrations.executor
        import django.test  # the demo posts to a view through its test client
        from demo.failure import one_line
        from django.core.management import CommandError, call_command
        from django.db import Error as DatabaseError

        os.environ["DATABASE_URL"] = server.result()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

    django.setup()
    try:
        call_command("migrate", verbosity=0)
        print("migrated; the x_* tables are ready", flush=True)
        call_command("xjobs_demo")
    except DatabaseError as error:
        print(one_line(error, given_url=given), file=sys.stderr)
        return 1
    except CommandError as error:  # the demo command's own one line
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
