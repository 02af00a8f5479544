"""``make demo`` fails in one line: the code and the fix, a non-zero exit, no traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from django_xjobs.testing.postgres import database_url, url_for_database

pytestmark = pytest.mark.process
ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "example_project"


def run(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DATABASE_URL=url, PYTHONPATH=str(ROOT))
    env.pop("DJANGO_SETTINGS_MODULE", None)  # the demo's own settings, not the tests'
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def closed_port() -> int:
    with socket.socket() as probe:  # a port the kernel just gave out and nobody listens on
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def assert_one_line(result: subprocess.CompletedProcess[str], fix: str) -> None:
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "X_DRIVER_UNAVAILABLE" in lines[0]
    assert fix in lines[0]
    assert "Traceback" not in result.stdout + result.stderr


def test_demo_with_the_database_down_says_so_in_one_line():
    url = f"postgres://demo@127.0.0.1:{closed_port()}/demo"
    result = run(str(DEMO / "run_demo.py"), url=url)
    assert_one_line(result, fix="DATABASE_URL")
    assert "Connection refused" in result.stderr


@pytest.fixture
def unmigrated_url() -> Iterator[str]:
    server = url_for_database(database_url(), "postgres")  # the URL's database need not exist
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS xjobs_demo_unmigrated")
        admin.execute("CREATE DATABASE xjobs_demo_unmigrated")
    try:
        yield url_for_database(server, "xjobs_demo_unmigrated")
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute("DROP DATABASE xjobs_demo_unmigrated WITH (FORCE)")


def test_demo_command_before_migrate_says_so_in_one_line(unmigrated_url):
    result = run(str(DEMO / "manage.py"), "xjobs_demo", "--timeout", "5", url=unmigrated_url)
    assert_one_line(result, fix="migrate")
