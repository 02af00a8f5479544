"""``tests.settings`` behind a transaction-mode PgBouncer, for the processes of
tests/drivers/test_pooler_fleet.py: ``DATABASE_URL`` is the pooler's URL; ``XJOBS_LISTEN_URL``,
when set, is a direct URL of the same database that the listener gets as ``LISTEN_DATABASE``."""

import os

from django_xjobs.testing.postgres import database_config
from tests.settings import *  # noqa: F403
from tests.settings import DATABASES, XJOBS

# what Django's docs ask of an alias behind transaction pooling
DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
XJOBS = {**XJOBS, "POOLER": "transaction", "OUTBOX": "auto"}
if os.environ.get("XJOBS_LISTEN_URL"):
    DATABASES["direct"] = {
        **database_config(os.environ["XJOBS_LISTEN_URL"]),
        "TEST": {"MIRROR": "default"},
    }
    XJOBS["LISTEN_DATABASE"] = "direct"
