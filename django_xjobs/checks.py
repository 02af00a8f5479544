"""System checks: ``manage.py check`` (and every command) reports a misconfiguration early,
each with a hint."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from . import conf, registry
from .errors import XJobsError


@checks.register("django_xjobs")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
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
    return found + _check_jobs()


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
    capped = [h.name for h in registry.registered_jobs() if h.concurrency]
    if capped:
        from .drivers import get_driver

        if getattr(get_driver(), "leases", None) is None:
            found.append(
                checks.Error(
                    f"jobs {', '.join(capped)} declare concurrency, and the driver has no lease store",
                    hint="use the postgres or memory driver, or drop concurrency= from those jobs",
                    id="django_xjobs.E004",
                )
            )
    return found
