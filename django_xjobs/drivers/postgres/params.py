"""How the PostgreSQL driver shapes enqueue requests into statement parameters."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..contract.requests import EnqueueRequest

if TYPE_CHECKING:
    pass


#: the fields of an enqueue request one call usually shares across its whole batch (one job,
#: one set of options): sent once, not as an array with the same value in every element
_SHARED = operator.attrgetter(
    "name",
    "queue",
    "max_attempts",
    "priority",
    "run_at",
    "delay",
    "tenant_id",
    "enqueued_by",
    "traceparent",
    "expires_at",
    "expires_in",
)


def shared_columns(requests: Sequence[EnqueueRequest]) -> dict[str, Any] | None:
    """The per-call columns of ``requests`` as single values when every request has the same
    ones (``enqueue_many`` on one job), else None (a relay's batch of many jobs)."""
    first = _SHARED(requests[0])
    if any(_SHARED(request) != first for request in requests):
        return None
    (
        name,
        queue,
        max_attempts,
        priority,
        run_at,
        delay,
        tenant_id,
        enqueued_by,
        traceparent,
        expires_at,
        expires_in,
    ) = first
    return {
        "expires_at": expires_at,
        "expires_in": expires_in,
        "name": name,
        "queue": queue,
        "max_attempts": max_attempts,
        "priority": priority,
        "run_at": run_at,
        "delay": delay or 0.0,
        "tenant": tenant_id,
        "enqueued_by": enqueued_by,
        "traceparent": traceparent,
    }


def request_columns(requests: Sequence[EnqueueRequest]) -> dict[str, Any]:
    """The columns of many enqueue requests, one array each in request order, as the multi-row
    statements (``enqueue_many``, the outbox's ``stage_many``) take them; the inputs go as one
    JSON array (a text array of JSON would be quoted element by element)."""
    return {
        "names": [r.name for r in requests],
        "queues": [r.queue for r in requests],
        "inputs": "[" + ",".join(r.input_json for r in requests) + "]",
        "keys": [r.idempotency_key for r in requests],
        "max_attempts": [r.max_attempts for r in requests],
        "priorities": [r.priority for r in requests],
        "run_ats": [r.run_at for r in requests],
        "delays": [r.delay or 0.0 for r in requests],
        "tenants": [r.tenant_id for r in requests],
        "enqueued_by": [r.enqueued_by for r in requests],
        "traceparents": [r.traceparent for r in requests],
        "expires_ats": [r.expires_at for r in requests],
        "expires_ins": [r.expires_in for r in requests],
    }
