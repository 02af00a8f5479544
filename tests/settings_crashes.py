"""The test settings with ``MAX_LEASE_EXPIRIES`` from ``XJOBS_MAX_LEASE_EXPIRIES`` (3 unless
set), so a process test runs real workers at the crash bound it is about (issue 39 item 3)."""

import os

from tests.settings import *  # noqa: F403
from tests.settings import XJOBS

XJOBS = {**XJOBS, "MAX_LEASE_EXPIRIES": int(os.environ.get("XJOBS_MAX_LEASE_EXPIRIES", "3"))}
