"""The memory driver's queue depth over time: the samples the PostgreSQL driver's
``sample_depth`` writes, kept in process under the driver's lock, on its clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from ..contract import DepthSample

if TYPE_CHECKING:
    from .state import MemoryState


class MemoryDepthStore:
    def __init__(self, state: MemoryState) -> None:
        self.state = state
        self._samples: dict[tuple[datetime, str], DepthSample] = {}

    def sample(self) -> int:
        with self.state._lock:
            now = self.state.clock.now()
            minute = now.astimezone(UTC).replace(second=0, microsecond=0)
            if any(key[0] == minute for key in self._samples):
                return 0  # another worker sampled this minute
            counts: dict[str, list[int]] = {}
            for row in self.state._rows.values():
                if row.state in ("ready", "delayed"):
                    counts.setdefault(row.queue, [0, 0, 0])[0 if row.run_at <= now else 1] += 1
                elif row.state == "running":
                    counts.setdefault(row.queue, [0, 0, 0])[2] += 1
            for queue, (ready, delayed, running) in counts.items():
                self._samples[(minute, queue)] = DepthSample(minute, queue, ready, delayed, running)
            return len(counts)

    def read(self, since: datetime) -> list[DepthSample]:
        with self.state._lock:
            return [self._samples[key] for key in sorted(self._samples) if key[0] >= since]

    def prune(self, older_than: float) -> int:
        with self.state._lock:
            cutoff = self.state.clock.now() - timedelta(seconds=older_than)
            gone = [key for key in self._samples if key[0] < cutoff]
            for key in gone:
                del self._samples[key]
            return len(gone)

    def shift(self, delta: timedelta) -> None:
        """Move every minute ``delta`` earlier, as ``MemoryDriver.age`` moves the rows."""
        moved = [replace(s, minute=s.minute - delta) for s in self._samples.values()]
        self._samples = {(s.minute, s.queue): s for s in moved}
