"""The table the backfill workload (W4) sweeps."""

from __future__ import annotations

from django.db import models


class UnchangedQuerySet(models.QuerySet):
    """The rows of the no-op backfill: its handler changes none of them, so none is ever left to
    do. ``count()`` says so; the pass's stall check (BF-06) would otherwise end it with
    X_BACKFILL_STALLED after its last page."""

    def count(self) -> int:
        return 0


class Row(models.Model):
    """A row with a column to fill: ``value`` is NULL until the bulk_update backfill sets it."""

    value = models.BigIntegerField(null=True)

    objects = models.Manager()
    unchanged = UnchangedQuerySet.as_manager()

    def __str__(self) -> str:
        return f"row {self.pk}"
