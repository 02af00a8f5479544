"""The test settings plus this package as an app, so workers autodiscover ``chaos.jobs``; the
outbox is on, so a producer's enqueue inside a transaction is staged (SPEC OUTBOX-01)."""

from django_xjobs.conf import DEFAULTS
from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS, XJOBS

INSTALLED_APPS = [*INSTALLED_APPS, "chaos"]
#: short bounds, where this checkout has them, so a stuck worker shows within one scenario
SHORT_BOUNDS = {"STATEMENT_TIMEOUT": 5, "STALL_TIMEOUT": 10}
XJOBS = {
    **XJOBS,
    "OUTBOX": "auto",
    **{key: value for key, value in SHORT_BOUNDS.items() if key in DEFAULTS},
}
