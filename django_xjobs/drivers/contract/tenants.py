"""A tenant's rows counted and erased, a batch at a time (issue 46): every job of the tenant
with its steps, its stored events and its staged outbox rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class TenantRows:
    """How many rows of one tenant a store holds (``count``) or deleted (``erase``): its jobs
    (``running`` of them running), their steps, its events, its staged outbox rows and its
    fair-share limit key's row (``XJOBS["FAIR_SHARE"] = "tenant"``). A job moved to the history
    counts as a job (SPEC ERASE-04)."""

    jobs: int = 0
    running: int = 0
    steps: int = 0
    events: int = 0
    outbox: int = 0
    limit_keys: int = 0

    def __add__(self, other: TenantRows) -> TenantRows:
        return TenantRows(
            self.jobs + other.jobs,
            self.running + other.running,
            self.steps + other.steps,
            self.events + other.events,
            self.outbox + other.outbox,
            self.limit_keys + other.limit_keys,
        )

    @property
    def total(self) -> int:
        return self.jobs + self.steps + self.events + self.outbox + self.limit_keys


class TenantStore(Protocol):
    def count(self, tenant_id: str) -> TenantRows:
        """The tenant's rows; reads only."""

    def erase(self, tenant_id: str, *, batch: int, running: bool) -> TenantRows:
        """Delete up to ``batch`` of the tenant's jobs with all their steps (a running one only
        when ``running``), then up to ``batch`` of its events and of its outbox rows, in one
        transaction; what went (``running``: running jobs deleted). Rows a concurrent
        statement holds are skipped and left for the next batch."""
