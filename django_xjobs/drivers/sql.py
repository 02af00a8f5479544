"""Load a ``.sql`` file of ``-- name: <statement>`` blocks into a dict of statement texts."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_HEADER = re.compile(r"^-- name: ([a-z_]+)\s*$", re.MULTILINE)


@cache
def load(path: str | Path) -> dict[str, str]:
    """The statements of the ``.sql`` file at ``path`` (pass ``Path(__file__).with_name(...)``)."""
    text = Path(path).read_text()
    parts = _HEADER.split(text)
    statements: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.strip().splitlines() if not line.lstrip().startswith("--")]
        statements[name] = "\n".join(lines).strip().rstrip(";")
    return statements
