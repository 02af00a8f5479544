"""System checks: a bad XJOBS setting fails ``manage.py check`` (and every command) early."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from . import conf
from .errors import XJobsError


@checks.register("django_xjobs")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    try:
        xjobs = conf.validate(getattr(settings, "XJOBS", {}))
    except XJobsError as error:
        return [checks.Error(error.message, hint=error.hint, id="django_xjobs.E001")]
    engine = settings.DATABASES[xjobs.database].get("ENGINE", "")
    if xjobs.driver == "postgres" and "postgresql" not in engine:
        return [
            checks.Error(
                f"database {xjobs.database!r} uses {engine or 'no engine'}; the job store needs PostgreSQL",
                hint='point XJOBS["DATABASE"] at a PostgreSQL alias, or use XJOBS["DRIVER"] = "memory" in tests',
                id="django_xjobs.E002",
            )
        ]
    return []
