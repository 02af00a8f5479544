"""Time-ordered UUIDs (version 7), so sorting ids sorts by creation (SPEC DB-03)."""

from __future__ import annotations

import os
import threading
import time
import uuid

_lock = threading.Lock()
_last = [0, 0]  # [unix ms, 12-bit counter] keeps ids monotonic inside one millisecond


def uuid7() -> uuid.UUID:
    """A UUIDv7 (RFC 9562): 48-bit unix milliseconds, a counter, then random bits."""
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms <= _last[0]:
            now_ms = _last[0]
            _last[1] += 1
            if _last[1] > 0xFFF:  # counter spent: borrow the next millisecond
                now_ms += 1
                _last[1] = 0
        else:
            _last[1] = int.from_bytes(os.urandom(2), "big") & 0x3FF
        _last[0] = now_ms
        counter = _last[1]
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (now_ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= counter << 64
    value |= 0b10 << 62
    value |= rand
    return uuid.UUID(int=value)
