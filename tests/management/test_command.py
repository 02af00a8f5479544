"""Every operator command fails in one line (issue 10, item 4): real ``manage.py`` processes
against a database that has no tables yet (before ``migrate``) and against a closed port.

Each process must exit non-zero with exactly one line on stderr carrying the error code and the
fix, never a traceback. The commands of one database run side by side to keep this file quick.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.database import closed_port_url, unmigrated_database
from tests.support.process import MANAGE, ROOT, run_manage, worker_env

pytestmark = pytest.mark.process

SOME_ID = "0197a3c2-5b1e-7c4d-9f00-1a2b3c4d5e6f"
# --settings comes after the action on purpose: global options must work there too
COMMANDS = {
    "xjobs ls": ["xjobs", "ls"],
    "xjobs show": ["xjobs", "show", SOME_ID],
    "xjobs dead": ["xjobs", "dead"],
    "xjobs prune": ["xjobs", "prune", "--older-than", "30"],
    "xjobs retry": ["xjobs", "retry", SOME_ID],
    "xjobs cancel": ["xjobs", "cancel", SOME_ID],
    "xjobs queues": ["xjobs", "queues", "--json"],
    "xjobs_worker": ["xjobs_worker", "--burst"],
    "xjobs_relay": ["xjobs_relay", "--once"],
    "xjobs_scheduler": ["xjobs_scheduler"],
}
FIX = {"no tables": "migrate", "closed port": "PostgreSQL is running"}


@pytest.fixture(scope="module")
def empty_database_url() -> Iterator[str]:
    """A database on the test server where ``migrate`` never ran."""
    with unmigrated_database() as url:
        yield url


@pytest.fixture(scope="module")
def outcomes(empty_database_url) -> dict[tuple[str, str], tuple[int, str, str]]:
    """(database, command) -> (exit code, stdout, stderr), every process started at once."""
    urls = {"no tables": empty_database_url, "closed port": closed_port_url()}
    started = {
        (where, command): subprocess.Popen(
            [sys.executable, str(MANAGE), *argv, "--settings=tests.settings"],
            env=worker_env(url),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for where, url in urls.items()
        for command, argv in COMMANDS.items()
    }
    results = {}
    for key, process in started.items():
        out, err = process.communicate(timeout=120)
        results[key] = (process.returncode, out, err)
    return results


@pytest.mark.parametrize("where", sorted(FIX))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_without_its_database_prints_one_line_with_the_code_and_the_fix(
    outcomes, where, command
):
    code, out, err = outcomes[(where, command)]
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1, (out, err)
    assert len(lines) == 1, err
    assert "X_DRIVER_UNAVAILABLE" in lines[0] and FIX[where] in lines[0], lines[0]
    assert "Traceback" not in err


def test_the_manifest_needs_no_database(empty_database_url):
    """``xjobs manifest`` reads the code, so it answers before ``migrate`` too."""
    done = run_manage("xjobs", "manifest", "--settings=tests.settings", url=closed_port_url())
    assert done.returncode == 0, done.stderr
    assert "tests.daily" in done.stdout


def test_a_schema_behind_the_code_names_migrate(empty_database_url):
    """A table from an older release (a column a later migration adds is missing): the stray
    database error is told apart by SQLSTATE and still ends as one line naming ``migrate``."""
    import psycopg

    with psycopg.connect(empty_database_url, autocommit=True) as other:
        other.execute("CREATE TABLE IF NOT EXISTS x_jobs (id uuid PRIMARY KEY)")
    try:
        done = run_manage("xjobs", "ls", "--settings=tests.settings", url=empty_database_url)
    finally:
        with psycopg.connect(empty_database_url, autocommit=True) as other:
            other.execute("DROP TABLE x_jobs")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "X_DRIVER_UNAVAILABLE" in lines[0] and "missing a column" in lines[0], lines[0]
    assert "migrate" in lines[0]


def test_traceback_still_shows_the_whole_story():
    """``--traceback`` is how an operator asks for more than the one line."""
    done = run_manage(
        "xjobs", "ls", "--settings=tests.settings", "--traceback", url=closed_port_url()
    )
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "X_DRIVER_UNAVAILABLE" in done.stderr
