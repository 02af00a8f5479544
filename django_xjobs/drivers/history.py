"""A driver's ``history()`` store, made of its two parts: the per-minute rollup its settles
write and the queue depth its workers sample, each kept by the driver's own module."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..rollup import RollupRow
    from .contract import DepthSample


class _Rollups(Protocol):
    def read(self, since: datetime) -> list[RollupRow]: ...

    def prune(self, older_than: float) -> int: ...


class _Depths(Protocol):
    def sample(self) -> int: ...

    def read(self, since: datetime) -> list[DepthSample]: ...

    def prune(self, older_than: float) -> int: ...


class History:
    """``HistoryStore`` over a driver's rollup and depth parts: each verb is one call to one."""

    def __init__(self, rollups: _Rollups, depths: _Depths) -> None:
        self._rollups, self._depths = rollups, depths

    def read_rollups(self, since: datetime) -> list[RollupRow]:
        return self._rollups.read(since)

    def prune_rollups(self, older_than: float) -> int:
        return self._rollups.prune(older_than)

    def sample_depth(self) -> int:
        return self._depths.sample()

    def read_depths(self, since: datetime) -> list[DepthSample]:
        return self._depths.read(since)

    def prune_depths(self, older_than: float) -> int:
        return self._depths.prune(older_than)
