"""A read-only view of every job. The operator actions (cancel, retry) arrive with the
operator API; until then the admin shows state, attempts, stop reason and the last error."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import Job


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("name", "queue", "state", "attempt_of", "stop_reason", "run_at", "updated_at")
    list_filter = ("state", "queue", "stop_reason")
    search_fields = ("id", "name", "idempotency_key", "last_error")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    readonly_fields = [f.name for f in Job._meta.fields]

    @admin.display(description="attempt")
    def attempt_of(self, obj: Job) -> str:
        return f"{obj.attempt} of {obj.max_attempts}"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
