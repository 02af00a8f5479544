"""The scheduler's state on PostgreSQL: the named statements of ``scheduler.sql``."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db import transaction

from ..contract import CronState, NotLeaderError
from . import sql

STATEMENTS = sql.load(Path(__file__).with_name("scheduler.sql"))


class PostgresSchedulerStore:
    def __init__(self, using: str) -> None:
        self.using = using

    def _execute(self, name: str, params: Mapping[str, object]) -> list[tuple[Any, ...]]:
        return sql.fetch(self.using, STATEMENTS[name], params)

    def watermark(self, cron: str) -> datetime | None:
        rows = self._execute("watermark", {"task": cron})
        return rows[0][0] if rows else None

    def mark_fired(self, cron: str, at: datetime) -> None:
        self._execute("mark_fired", {"task": cron, "at": at})

    def acquire(self, key: str, holder: str, ttl: float) -> bool:
        rows = self._execute("acquire", {"key": key, "holder": holder, "ttl": ttl})
        return bool(rows) and rows[0][0] == holder

    def confirm(self, key: str, holder: str) -> None:
        if not self._execute("confirm", {"key": key, "holder": holder}):
            raise NotLeaderError(key)

    def release(self, key: str, holder: str) -> None:
        self._execute("release", {"key": key, "holder": holder})

    def leader(self, key: str) -> str | None:
        rows = self._execute("leader", {"key": key})
        return rows[0][0] if rows else None

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        return transaction.atomic(using=self.using)

    def pause_cron(self, cron: str, by: str | None) -> CronState:
        row = self._execute("pause_cron", {"cron": cron, "by": by})[0]
        return CronState(row[0], True, row[1], row[2])

    def resume_cron(self, cron: str) -> CronState:
        row = self._execute("resume_cron", {"cron": cron})[0]
        return CronState(row[0], False)

    def mark_run(self, cron: str, key: str) -> datetime | None:
        rows = self._execute("mark_run", {"cron": cron, "key": key})
        return rows[0][0] if rows else None

    def cron_controls(self) -> list[CronState]:
        rows = self._execute("cron_controls", {})
        return [CronState(r[0], r[1] is not None, r[1], r[2]) for r in rows]

    def paused_crons(self) -> frozenset[str]:
        return frozenset(r[0] for r in self._execute("paused_crons", {}))
