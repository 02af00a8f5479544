"""``MoveStore`` on ``moves.sql``: a queue's waiting jobs read and locked a page at a time,
written in another database, deleted here in the read's own transaction (issue 48)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from uuid import UUID

from django.db import transaction

from ...errors import InvariantError
from ..contract import MoveHolds, MovingJob
from . import sql

STATEMENTS = sql.load(Path(__file__).with_name("moves.sql"))


class PostgresMoveStore:
    def __init__(self, using: str) -> None:
        self.using = using

    def holds(self, queue: str, *, limit: int = 10) -> MoveHolds:
        running, waiting, linked = sql.fetch(
            self.using, STATEMENTS["move_holds"], {"queue": queue, "limit": limit}
        )[0]
        return MoveHolds(running=int(running), waiting=int(waiting), linked=tuple(linked))

    def move_out(
        self, queue: str, *, limit: int, into: Callable[[Sequence[MovingJob]], object]
    ) -> list[UUID]:
        with transaction.atomic(using=self.using):
            page = sql.fetch(self.using, STATEMENTS["move_page"], {"queue": queue, "limit": limit})
            if not page:
                return []
            into([MovingJob(id=row[0], held=(row[1], row[2])) for row in page])
            gone = sql.fetch(self.using, STATEMENTS["move_forget"], {"ids": [r[0] for r in page]})
        return [row[0] for row in gone]

    def take(self, jobs: Sequence[MovingJob]) -> list[UUID]:
        if not jobs:
            return []
        rows, steps = [], []
        for job in jobs:
            if not (isinstance(job.held, tuple) and len(job.held) == 2):
                raise InvariantError(
                    f"job {job.id} was read by another kind of store: a move is made between "
                    "two databases of the same driver"
                )
            rows.append(json.loads(job.held[0]))
            steps.extend(json.loads(job.held[1]))
        params = {"rows": json.dumps(rows), "steps": json.dumps(steps)}
        with transaction.atomic(using=self.using):
            written = sql.fetch(self.using, STATEMENTS["move_take"], params)
        return [row[0] for row in written]
