"""The tables (SPEC §14 + DESIGN §4). The hot path writes them with raw SQL in
``drivers/postgres/jobs.sql``; the ORM serves the admin, reads and tests.

A module per concern, every name re-exported here (``django_xjobs.models.<Name>``): ``jobs``
(a job, its states, step records, events and batches), ``fleet`` (workers, slots, the
scheduler, an operator's standing orders, limit keys), ``records`` (the outbox, the backfills'
ledger, the overview's figures, the operators' audit trail) and ``fields`` (the two field classes and the GIN index class).
"""

from __future__ import annotations

from .fields import PgArrayField, StoredJSONField
from .fleet import (
    CronControl,
    JobControl,
    JobLease,
    LimitKey,
    QueueControl,
    SchedulerLeader,
    SchedulerState,
    Worker,
)
from .jobs import (
    CLAIMABLE,
    FINISHED,
    LIVE,
    NOT_CLAIMABLE,
    NOT_RUNNING,
    Job,
    JobBatch,
    JobEvent,
    JobHistory,
    JobState,
    JobStep,
    Overview,
    StopReason,
    state_filter,
)
from .records import Backfill, JobRollup, OperatorAction, OutboxEntry, QueueDepth

__all__ = [
    "CLAIMABLE",
    "FINISHED",
    "LIVE",
    "NOT_CLAIMABLE",
    "NOT_RUNNING",
    "Backfill",
    "CronControl",
    "Job",
    "JobBatch",
    "JobControl",
    "JobEvent",
    "JobHistory",
    "JobLease",
    "JobRollup",
    "JobState",
    "JobStep",
    "LimitKey",
    "OperatorAction",
    "OutboxEntry",
    "Overview",
    "PgArrayField",
    "QueueControl",
    "QueueDepth",
    "SchedulerLeader",
    "SchedulerState",
    "StopReason",
    "StoredJSONField",
    "Worker",
    "state_filter",
]
