"""Erasing a tenant's data (issue 46): every job of the tenant with all its steps, its stored
events and its staged outbox rows, deleted a batch at a time and recorded in the audit trail.

    erase_tenant("acme", by="ops:alice")   # TenantErasure(jobs=..., steps=..., ...)

A running job is the one a worker is writing to: erasing it under the worker would race its
settle, so it is refused (``X_TENANT_RUNNING``, nothing erased) unless ``force`` — then it is
deleted too, and every later write of that run is refused by its fence (the row is gone), as a
lost lease's is. Jobs that are ready, delayed or suspended never start again once erased.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..drivers import get_driver
from ..drivers.contract import TenantRows
from ..errors import InvariantError, TenantRunningError
from ..text import check_label, check_name
from . import audit
from .answers import Answer

DEFAULT_BATCH = 1000
MAX_BATCH = 10_000


@dataclass(frozen=True, eq=False)
class TenantErasure(Answer):
    """What ``erase_tenant`` deleted (or, with ``dry_run``, holds): the tenant's ``jobs``
    (``running`` of them running), their ``steps``, its ``events`` and ``outbox`` rows, in
    ``batches`` statements."""

    tenant_id: str
    dry_run: bool
    jobs: int
    running: int
    steps: int
    events: int
    outbox: int
    batches: int
    #: the tenant's fair-share limit key row (x_limit_keys), 0 or 1 (SPEC ERASE-05)
    limit_keys: int = 0


def erase_tenant(
    tenant_id: str,
    *,
    by: str | None = None,
    dry_run: bool = False,
    force: bool = False,
    batch: int = DEFAULT_BATCH,
) -> TenantErasure:
    """Delete every row the jobs database holds for ``tenant_id`` (SPEC ERASE-01): its jobs in
    every state with every step of their runs, its events and its staged outbox rows,
    ``batch`` of each per statement. ``dry_run`` counts and changes nothing."""
    if not isinstance(tenant_id, str) or not tenant_id:
        raise InvariantError(f"tenant_id={tenant_id!r} must be a non-empty string")
    check_name(tenant_id, "tenant_id")
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise InvariantError(f"batch={batch!r} must be an integer from 1 to {MAX_BATCH:,}")
    if by is not None and not isinstance(by, str):
        raise InvariantError(f"by={by!r} must be a string or None", hint='e.g. "ops:alice"')
    check_label(by, "by")
    store = get_driver().jobs().tenants()
    held = store.count(tenant_id)
    if held.running and not force and not dry_run:
        raise TenantRunningError(
            f"tenant {tenant_id!r} has {held.running} running job(s); nothing was erased"
        )
    if dry_run:
        return _answer(tenant_id, True, held, 0)
    gone, batches = TenantRows(), 0
    while True:
        done = store.erase(tenant_id, batch=batch, running=force)
        if not done.total:
            break
        gone, batches = gone + done, batches + 1
    audit.record(  # SPEC AUDIT-01
        "erase_tenant",
        by=by,
        target=tenant_id,
        counts=(held.total, gone.total, max(0, held.total - gone.total)),
    )
    return _answer(tenant_id, False, gone, batches)


def _answer(tenant_id: str, dry_run: bool, rows: TenantRows, batches: int) -> TenantErasure:
    return TenantErasure(
        tenant_id,
        dry_run,
        rows.jobs,
        rows.running,
        rows.steps,
        rows.events,
        rows.outbox,
        batches,
        rows.limit_keys,
    )
