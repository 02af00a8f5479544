"""The operators' audit trail (``OperatorAction``, issue 45): who retried, cancelled, paused or
deleted what, when, on which job or filter, why, and what it changed. Read-only: seen with its
own ``view_operatoraction`` permission (the model has no other), never added, changed or
deleted from the admin; kept for ``XJOBS["AUDIT_RETENTION"]``."""

from __future__ import annotations

import json

from django.contrib import admin

from ..models import OperatorAction
from .rows import ViewOnly


class OperatorActionAdmin(ViewOnly):
    """Newest first, filtered by verb, searched by actor, job id or target (SPEC AUDIT-05); a
    bulk action done in the background shows its progress (SPEC BULK-15)."""

    list_display = (
        "at",
        "actor",
        "verb",
        "acted_on",
        "reason",
        "matched",
        "changed",
        "skipped",
        "progress",
    )
    list_filter = ("verb", "status")
    search_fields = ("actor", "job_id", "target", "reason")
    ordering = ("-at", "-id")
    date_hierarchy = "at"

    @admin.display(description="on")
    def acted_on(self, obj: OperatorAction) -> str:
        """The job, the target (a queue, cron, batch or outbox row) or the bulk filter."""
        if obj.job_id:
            return obj.job_id
        if obj.filter is not None:
            return json.dumps(obj.filter, sort_keys=True)
        return obj.target or "-"

    @admin.display(description="progress")
    def progress(self, obj: OperatorAction) -> str:
        """A bulk action a background job does (SPEC BULK-15): where it is, and how far of the
        count asked about; "-" for an action done at once."""
        if obj.status is None:
            return "-"
        done = f"{obj.matched or 0:,} of {obj.expected or 0:,} matched"
        counts = f"{done}, {obj.changed or 0:,} changed, {obj.skipped or 0:,} skipped"
        if obj.status == "failed":
            return f"failed at {counts}: {obj.error or 'no error recorded'}"
        return f"{obj.status}: {counts}"
