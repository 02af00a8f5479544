"""What an outbox store does, and the row it hands the relay (SPEC §9)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from ..drivers.base import EnqueueRequest


@dataclass(frozen=True)
class OutboxRow:
    """A staged enqueue (SPEC OUTBOX-02), as a claim returns it."""

    id: UUID
    job: str
    queue: str
    input: Any
    idempotency_key: str
    max_attempts: int
    priority: int
    run_at: datetime
    staged_at: datetime
    tenant_id: str | None = None
    traceparent: str | None = None
    enqueued_by: str | None = None
    claimed_by: str | None = None

    def request(self) -> EnqueueRequest:
        """The direct enqueue this row stands for."""
        import json

        return EnqueueRequest(
            name=self.job,
            queue=self.queue,
            input=self.input,
            input_json=json.dumps(self.input, separators=(",", ":")),
            idempotency_key=self.idempotency_key,
            max_attempts=self.max_attempts,
            priority=self.priority,
            run_at=self.run_at,
            tenant_id=self.tenant_id,
            enqueued_by=self.enqueued_by,
            traceparent=self.traceparent,
        )


class OutboxStore(Protocol):
    claim_lease: float

    def stage(self, request: EnqueueRequest) -> UUID: ...

    def claim(self, limit: int, token: str) -> list[OutboxRow]: ...

    def claim_ids(self, ids: Sequence[UUID], token: str) -> list[OutboxRow]: ...

    def release(self, ids: Sequence[UUID], token: str) -> int: ...

    def mark_published(self, row_id: UUID, token: str) -> bool: ...

    def pending(self) -> tuple[int, float]:
        """(unpublished rows, age in seconds of the oldest)."""

    def prune(self, retention: float) -> int: ...
