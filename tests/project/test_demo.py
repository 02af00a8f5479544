"""``make demo`` fails in one line: the code and the fix, a non-zero exit, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.database import closed_port_url, unmigrated_database
from tests.support.process import ROOT

pytestmark = pytest.mark.process
DEMO = ROOT / "example_project"


def run(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DATABASE_URL=url, PYTHONPATH=str(ROOT))
    env.pop("DJANGO_SETTINGS_MODULE", None)  # the demo's own settings, not the tests'
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def assert_one_line(result: subprocess.CompletedProcess[str], fix: str) -> None:
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "X_DRIVER_UNAVAILABLE" in lines[0]
    assert fix in lines[0]
    assert "Traceback" not in result.stdout + result.stderr


def test_demo_with_the_database_down_says_so_in_one_line():
    result = run(str(DEMO / "run_demo.py"), url=closed_port_url())
    assert_one_line(result, fix="DATABASE_URL")
    assert "Connection refused" in result.stderr


@pytest.fixture
def unmigrated_url() -> Iterator[str]:
    with unmigrated_database("xjobs_demo_unmigrated") as url:
        yield url


def test_demo_command_before_migrate_says_so_in_one_line(unmigrated_url):
    result = run(str(DEMO / "manage.py"), "xjobs_demo", "--timeout", "5", url=unmigrated_url)
    assert_one_line(result, fix="migrate")
