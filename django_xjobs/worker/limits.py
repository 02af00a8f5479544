"""Per-process limits on runs in flight (SPEC LIMIT-*). Placeholder until implemented."""

from __future__ import annotations

from typing import Any


def parse_limits(raw: Any) -> Any:
    return raw
