"""Before a role starts: can it reach its database, and is the schema there? The driver
answers (on PostgreSQL a connect and a table lookup; in memory nothing can be missing)."""

from __future__ import annotations

from ..conf import XJobsSettings
from ..drivers import get_driver


def preflight(
    settings: XJobsSettings, *, database: str | None = None, table: str = "x_jobs"
) -> None:
    """Raise one clear ``DriverUnavailableError`` instead of a traceback at the first claim."""
    get_driver().jobs().preflight(database or settings.database, table)
