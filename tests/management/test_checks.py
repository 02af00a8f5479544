"""System checks of ``django_xjobs/management/checks.py`` that need a process of their own."""

from __future__ import annotations

import pytest

from tests.support.database import closed_port_url
from tests.support.process import run_manage


@pytest.mark.process
def test_check_with_the_database_down_warns_that_its_checks_did_not_run():
    """Issue 42: ``check --database default`` said "no issues" with the server down, since the
    checks that read the jobs rows took the connection error for a database not migrated yet."""
    result = run_manage(
        "check", "--database", "default", "--settings=tests.settings", url=closed_port_url()
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out  # a warning, as the other database checks
    assert "django_xjobs.W004" in out
    assert "did not answer" in out and "Connection refused" in out
    assert "no issues" not in out


@pytest.mark.process
def test_check_without_database_does_not_connect():
    result = run_manage("check", "--settings=tests.settings", url=closed_port_url())
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "W004" not in out
