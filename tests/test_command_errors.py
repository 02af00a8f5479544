"""Every operator command fails in one line (issue 10, item 4): real ``manage.py`` processes
against a database that has no tables yet (before ``migrate``) and against a closed port.

Each process must exit non-zero with exactly one line on stderr carrying the error code and the
fix, never a traceback. The commands of one database run side by side to keep this file quick.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from django_xjobs.testing.postgres import database_url, url_for_database
from tests.test_process import MANAGE, ROOT, worker_env

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


def closed_port_url() -> str:
    with socket.socket() as probe:  # a port the OS just handed out and nobody listens on now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"postgres://nobody:secret@127.0.0.1:{port}/nothing"


@pytest.fixture(scope="module")
def empty_database_url() -> Iterator[str]:
    """A database on the test server where ``migrate`` never ran."""
    import psycopg

    name = f"xjobs_unmigrated_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_maintenance_url(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield url_for_database(database_url(), name)
    finally:
        with psycopg.connect(_maintenance_url(), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


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
    done = subprocess.run(
        [sys.executable, str(MANAGE), "xjobs", "manifest", "--settings=tests.settings"],
        env=worker_env(closed_port_url()),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "tests.daily" in done.stdout


def test_a_schema_behind_the_code_names_migrate(empty_database_url):
    """A table from an older release (a column a later migration adds is missing): the stray
    database error is told apart by SQLSTATE and still ends as one line naming ``migrate``."""
    import psycopg

    with psycopg.connect(empty_database_url, autocommit=True) as other:
        other.execute("CREATE TABLE IF NOT EXISTS x_jobs (id uuid PRIMARY KEY)")
    try:
        done = subprocess.run(
            [sys.executable, str(MANAGE), "xjobs", "ls", "--settings=tests.settings"],
            env=worker_env(empty_database_url),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        with psycopg.connect(empty_database_url, autocommit=True) as other:
            other.execute("DROP TABLE x_jobs")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "X_DRIVER_UNAVAILABLE" in lines[0] and "missing a column" in lines[0], lines[0]
    assert "migrate" in lines[0]


def test_traceback_still_shows_the_whole_story():
    """``--traceback`` is how an operator asks for more than the one line."""
    done = subprocess.run(
        [sys.executable, str(MANAGE), "xjobs", "ls", "--settings=tests.settings", "--traceback"],
        env=worker_env(closed_port_url()),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "X_DRIVER_UNAVAILABLE" in done.stderr


def _maintenance_url() -> str:
    """The server's own "postgres" database: the URL's database need not exist (Django's test
    runner creates test_<name> beside it; CI points DATABASE_URL at a name it never creates)."""
    return url_for_database(database_url(), "postgres")
