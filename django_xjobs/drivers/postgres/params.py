"""How the PostgreSQL driver shapes enqueue requests into statement parameters."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ...ids import uuid7, uuid7_many
from ...limits.keys import key_of, keyless
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


def _row_params(request: EnqueueRequest, job_id: UUID) -> dict[str, Any]:
    """The parameters of one enqueued row, as ``enqueue`` and ``enqueue_after`` insert it."""
    return {
        "id": job_id,
        "run_id": uuid7(),
        "name": request.name,
        "queue": request.queue,
        "input": request.input_json,
        "idempotency_key": request.idempotency_key,
        "max_attempts": request.max_attempts,
        "priority": request.priority,
        "run_at": request.run_at,
        "delay": request.delay or 0.0,
        "tenant_id": request.tenant_id,
        "enqueued_by": request.enqueued_by,
        "traceparent": request.traceparent,
        "expires_at": request.expires_at,
        "expires_in": request.expires_in,
        "limit_key": key_of(request.name, request.input, request.tenant_id),
    }


def _many_params(requests: Sequence[EnqueueRequest], ids: list[UUID]) -> tuple[str, dict[str, Any]]:
    """The statement for ``requests`` and its parameters: what varies by row as one array per
    column in request order; the per-call columns once when the whole batch shares them (the
    arrays of the same value cost more to send and unpack than the insert of their rows)."""
    keys = {"ids": ids, "run_ids": uuid7_many(len(ids))}
    # no run of the batch has a limit key: null, which unnest pads, instead of an array of nulls
    limit_keys: list[str | None] | None = None
    if not all(keyless(name) for name in {r.name for r in requests}):
        limit_keys = [key_of(r.name, r.input, r.tenant_id) for r in requests]
        if not any(limit_keys):
            limit_keys = None
    shared = shared_columns(requests)
    if shared is None:
        return "enqueue_many", {**keys, **request_columns(requests), "limit_keys": limit_keys}
    by_row = {
        "keys": [r.idempotency_key for r in requests],
        "limit_keys": limit_keys,
        "inputs": "[" + ",".join(r.input_json for r in requests) + "]",
    }
    return "enqueue_many_shared", {**keys, **by_row, **shared}
