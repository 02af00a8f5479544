"""The fleet's concurrency slots (``JobLease``) and the scheduler's watermarks
(``SchedulerState``), view-only."""

from __future__ import annotations

from datetime import datetime

from django.contrib import admin
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.db.models.functions import Now
from django.http import HttpRequest

from ..models import JobLease, SchedulerState
from .rows import ViewOnly


class LeaseLiveFilter(admin.SimpleListFilter):
    title = "live"
    parameter_name = "live"

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        return [("yes", "held"), ("no", "expired")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[JobLease]) -> QuerySet[JobLease]:
        if self.value() == "yes":
            return queryset.filter(expires_at__gt=Now())
        if self.value() == "no":
            return queryset.filter(expires_at__lte=Now())
        return queryset


class JobLeaseAdmin(ViewOnly):
    """Fleet concurrency slots (``job(concurrency=N)``): a live row is a run holding a slot; an
    expired one is free for the next claim to take over."""

    list_display = ("lease_key", "slot", "holder", "expires_at", "live")
    list_filter = (LeaseLiveFilter, "lease_key")
    search_fields = ("lease_key", "holder")
    ordering = ("lease_key", "slot")

    def get_queryset(self, request: HttpRequest) -> QuerySet[JobLease]:
        alive = ExpressionWrapper(Q(expires_at__gt=Now()), output_field=BooleanField())
        rows: QuerySet[JobLease] = super().get_queryset(request).annotate(is_live=alive)
        return rows

    @admin.display(description="live", boolean=True, ordering="is_live")
    def live(self, obj: JobLease) -> bool:
        return bool(getattr(obj, "is_live", False))


class SchedulerStateAdmin(ViewOnly):
    """Each cron's durable watermark: the last occurrence the scheduler fired."""

    list_display = ("task_name", "last_fired", "watermark", "updated_at", "declared")
    search_fields = ("task_name",)
    ordering = ("task_name",)

    @admin.display(description="declared in code", boolean=True)
    def declared(self, obj: SchedulerState) -> bool:
        from ..declarations.cron import registered_crons

        return obj.task_name in {c.name for c in registered_crons()}

    @admin.display(description="last fired", ordering="last_fired_at")
    def last_fired(self, obj: SchedulerState) -> datetime | str | None:
        """What the Crons page says: an armed watermark is a time still ahead, not a firing
        (issue 23); the raw watermark stays in its own column."""
        from ..declarations.cron import registered_crons
        from ..scheduler.role import last_fired

        handle = next((c for c in registered_crons() if c.name == obj.task_name), None)
        if handle is None:
            return obj.last_fired_at  # no longer declared: only the mark is known
        return last_fired(handle, obj.last_fired_at) or "never"

    @admin.display(description="watermark", ordering="last_fired_at")
    def watermark(self, obj: SchedulerState) -> datetime | None:
        """The stored mark the next round fires after (SPEC SCHED-01)."""
        return obj.last_fired_at
