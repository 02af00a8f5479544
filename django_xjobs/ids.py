"""Time-ordered UUIDs (version 7), so sorting ids sorts by creation (SPEC DB-03)."""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from collections.abc import Callable

_lock = threading.Lock()
_last = [0, 0]  # [unix ms, 12-bit counter] keeps ids monotonic inside one millisecond
_BATCH = 4096  # random bytes read per system call; each id takes 8, a new millisecond 2 more


class _Pool:
    """Random bytes from the OS's CSPRNG, read a page at a time (used with ``_lock`` held)."""

    data = b""
    at = 0

    @classmethod
    def take(cls, count: int) -> bytes:
        if cls.at + count > len(cls.data):
            cls.data, cls.at = os.urandom(_BATCH), 0
        cls.at += count
        return cls.data[cls.at - count : cls.at]

    @classmethod
    def forget(cls) -> None:
        cls.data, cls.at = b"", 0  # a forked child must not mint the random bits its parent will


os.register_at_fork(after_in_child=_Pool.forget)


def _own_uuid7() -> uuid.UUID:
    """A UUIDv7 (RFC 9562): 48-bit unix milliseconds, a counter, then random bits."""
    with _lock:
        return _next()


def _own_uuid7_many(count: int) -> list[uuid.UUID]:
    with _lock:
        return [_next() for _ in range(count)]


def _library_uuid7() -> Callable[[], uuid.UUID] | None:
    """A faster UUIDv7 maker than ours when one is installed: the standard library's (Python
    3.14), else ``uuid-utils`` (compiled; 20,000 ids cost a third of what ours do, and they were
    a third of ``enqueue_many``'s Python). Each keeps its ids increasing within the process, as
    ours does. ``uuid-utils``' generator keeps its random state across a fork, so a forked child
    reseeds it: two processes forked from one parent must not mint the same ids."""
    made: Callable[[], uuid.UUID] | None = getattr(uuid, "uuid7", None)
    if made is not None:
        return made
    try:
        import uuid_utils
        from uuid_utils import compat
    except ImportError:
        return None
    reseed = getattr(uuid_utils, "reseed_rng", None)
    if reseed is None:  # too old to reseed after a fork: ours is safe, and only slower
        return None
    os.register_at_fork(after_in_child=reseed)
    return compat.uuid7


_made = _library_uuid7()


def uuid7() -> uuid.UUID:
    """A UUIDv7 (RFC 9562): 48-bit unix milliseconds, a counter, then random bits."""
    return _own_uuid7() if _made is None else _made()


def uuid7_many(count: int) -> list[uuid.UUID]:
    """``count`` UUIDv7s in increasing order, for one batch."""
    if _made is None:
        return _own_uuid7_many(count)
    made = _made
    return [made() for _ in range(count)]


def _next() -> uuid.UUID:
    """The next id (call with ``_lock`` held)."""
    now_ms = time.time_ns() // 1_000_000
    if now_ms <= _last[0]:
        now_ms = _last[0]
        _last[1] += 1
        if _last[1] > 0xFFF:  # counter spent: borrow the next millisecond
            now_ms += 1
            _last[1] = 0
    else:
        _last[1] = int.from_bytes(_Pool.take(2), "big") & 0x3FF
    _last[0] = now_ms
    rand = int.from_bytes(_Pool.take(8), "big") & ((1 << 62) - 1)
    value = (now_ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= _last[1] << 64
    value |= 0b10 << 62
    value |= rand
    return uuid.UUID(int=value)


def uuid7_for(at_ms: int, *parts: str) -> uuid.UUID:
    """A UUIDv7 that is the same at every call with the same arguments: ``at_ms`` as its time
    and the rest a digest of ``parts``. For a row two processes may each try to write once,
    where the second must find the first by its primary key (a cron occurrence's jobs in
    another database, SPEC SHARD-12)."""
    digest = int.from_bytes(hashlib.sha256("\0".join(parts).encode()).digest()[:10], "big")
    value = (at_ms & (2**48 - 1)) << 80 | 0x7 << 76 | (digest >> 68) << 64  # 12 bits
    value |= 0b10 << 62 | (digest & (2**62 - 1))  # the variant, then 62 bits
    return uuid.UUID(int=value)
