"""Start a backfill's pass from the command line, or refuse with the reason it would not run
(SPEC §16): no such backfill, another environment's, its migration not applied, completed
already, or a pass already live. The pass checks its environment and the ledger again itself;
this gate says so before anything is enqueued, and is the only place ``requires`` is checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from .. import conf
from ..errors import (
    BackfillAppliedError,
    BackfillMigrationPendingError,
    BackfillRunningError,
    BackfillUnknownError,
)
from . import Backfill, declared_backfill, ledger_or_none, registered_backfills

#: who ``enqueued_by`` names on a pass this gate enqueued
ENQUEUED_BY = "manage.py xjobs_backfill"


@dataclass(frozen=True)
class Started:
    """A pass on the queue: enqueued now, or (``live``) one that already was."""

    backfill: str
    job_id: UUID
    force: bool
    live: bool = False


def start_backfill(name: str, *, force: bool = False, join_live: bool = False) -> Started:
    """Enqueue the pass of backfill ``name``; ``force`` runs a completed one again.

    Refused with ``X_BACKFILL_UNKNOWN``, ``X_BACKFILL_ENVIRONMENT``,
    ``X_BACKFILL_MIGRATION_PENDING``, ``X_BACKFILL_APPLIED`` (without ``force``) or
    ``X_BACKFILL_RUNNING`` (unless ``join_live``: then the live pass is returned)::

        start_backfill("orders.fill_currency").job_id  # UUID('0197a3c2-...')
    """
    declared = declared_backfill(name)
    if declared is None:
        known = [b.name for b in registered_backfills()]
        raise BackfillUnknownError(
            f"no backfill is declared under the name {name!r}",
            hint=f"declared here: {', '.join(known)}"
            if known
            else "no backfill is declared in this process (@backfill in an installed app's "
            "jobs.py)",
        )
    spec = declared.spec
    environment = conf.get().environment
    spec.check_environment(environment)
    check_requires(spec)
    ledger = ledger_or_none()
    done = None if ledger is None or force else ledger.completed(name, environment)
    if done is not None:
        when = f"{done.completed_at:%Y-%m-%d %H:%M}" if done.completed_at else "earlier"
        raise BackfillAppliedError(
            f"backfill {name!r} completed here on {when} ({done.rows_processed} rows, "
            f"job {done.job_id})",
            hint=f"python manage.py xjobs_backfill {name} --force runs it again",
        )
    handle = declared.handle
    # outbox=False: the id printed names a job at once, whatever transaction the caller holds
    result = handle.using(outbox=False, enqueued_by=ENQUEUED_BY).enqueue(force=force)
    if result.deduped and not join_live:
        raise BackfillRunningError(
            f"a pass of backfill {name!r} is already live: job {result.id}",
            hint=f"follow it with python manage.py xjobs show {result.id}, or stop it with "
            f"python manage.py xjobs cancel {result.id}",
            job_id=str(result.id),
        )
    return Started(backfill=name, job_id=result.id, force=force, live=bool(result.deduped))


def check_requires(spec: Backfill) -> None:
    """``X_BACKFILL_MIGRATION_PENDING`` unless the migration ``requires`` names is applied on
    the database the backfill's rows are read from."""
    if spec.requires is None:
        return
    from django.db import connections
    from django.db.migrations.recorder import MigrationRecorder

    alias = spec.source().db
    if spec.requires in MigrationRecorder(connections[alias]).applied_migrations():
        return
    label, migration = spec.requires
    raise BackfillMigrationPendingError(
        f"backfill {spec.name!r} requires migration {label}.{migration}, which is not applied "
        f"on database {alias!r}",
        hint=f"run: python manage.py migrate {label} --database {alias}",
    )
