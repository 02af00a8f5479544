"""What every part of the PostgreSQL driver shares: its statements, its channels, the database
alias it runs them on, and how a job row reads back."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ... import history
from ...payload import NotJSON, decode
from ..contract import (
    JobSnapshot,
)
from ..rules import (
    known_state,
)
from . import sql
from .archive import PostgresArchive
from .backfills import PostgresBackfillLedger
from .batches import PostgresBatchStore
from .depth import PostgresDepthStore
from .leases import PostgresLeaseStore
from .rollup import PostgresRollupStore
from .steps import PostgresEventStore, PostgresStepStore

if TYPE_CHECKING:
    pass


STATEMENTS = sql.load(Path(__file__).with_name("jobs.sql"))
CHANNEL = "xjobs"
#: pause and resume are told here, apart from the wake-ups: a worker re-reads its paused set
#: only when an operator changed it, never on a job's notification
CONTROL_CHANNEL = "xjobs_control"


def snapshot(row: Any) -> JobSnapshot:
    return JobSnapshot(
        id=row.id,
        name=row.name,
        queue=row.queue,
        state=known_state(row.id, row.state),  # SPEC DB-05: refused, never cast
        input=row.input,
        idempotency_key=row.idempotency_key,
        run_id=row.run_id,
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        priority=row.priority,
        run_at=row.run_at,
        visible_at=row.visible_at,
        claimed_by=row.claimed_by,
        lease_token=row.lease_token,
        last_error=row.last_error,
        stop_reason=row.stop_reason,
        result=row.result,
        tenant_id=row.tenant_id,
        enqueued_by=row.enqueued_by,
        traceparent=row.traceparent,
        created_at=row.created_at,
        updated_at=row.updated_at,
        lease_expiries=row.lease_expiries,
        errors=tuple(history.FailedAttempt.from_json(e) for e in row.errors),
        lapsed_holder=getattr(row, "lapsed_holder", None),  # a settle's RETURNING has none
        started_at=row.started_at,
        last_attempted_at=row.last_attempted_at,
        attempted_by=row.attempted_by,
        expires_at=row.expires_at,
        snoozes=row.snoozes,
        progress=_json(row.progress),
        batch_id=getattr(row, "batch_id", None),
        after=_ids(getattr(row, "after", None)),
        waiting_on=getattr(row, "waiting_on", None),
        after_failed=getattr(row, "after_failed", None),
        run_anyway=bool(getattr(row, "run_anyway", False)),
        dependants=_ids(getattr(row, "dependants", None)),
        version=getattr(row, "version", None),
        parked=bool(getattr(row, "parked", False)),
    )


def _ids(value: Any) -> tuple[UUID, ...] | None:
    return None if value is None else tuple(value)


def _json(value: object) -> Any:
    if not isinstance(value, str | bytes):
        return value
    try:
        return decode(value)
    except NotJSON as error:  # a row too deep to read is still shown, as the admin shows it
        return {"(undecodable)": error.reason}


class PostgresState:
    """The database alias and the cursor the driver's parts share."""

    #: the stores, built by ``PostgresDriver`` on the same alias
    _step_store: PostgresStepStore
    _lease_store: PostgresLeaseStore
    _event_store: PostgresEventStore
    _backfill_ledger: PostgresBackfillLedger
    _rollup_store: PostgresRollupStore
    _depth_store: PostgresDepthStore
    _batch_store: PostgresBatchStore
    _archive: PostgresArchive

    def __init__(self, using: str = "default") -> None:
        self.using = using
        self.database: str | None = using
        #: per queue, the last limit key this driver's limited claim took: the next walks on
        #: from it (limits.sql's limit_keys), so every key with work waiting gets its turn
        self._limit_cursor: dict[str, str] = {}

    # --- plumbing ---------------------------------------------------------------------------

    def _run(self, statement: str, params: Mapping[str, object]) -> list[tuple[Any, ...]]:
        return sql.fetch(self.using, STATEMENTS[statement], params)

    def _snapshots(self, statement: str, params: Mapping[str, object]) -> list[JobSnapshot]:
        with sql.execute(self.using, STATEMENTS[statement], params) as cursor:
            names = [column.name for column in cursor.description]
            rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
        for row in rows:
            row["input"], row["result"] = _json(row["input"]), _json(row["result"])
            row["errors"] = _json(row["errors"])
            row["progress"] = _json(row["progress"])
        return [snapshot(SimpleNamespace(**row)) for row in rows]

    def _count(self, statement: str, params: Mapping[str, object]) -> int:
        return sql.count(self.using, STATEMENTS[statement], params)
