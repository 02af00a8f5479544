"""The test settings plus this package as an app, so workers autodiscover ``chaos.jobs``; the
outbox is on, so a producer's enqueue inside a transaction is staged (SPEC OUTBOX-01)."""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS, XJOBS

INSTALLED_APPS = [*INSTALLED_APPS, "chaos"]
XJOBS = {**XJOBS, "OUTBOX": "auto"}
