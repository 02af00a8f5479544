"""``XJOBS["CONCURRENCY"]`` and ``--concurrency``: one pool every queue shares, or threads per
queue (SPEC WORK-01), read and refused here, with the settings."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import InvariantError

#: the bounds of the numeric settings (docs/reference/settings.md): far past any real use, so
#: a typo (an extra three zeros) is refused at startup instead of exhausting the machine
MAX_THREADS = 1024  # threads in one pool of a worker process
#: ``\Z``, not ``$``: "$" also matches before a final newline, and "default\n" got through
QUEUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}\Z")
_EXAMPLE = (
    "e.g. default=8,emails=2 (threads per queue), or one number for a pool every queue shares"
)


def parse_concurrency(raw: object, *, field: str) -> int | dict[str, int]:
    """One shared pool (an int) or threads per queue (a dict, in the order given), read from an
    int, a dict, or the strings ``"8"`` and ``"default=8,emails=2"``. Anything else raises
    ``InvariantError`` naming ``field``."""

    def refuse(problem: str) -> InvariantError:
        return InvariantError(f"{field}={raw!r}: {problem}", hint=_EXAMPLE)

    if isinstance(raw, str):
        text = raw.strip()
        if _whole(text):
            return _threads(int(text), refuse, "the pool")
        shares: dict[str, int] = {}
        for item in text.split(","):
            name, equals, count = (part.strip() for part in item.partition("="))
            if not equals:
                raise refuse(f"{item.strip()!r} is not queue=threads")
            if not _whole(count):
                raise refuse(f"queue {name or '?'} has {count!r} threads, not a whole number")
            _add(shares, name, int(count), refuse)
        return shares
    if isinstance(raw, Mapping):
        if not raw:
            raise refuse("names no queue")
        shares = {}
        for name, count in raw.items():
            if isinstance(count, bool) or not isinstance(count, int):
                raise refuse(f"queue {name} has {count!r} threads, not a whole number")
            _add(shares, name, count, refuse)
        return shares
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise refuse("is neither a number of threads nor threads per queue")
    return _threads(raw, refuse, "the pool")


def _whole(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _threads(count: int, refuse: Any, what: str) -> int:
    if count < 1:
        raise refuse(f"{what} needs at least 1 thread (a positive integer)")
    if count > MAX_THREADS:
        raise refuse(f"{what} asks for {count:,} threads, more than {MAX_THREADS:,} in a process")
    return count


def _add(shares: dict[str, int], name: Any, count: int, refuse: Any) -> None:
    if not isinstance(name, str) or not QUEUE_NAME.match(name):
        raise refuse(f"{name!r} is not a queue name")
    if name in shares:
        raise refuse(f"queue {name} is named twice")
    shares[name] = _threads(count, refuse, f"queue {name}")
