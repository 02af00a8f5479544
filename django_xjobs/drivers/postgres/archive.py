"""The PostgreSQL driver's history of finished jobs (issue 46): the day partitions of
``x_job_history`` created ahead and dropped by retention, and the batched move out of x_jobs
(the statements of ``archive.sql``; the parents are created by migration 0032)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from pathlib import Path
from uuid import UUID

from django.db import connections, transaction

from ...states import FINISHED_STATES
from ..contract import HistoryPartition
from . import sql

STATEMENTS = sql.load(Path(__file__).with_name("archive.sql"))
#: how long a day's partition made or dropped waits for the locks it needs: past it the pass
#: fails (``xjobs.worker.history_failed``) and the next one, a minute later, tries again,
#: rather than queue every read of the history behind a slow one (HIST-15)
DDL_WAIT_MS = "5000"
#: a day's partition: x_job_history_<state>_pYYYYMMDD (the name says its state and day)
_NAME = re.compile(r"^x_job_history_([a-z]+)_p(\d{8})$")


@cache
def _statement(name: str) -> str:
    return with_columns(STATEMENTS[name])


def with_columns(statement: str) -> str:
    """``statement`` with every column of a job named (``JobColumns``: what both tables hold):
    ``{columns}``, and ``{j_columns}``/``{h_columns}`` each as ``j.``/``h.<column>``."""
    from ...models import Job  # the app registry is ready by the first move

    names = [str(f.column) for f in Job._meta.concrete_fields]
    for alias in ("j", "h"):
        columns = ", ".join(f"{alias}.{n}" for n in names)
        statement = statement.replace(f"{{{alias}_columns}}", columns)
    return statement.replace("{columns}", ", ".join(names))


def partition_name(state: str, day: date) -> str:
    if state not in FINISHED_STATES:  # a name is built into DDL: only the four states
        raise ValueError(state)
    return f"x_job_history_{state}_p{day:%Y%m%d}"


class PostgresArchive:
    """The history's partitions and the mover, on one database alias."""

    def __init__(self, using: str) -> None:
        self.using = using

    def partitions(self) -> list[HistoryPartition]:
        found = []
        for _, name, _ in sql.fetch(self.using, STATEMENTS["partitions"], {}):
            matched = _NAME.match(name)
            if matched:
                day = datetime.strptime(matched[2], "%Y%m%d").date()
                found.append(HistoryPartition(state=matched[1], day=day, name=name))
        return sorted(found, key=lambda p: (p.state, p.day))

    def ensure(self, ahead: int) -> list[HistoryPartition]:
        """HIST-06: a partition for each finished state and day from its oldest row still in
        x_jobs (or today) to ``ahead`` days after today; the ones created, in order."""
        created = []
        with transaction.atomic(using=self.using):
            sql.fetch(self.using, STATEMENTS["lock_partitions"], {})
            sql.fetch(self.using, STATEMENTS["bound_ddl"], {"ms": DDL_WAIT_MS})
            have = {(p.state, p.day) for p in self.partitions()}
            rows = sql.fetch(
                self.using, STATEMENTS["oldest_finished"], {"states": list(FINISHED_STATES)}
            )
            with connections[self.using].cursor() as cursor:
                for state, oldest, now in rows:
                    today = _day(now)
                    day = min(_day(oldest), today) if oldest is not None else today
                    while day <= today + timedelta(days=ahead):
                        if (state, day) not in have:
                            name = partition_name(state, day)
                            for statement in _create(state, name, day):
                                cursor.execute(statement)
                            created.append(HistoryPartition(state=state, day=day, name=name))
                        day += timedelta(days=1)
        return sorted(created, key=lambda p: (p.state, p.day))

    def move(self, *, grace: float, batch: int, batches: int | None) -> int:
        """HIST-02: finished rows older than ``grace`` seconds moved a batch (a transaction)
        at a time, until a batch comes back short or ``batches`` were moved; how many."""
        self.ensure(0)
        moved, rounds = 0, 0
        while batches is None or rounds < batches:
            with transaction.atomic(using=self.using):
                went = sql.count(
                    self.using, _statement("move_finished"), {"grace": grace, "batch": batch}
                )
            moved, rounds = moved + went, rounds + 1
            if went < batch:
                break
        return moved

    def restore(self, job_id: UUID) -> bool:
        """HIST-05: the job's row back from the history into x_jobs (in the caller's
        transaction); whether it was there."""
        return bool(sql.fetch(self.using, _statement("restore"), {"id": job_id}))

    def drop(self, retention: Mapping[str, float]) -> list[HistoryPartition]:
        """HIST-03: every day of a state whose end is over its retention ago, dropped whole,
        after its jobs' step records; the ones dropped."""
        [(now,)] = sql.fetch(self.using, STATEMENTS["now"], {})
        dropped = []
        for part in self.partitions():
            kept = retention.get(part.state)
            end = datetime.combine(part.day + timedelta(days=1), time(0), UTC)
            if kept is None or end > now - timedelta(seconds=kept):
                continue
            with transaction.atomic(using=self.using):
                statement = STATEMENTS["partition_steps"].replace("{partition}", part.name)
                sql.count(self.using, statement, {})
                sql.fetch(self.using, STATEMENTS["lock_partitions"], {})
                sql.fetch(self.using, STATEMENTS["bound_ddl"], {"ms": DDL_WAIT_MS})
                with connections[self.using].cursor() as cursor:
                    cursor.execute(f"DROP TABLE IF EXISTS {part.name}")
            dropped.append(part)
        return dropped


def moved_ids(using: str, ids: Sequence[UUID]) -> dict[UUID, UUID]:
    """HIST-13: each of ``ids`` whose job lives in the history, with its run id."""
    if not ids:
        return {}
    rows = sql.fetch(using, STATEMENTS["moved_ids"], {"ids": list(ids)})
    return {UUID(str(job_id)): UUID(str(run_id)) for job_id, run_id in rows}


def _day(moment: datetime) -> date:
    """The UTC day of a database time (partitions are cut at UTC midnight)."""
    return moment.astimezone(UTC).date()


def _create(state: str, name: str, day: date) -> list[str]:
    """A day's partition made apart, then attached: ``ATTACH PARTITION`` takes a SHARE UPDATE
    EXCLUSIVE lock on the state's table, which its readers and the mover's inserts go on
    beside, where ``CREATE TABLE ... PARTITION OF`` takes an ACCESS EXCLUSIVE one that would
    queue every read of that state behind the slowest. The history's indexes are made on the
    new, empty table as it is attached."""
    low, high = day, day + timedelta(days=1)
    return [
        f"CREATE TABLE {name} (LIKE x_job_history_{state} INCLUDING DEFAULTS)",
        f"ALTER TABLE x_job_history_{state} ATTACH PARTITION {name} "
        f"FOR VALUES FROM ('{low:%Y-%m-%d} 00:00+00') TO ('{high:%Y-%m-%d} 00:00+00')",
    ]
