"""Structured log events with stable dotted names (``xjobs.job.completed``)."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict

from .redact import redact
from .text import TRACEBACK_LIMIT, storable

logger = logging.getLogger("django_xjobs")

#: during an outage, the same event for the same kind of error is logged at most this often
QUIET = 10.0
_KINDS_KEPT = 1000
_throttle_lock = threading.Lock()
#: (event, kind) -> (when it was last logged, lines held back since)
_throttled: OrderedDict[tuple[str, str], tuple[float, int]] = OrderedDict()


def event(level: int, name: str, /, **fields: object) -> None:
    """Log ``name`` with ``fields`` as ``key=value`` text and as record attributes."""
    if not logger.isEnabledFor(level):
        return
    # no secret of the current run leaves the process in a log line (redact.py), and no NUL,
    # lone surrogate or megabyte of text reaches a handler that cannot write it (text.py)
    text = storable(
        redact(" ".join(f"{k}={_text(v)}" for k, v in fields.items() if v is not None)),
        TRACEBACK_LIMIT,
    )
    fields = {k: _scrubbed(v) for k, v in fields.items()}
    logger.log(level, "%s %s", name, text, extra={"event": name, "fields": fields})


def throttled(level: int, name: str, /, *, kind: str, **fields: object) -> bool:
    """``event()``, but ``name`` for the same ``kind`` of error (a SQLSTATE, a class name) at
    most once per ``QUIET`` seconds in this process; the next line it logs carries
    ``suppressed=N``, the lines held back since the last one. True when it logged."""
    now = time.monotonic()
    key = (name, kind)
    with _throttle_lock:
        last, suppressed = _throttled.get(key, (None, 0))
        if last is not None and now - last < QUIET:
            _throttled[key] = (last, suppressed + 1)
            return False
        _throttled[key] = (now, 0)
        _throttled.move_to_end(key)
        while len(_throttled) > _KINDS_KEPT:
            _throttled.popitem(last=False)
    event(level, name, **fields, suppressed=suppressed or None)
    return True


def _scrubbed(value: object) -> object:
    """A field as a structured handler gets it: texts and errors scrubbed, the rest as is."""
    if isinstance(value, str | BaseException):
        return storable(redact(str(value)), TRACEBACK_LIMIT)
    return value


def _text(value: object) -> str:
    text = str(value)
    return repr(text) if (" " in text or not text) else text
