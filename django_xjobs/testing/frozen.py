"""Time in tests follows freezegun, on both drivers.

Python code reads ``clock.system_clock``, which reads ``datetime.now()``: freezegun patches
that, so the executor, the memory driver and the scheduler's cron occurrences already see the
frozen time. PostgreSQL does not: every due, lease and expiry comparison reads the database's
``now()``, which no Python patch reaches; the driver makes it follow (on PostgreSQL,
``drivers/postgres/frozen.py``: the jobs database's ``now()`` is the frozen time while one is
active).
"""

from __future__ import annotations

from ..clock import frozen_now
from ..drivers import catch_up_frozen_time, follow_frozen_time

__all__ = ["catch_up", "frozen_now", "install"]


def install() -> None:
    """Follow freezegun on the jobs database from its next connection on."""
    follow_frozen_time()


def catch_up() -> None:
    """Follow freezegun on a connection opened before ``django_xjobs.testing`` was imported."""
    catch_up_frozen_time()
