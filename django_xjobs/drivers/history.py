"""A driver's ``history()`` store, made of its three parts: the per-minute rollup its settles
write, the queue depth its workers sample and the finished jobs' history (issue 46), each kept
by the driver's own module."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..rollup import RollupRow
    from .contract import DepthSample, HistoryPartition


class _Rollups(Protocol):
    def read(self, since: datetime) -> list[RollupRow]: ...

    def prune(self, older_than: float) -> int: ...


class _Depths(Protocol):
    def sample(self) -> int: ...

    def read(self, since: datetime) -> list[DepthSample]: ...

    def prune(self, older_than: float) -> int: ...


class _Archive(Protocol):
    def partitions(self) -> list[HistoryPartition]: ...

    def ensure(self, ahead: int) -> list[HistoryPartition]: ...

    def move(self, *, grace: float, batch: int, batches: int | None) -> int: ...

    def drop(self, retention: Mapping[str, float]) -> list[HistoryPartition]: ...


class History:
    """``HistoryStore`` over a driver's rollup, depth and archive parts: each verb is one call
    to one."""

    def __init__(self, rollups: _Rollups, depths: _Depths, archive: _Archive) -> None:
        self._rollups, self._depths, self._archive = rollups, depths, archive

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

    def partitions(self) -> list[HistoryPartition]:
        return self._archive.partitions()

    def ensure_partitions(self, ahead: int) -> list[HistoryPartition]:
        return self._archive.ensure(ahead)

    def move_finished(self, *, grace: float, batch: int = 1000, batches: int | None = None) -> int:
        return self._archive.move(grace=grace, batch=batch, batches=batches)

    def drop_partitions(self, retention: Mapping[str, float]) -> list[HistoryPartition]:
        return self._archive.drop(retention)
