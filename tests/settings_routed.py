"""The test settings with the ``reports`` queue's jobs in the ``shard`` alias, at
``XJOBS_SHARD_URL`` when it is set: a second PostgreSQL server a process test starts, stops and
starts again (issue 48, tests/drivers/test_routing_servers.py)."""

import os

from django_xjobs.testing.postgres import database_config
from tests.settings import *  # noqa: F403
from tests.settings import DATABASES, XJOBS

if os.environ.get("XJOBS_SHARD_URL"):
    DATABASES["shard"] = database_config(os.environ["XJOBS_SHARD_URL"])
XJOBS = {**XJOBS, "QUEUES": ["other", "reports"], "QUEUE_DATABASES": {"reports": "shard"}}
