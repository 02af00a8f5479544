"""Which declared backfills are still pending in this environment, read from the
``x_backfills`` ledger: what a deploy waits for (``xjobs_backfill --pending``, the
``X_BACKFILL_PENDING`` check). The operator's fuller view, each backfill with its latest pass and
a pass's section of ``inspect_job``, is ``django_xjobs.operations.backfills``.
"""

from __future__ import annotations

from .. import conf
from . import Backfill, ledger_or_none, registered_backfills


def pending_backfills() -> list[Backfill]:
    """The backfills declared for this environment with no completed pass in it, by name: what
    a deploy waits for (``xjobs_backfill --pending``). With no ledger nothing is recorded as
    completed, so every one is pending."""
    environment = conf.get().environment
    ledger = ledger_or_none()
    return [
        spec
        for spec in registered_backfills()
        if spec.runs_in(environment)
        and (ledger is None or ledger.completed(spec.name, environment) is None)
    ]
