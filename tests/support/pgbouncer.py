"""A private PgBouncer in transaction mode in front of the test database (issue 17, §2).

The Debian package's binary (1.18: no prepared statements in transaction mode), never its system
service: ``pgbouncer_url`` starts one per test session on a free port with a generated ini
(``auth_type=trust``, ``pool_mode=transaction``, a pool smaller than the clients so server
sessions really are shared), pointed at whatever server the test database lives on (the
embedded one's socket directory, or ``DATABASE_URL``'s host), and stops it at the end.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

from tests.support.database import free_port
from tests.support.process import wait_for

BINARY = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
#: server connections per (database, user): fewer than a worker's threads, so a session that
#: assumed it kept its backend would be caught talking to another client's
POOL_SIZE = 4


def _server() -> dict[str, str]:
    """Where the test database's server listens, as the test's own connection sees it."""
    settings = connection.settings_dict
    with connection.cursor() as cursor:
        cursor.execute("SHOW port")
        (port,) = cursor.fetchone()
    return {
        "host": settings["HOST"] or "127.0.0.1",
        "port": str(settings["PORT"] or port),
        "user": settings["USER"] or "postgres",
        "password": settings["PASSWORD"] or "",
    }


def _run_as(host: str) -> list[str]:
    """PgBouncer refuses to run as root: as root, drop to the owner of the server's socket
    directory (it alone may enter it), or to nobody for a TCP server."""
    if os.geteuid() != 0:
        return []
    owner = pwd.getpwuid(Path(host).stat().st_uid).pw_name if host.startswith("/") else "nobody"
    return ["-u", owner]


def write_ini(folder: Path, server: dict[str, str], port: int) -> Path:
    """The ini and userlist of a transaction-mode PgBouncer on ``port`` for every database."""
    password = f" password={server['password']}" if server["password"] else ""
    (folder / "userlist.txt").write_text(f'"{server["user"]}" ""\n')
    ini = folder / "pgbouncer.ini"
    ini.write_text(
        "[databases]\n"
        f"* = host={server['host']} port={server['port']} user={server['user']}{password}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = trust\n"
        f"auth_file = {folder / 'userlist.txt'}\n"
        "pool_mode = transaction\n"
        f"default_pool_size = {POOL_SIZE}\n"
        "max_client_conn = 200\n"
        "server_reset_query =\n"
        "ignore_startup_parameters = extra_float_digits\n"
        "logfile =\n"
        "pidfile =\n"
    )
    for path in (folder, ini, folder / "userlist.txt"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return ini


def _listening(port: int, process: subprocess.Popen[str]) -> bool:
    if process.poll() is not None:
        raise AssertionError(f"pgbouncer exited {process.returncode}: {process.stderr.read()}")  # type: ignore[union-attr]
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def pgbouncer_url(django_db_setup, django_db_blocker) -> Iterator[str]:
    """A ``postgres://`` URL of the test database through a transaction-mode PgBouncer started
    for the module that uses it. Stopped when the module ends: its pooled server connections
    would otherwise stay open to the test database for the rest of the session, and tests that
    count a worker's backends would count them too."""
    assert os.path.exists(BINARY), (
        "PgBouncer is missing: bash scripts/provision (make test runs it)"
    )
    with django_db_blocker.unblock():
        server = _server()
        name = quote(connection.settings_dict["NAME"])
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="xjobs-bouncer-") as folder:
        ini = write_ini(Path(folder), server, port)
        process = subprocess.Popen(
            [BINARY, *_run_as(server["host"]), str(ini)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(lambda: _listening(port, process), timeout=10, what="pgbouncer to listen")
            yield f"postgres://{quote(server['user'])}@127.0.0.1:{port}/{name}"
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            process.stderr.close()  # type: ignore[union-attr]
