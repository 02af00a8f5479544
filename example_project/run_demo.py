"""``make demo``: start PostgreSQL if DATABASE_URL is unset, migrate, run the demo command."""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]


def main() -> None:
    from django_xjobs.testing.postgres import database_url

    if "DATABASE_URL" not in os.environ:
        print("DATABASE_URL is not set: starting a throwaway embedded PostgreSQL ...", flush=True)
    os.environ["DATABASE_URL"] = database_url()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    print("migrated; the x_* tables are ready", flush=True)
    call_command("xjobs_demo")


if __name__ == "__main__":
    main()
