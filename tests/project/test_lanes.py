"""The ``unit`` lane (tests/conftest.py): a test with no database fixture, no ``django_db``
mark and no subprocess runs there, and a run of that lane starts no PostgreSQL server."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.process import ROOT

pytestmark = pytest.mark.process  # it runs pytest in a child process


def test_the_unit_lane_runs_only_unit_tests_and_starts_no_server():
    """testing/test_user_guide.py mixes ``db`` tests and a Django ``TestCase``,
    worker/test_worker_fleet.py starts subprocesses, drivers/postgres/test_sql.py needs neither:
    only the last runs, without a server."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "PYTEST_ADDOPTS"}}
    files = [
        "tests/testing/test_user_guide.py",
        "tests/worker/test_worker_fleet.py",
        "tests/drivers/postgres/test_sql.py",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "unit", "-v", "-p", "no:cacheprovider", *files],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = [line.split("::")[0] for line in done.stdout.splitlines() if " PASSED" in line]
    assert ran and set(ran) == {"tests/drivers/postgres/test_sql.py"}, done.stdout
    assert "xjobs: embedded PostgreSQL not started" in done.stdout, done.stdout
