"""Structured log events with stable dotted names (``xjobs.job.completed``)."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("django_xjobs")


def event(level: int, name: str, /, **fields: Any) -> None:
    """Log ``name`` with ``fields`` as ``key=value`` text and as record attributes."""
    if not logger.isEnabledFor(level):
        return
    text = " ".join(f"{k}={_text(v)}" for k, v in fields.items() if v is not None)
    logger.log(level, "%s %s", name, text, extra={"event": name, "fields": fields})


def _text(value: Any) -> str:
    text = str(value)
    return repr(text) if (" " in text or not text) else text
