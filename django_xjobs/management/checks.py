"""System checks: ``manage.py check`` (and every command) reports a misconfiguration early,
each with a hint."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from .. import conf
from ..declarations import registry
from ..errors import XJobsError, first_line


@checks.register("django_xjobs")
def check_settings(app_configs: object = None, **kwargs: Any) -> list[checks.CheckMessage]:
    try:
        xjobs = conf.validate(getattr(settings, "XJOBS", {}))
    except XJobsError as error:
        return [checks.Error(error.message, hint=error.hint, id="django_xjobs.E001")]
    found: list[checks.CheckMessage] = []
    engine = settings.DATABASES[xjobs.database].get("ENGINE", "")
    if xjobs.driver == "postgres" and "postgresql" not in engine:
        found.append(
            checks.Error(
                f"database {xjobs.database!r} uses {engine or 'no engine'}; the job store needs PostgreSQL",
                hint='point XJOBS["DATABASE"] at a PostgreSQL alias, or use XJOBS["DRIVER"] = "memory" in tests',
                id="django_xjobs.E002",
            )
        )
    if xjobs.outbox != "off":
        for alias in xjobs.outbox_databases:
            outbox_engine = settings.DATABASES[alias].get("ENGINE", "")
            if "postgresql" not in outbox_engine and xjobs.driver == "postgres":
                found.append(
                    checks.Error(
                        f"outbox database {alias!r} uses {outbox_engine or 'no engine'}; the outbox needs PostgreSQL",
                        hint='remove it from XJOBS["OUTBOX_DATABASES"], or set XJOBS["OUTBOX"] = "off"',
                        id="django_xjobs.E003",
                    )
                )
    if xjobs.driver == "memory":
        found.append(
            checks.Warning(
                'XJOBS["DRIVER"] is "memory": jobs live in one process and vanish when it exits',
                hint='use "postgres" (the default) anywhere jobs must survive a restart',
                id="django_xjobs.W001",
            )
        )
    return found + _check_pooler(xjobs) + _check_tasks_api() + _check_jobs()


def _check_pooler(xjobs: conf.XJobsSettings) -> list[checks.CheckMessage]:
    """Behind a transaction pooler, Django's own server-side cursors break too; a listener
    needs PostgreSQL."""
    found: list[checks.CheckMessage] = []
    if xjobs.pooler == "transaction":
        for alias in dict.fromkeys([xjobs.database, *xjobs.outbox_databases]):
            if not settings.DATABASES[alias].get("DISABLE_SERVER_SIDE_CURSORS"):
                found.append(
                    checks.Warning(
                        f'XJOBS["POOLER"] is "transaction" but DATABASES[{alias!r}] keeps '
                        "server-side cursors: a queryset .iterator() there fails in the pooler",
                        hint=f'set DATABASES[{alias!r}]["DISABLE_SERVER_SIDE_CURSORS"] = True '
                        "(Django's setting for transaction pooling)",
                        id="django_xjobs.W021",
                    )
                )
    listen = xjobs.listen_database
    if listen is not None and "postgresql" not in settings.DATABASES[listen].get("ENGINE", ""):
        found.append(
            checks.Error(
                f'XJOBS["LISTEN_DATABASE"]={listen!r} is not a PostgreSQL alias; nothing to LISTEN on',
                hint="point it at the jobs database's server directly, with the same NAME",
                id="django_xjobs.E015",
            )
        )
    return found


def _check_tasks_api() -> list[checks.CheckMessage]:
    """``TASKS`` names ``XJobsBackend``, but no task API would ever build it."""
    if not registry.task_aliases():
        return []
    api = registry.tasks_api()
    if api is None:
        return [
            checks.Error(
                "TASKS uses django_xjobs.backends.XJobsBackend, but this Django has no task API "
                "(django.tasks is Django 6's), so TASKS is ignored",
                hint="on Django 5.2, pip install 'django-tasks>=0.12' (the backport; the tasks extra) "
                'and add "django_tasks" to INSTALLED_APPS',
                id="django_xjobs.E014",
            )
        ]
    if api == "django_tasks" and "django_tasks" not in settings.INSTALLED_APPS:
        return [
            checks.Warning(
                "the django-tasks backport is not in INSTALLED_APPS: its system checks (and so "
                "XJobsBackend's) never run, and its task signals log nothing",
                hint='add "django_tasks" to INSTALLED_APPS',
                id="django_xjobs.W011",
            )
        ]
    return []


def _check_jobs() -> list[checks.CheckMessage]:
    found: list[checks.CheckMessage] = []
    for handle in registry.registered_jobs():
        if handle.timeout and handle.step_timeout and handle.step_timeout >= handle.timeout:
            found.append(
                checks.Warning(
                    f"job {handle.name!r}: step_timeout ({handle.step_timeout:g}s) is not shorter "
                    f"than timeout ({handle.timeout:g}s), so it can never fire first",
                    hint="lower step_timeout, or drop it",
                    id="django_xjobs.W002",
                )
            )
    if conf.get().encryption is not None:
        found += _check_cancel_on_sealed()
    capped = [h.name for h in registry.registered_jobs() if h.concurrency]
    if capped:
        from ..drivers import get_driver

        if not get_driver().features.supports_fleet_slots:
            found.append(
                checks.Error(
                    f"jobs {', '.join(capped)} declare concurrency, and the driver has no lease store",
                    hint="use the postgres or memory driver, or drop concurrency= from those jobs",
                    id="django_xjobs.E004",
                )
            )
    return found + _check_cron_schedules() + _check_cron_tasks()


def _check_cancel_on_sealed() -> list[checks.CheckMessage]:
    """SPEC CRYPT-06: ``cancel_on`` matches an event's data against a job's stored input in the
    database, which cannot look inside an encrypted one: such a declaration would cancel
    nothing, so it is refused until the job keeps its input in clear."""
    return [
        checks.Error(
            f"job {handle.name!r} declares cancel_on, and its inputs are encrypted "
            "(XJOBS['ENCRYPTION_KEYS'] is set): no event could match them",
            hint="declare it with @job(..., encrypt=False), or cancel its runs with cancel_job()",
            id="django_xjobs.E040",
        )
        for handle in registry.registered_jobs()
        if handle.cancel_on and handle.encrypt
    ]


def _check_cron_schedules() -> list[checks.CheckMessage]:
    """Every registered cron's schedule read again, as ``@cron`` reads it: a handle registered
    without the decorator, or a six-field string from before seconds were asked for by name,
    fails here, one line, rather than firing on a schedule another reader would not expect."""
    from ..declarations.cron import check_schedule

    found: list[checks.CheckMessage] = []
    for handle in registry.crons.all():
        try:
            check_schedule(handle.schedule, handle.seconds, handle.tz)
        except XJobsError as error:
            found.append(
                checks.Error(
                    f"cron {handle.name!r}: {error.message}",
                    hint=error.hint,
                    id="django_xjobs.E016",
                )
            )
            continue
        found += _check_day_fields(handle.name, handle.schedule)
    return found


def _check_day_fields(name: str, schedule: str) -> list[checks.CheckMessage]:
    """Both day fields restricted: cron fires on a day either one matches (its OR rule), which
    reads as AND to most people ("0 9 13 * 5" is every Friday and every 13th, not Friday the
    13th)."""
    _, _, day_of_month, _, day_of_week = schedule.split()
    if day_of_month == "*" or day_of_week == "*":
        return []
    return [
        checks.Warning(
            f"cron {name!r}: {schedule!r} restricts both the day of the month "
            f"({day_of_month}) and the day of the week ({day_of_week}), and cron fires on a day "
            "that matches either one, not only on days that match both",
            hint="if both must hold, keep one field and check the other in the cron's function "
            "(return [] on the other days); if either will do, this is what you have",
            id="django_xjobs.W005",
        )
    ]


def _check_cron_tasks() -> list[checks.CheckMessage]:
    """A cron above a ``django.tasks`` task: its worker finds the task by its module path,
    which only holds once the module is fully imported, so it is checked here."""
    found: list[checks.CheckMessage] = []
    for handle in registry.crons.all():
        if handle.task is None:
            continue
        from ..backends.tasks import resolves, unresolved_message

        if not resolves(handle.task):
            found.append(
                checks.Error(
                    f"cron {handle.name!r}: {unresolved_message(handle.task)}",
                    hint="keep the Task under its function's name in its module",
                    id="django_xjobs.E013",
                )
            )
    return found


def _checked_database(databases: Any) -> conf.XJobsSettings | None:
    """The settings, when ``manage.py check --database`` names the jobs database; else None
    (an invalid ``XJOBS`` is check_settings' to report)."""
    try:
        xjobs = conf.validate(getattr(settings, "XJOBS", {}))
    except XJobsError:
        return None
    return xjobs if xjobs.database in (databases or ()) else None


@checks.register(checks.Tags.database)
def check_database_answers(
    app_configs: object = None, databases: object = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """``manage.py check --database default`` with the jobs database down: the checks that
    read it (W003, W020) could not run, which "no issues" would hide."""
    from django.db import OperationalError, connections

    xjobs = _checked_database(databases)
    if xjobs is None or xjobs.driver != "postgres":
        return []
    try:
        connections[xjobs.database].ensure_connection()
    except OperationalError as error:
        reason = first_line(error) or type(error).__name__
        return [
            checks.Warning(
                f"database {xjobs.database!r} did not answer, so the checks that read the jobs "
                f"rows did not run: {reason}",
                hint=f"start the server or fix DATABASES[{xjobs.database!r}], then run the "
                "check again",
                id="django_xjobs.W004",
            )
        ]
    return []


@checks.register(checks.Tags.database)
def check_unregistered_names(
    app_configs: object = None, databases: object = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """``manage.py check --database default``: live rows whose job name this process does not
    register. Run at deploy time, it catches a rename before the worker parks the queued rows
    as ``X_JOB_UNKNOWN`` and dead-letters them after ``UNKNOWN_JOB_GRACE``."""
    from django.db import DatabaseError

    from ..models import Job
    from ..states import LIVE_STATES

    xjobs = _checked_database(databases)
    if xjobs is None or xjobs.driver != "postgres":
        return []
    try:
        names = set(
            Job.objects.using(xjobs.database)
            .filter(state__in=LIVE_STATES)
            .values_list("name", flat=True)
            .distinct()
        )
    except DatabaseError:
        return []  # not migrated yet: migrate runs this check before it creates the tables
    # a django.tasks task's rows are named by its module path and found by importing it
    unknown = sorted(n for n in names if registry.get_job(n) is None)
    if not unknown:
        return []
    shown = ", ".join(unknown[:10]) + (
        f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
    )
    return [
        checks.Warning(
            f"live jobs in database {xjobs.database!r} carry names no job in this process "
            f"registers: {shown}; {registry.discovered()}",
            hint="a worker parks such rows as X_JOB_UNKNOWN and dead-letters them after "
            'XJOBS["UNKNOWN_JOB_GRACE"]: deploy the code that declares them, or keep the old '
            "name with job(name=...)",
            id="django_xjobs.W003",
        )
    ]


@checks.register(checks.Tags.database)
def check_pending_backfills(
    app_configs: object = None, databases: object = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """``manage.py check --database default``: backfills declared for this environment with no
    completed pass in it (``X_BACKFILL_PENDING``), what ``xjobs_backfill --pending`` gates on."""
    from django.db import DatabaseError

    from ..backfills import registered_backfills

    xjobs = _checked_database(databases)
    if xjobs is None or not registered_backfills():
        return []
    from ..backfills.status import pending_backfills

    try:
        pending = [spec.name for spec in pending_backfills()]
    except DatabaseError:
        return []  # not migrated yet: migrate runs this check before it creates the tables
    if not pending:
        return []
    where = f"environment {xjobs.environment!r}" if xjobs.environment else "this environment"
    return [
        checks.Warning(
            f"X_BACKFILL_PENDING: backfills declared for {where} have no completed pass in "
            f"database {xjobs.database!r}: {', '.join(pending)}",
            hint="run: python manage.py xjobs_backfill --all --wait (a worker watching their "
            "queues runs each pass); xjobs_backfill --pending gates a deploy on the same",
            id="django_xjobs.W020",
        )
    ]


@checks.register("xjobs_deploy", deploy=True)
def check_deploy_versions(
    app_configs: object = None, databases: object = None, **kwargs: object
) -> list[checks.CheckMessage]:
    """``manage.py check --deploy --tag xjobs_deploy``: what ``xjobs check --deploy`` gates on
    (issue 44, SPEC VER-13), as an error per job whose live runs this code would park or leave
    to no worker: a CI step that fails the deploy."""
    from django.db import DatabaseError

    from ..operations.versions import deploy_blockers

    try:
        xjobs = conf.validate(getattr(settings, "XJOBS", {}))
        blockers = deploy_blockers()
    except (XJobsError, DatabaseError):
        return []  # an invalid XJOBS is check_settings' to report; not migrated yet: nothing live
    found: list[checks.CheckMessage] = []
    for job in sorted({v.job for v in blockers}):
        runs = [v for v in blockers if v.job == job]
        said = ", ".join(
            f"{v.running + v.waiting + v.parked} of version "
            f"{'-' if v.version is None else v.version} ({v.fate})"
            for v in runs
        )
        declared = runs[0].declared
        found.append(
            checks.Error(
                f"X_JOB_VERSION: live runs of {job} in database {xjobs.database!r} would be "
                f"parked or run by no worker of this code (it declares "
                f"{'no such job' if declared is None else f'version {declared}'}): {said}",
                hint="keep a worker of their version running, declare old_runs='replay' or "
                "'restart', or start them again: python manage.py xjobs retry <id> --restart",
                id="django_xjobs.E030",
            )
        )
    return found


@checks.register(checks.Tags.database)
def check_routed_databases_migrated(
    app_configs: object = None, databases: object = None, **kwargs: object
) -> list[checks.CheckMessage]:
    """``manage.py check --database <alias>``: every database jobs are routed to
    (``XJOBS["QUEUE_DATABASES"]``, ``ROUTER``) holds the tables at this release's migration; a
    job routed to one that does not would fail at its enqueue (SPEC SHARD-01)."""
    from django.db import DatabaseError, connections
    from django.db.migrations.loader import MigrationLoader

    try:
        xjobs = conf.validate(getattr(settings, "XJOBS", {}))
    except XJobsError:
        return []
    asked = databases if isinstance(databases, list | tuple | set) else ()
    if xjobs.routing is None or xjobs.driver != "postgres":
        return []
    found: list[checks.CheckMessage] = []
    for alias in xjobs.routing.aliases:
        if alias not in asked:
            continue
        try:
            loader = MigrationLoader(connections[alias], ignore_no_migrations=True)
        except DatabaseError:
            continue  # a database that does not answer is W004's (and the preflight's) to say
        missing = [
            name
            for app, name in loader.graph.leaf_nodes("django_xjobs")
            if (app, name) not in loader.applied_migrations
        ]
        if missing:
            found.append(
                checks.Error(
                    f"database {alias!r}, where XJOBS routes jobs, is not migrated: "
                    f"django_xjobs {', '.join(missing)} is not applied there",
                    hint=f"run: python manage.py migrate django_xjobs --database {alias}",
                    id="django_xjobs.E048",
                )
            )
    return found
