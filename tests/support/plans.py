"""The plan PostgreSQL makes for one of our statements, as a custom plan (the parameters' values
known) or as the generic plan a prepared statement may settle on after five executions."""

from __future__ import annotations

import json
import re
from typing import Any

from django.db import connection

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def plan(
    text: str,
    params: dict[str, Any],
    *,
    generic: bool,
    analyze: bool = False,
    buffers: bool = False,
) -> dict:
    """The top node of ``EXPLAIN (FORMAT JSON)`` for ``text`` run with ``params``; ``analyze``
    runs it too (inside the test's transaction), ``buffers`` (with ``analyze``) adds the shared
    buffers each node read (``Shared Hit Blocks``, ``Shared Read Blocks``, its children's
    included)."""
    options = ", ".join(
        ["ANALYZE"] * analyze + ["BUFFERS"] * (analyze and buffers) + ["FORMAT JSON"]
    )
    with connection.cursor() as cursor:
        if not generic:
            cursor.execute(f"EXPLAIN ({options}) {text}", params)
            return _first(cursor)
        names: list[str] = []

        def number(match: re.Match[str]) -> str:
            if match.group(1) not in names:
                names.append(match.group(1))
            return f"${names.index(match.group(1)) + 1}"

        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute("PREPARE plan_check AS " + _PLACEHOLDER.sub(number, text))
        try:
            placeholders = ", ".join(["%s"] * len(names))
            cursor.execute(
                f"EXPLAIN ({options}) EXECUTE plan_check({placeholders})",
                [params[n] for n in names],
            )
            return _first(cursor)
        finally:
            cursor.execute("DEALLOCATE plan_check")


def _first(cursor: Any) -> dict:
    value = cursor.fetchone()[0]
    return (json.loads(value) if isinstance(value, str) else value)[0]["Plan"]
