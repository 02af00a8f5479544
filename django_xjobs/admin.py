"""Every job in the Django admin: why it stopped, its step timeline, and the operator actions.

Rows are read-only; retry and cancel go through ``django_xjobs.inspect``, the same path as
``manage.py xjobs`` and the tests.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from . import inspect
from .errors import XJobsError
from .models import Job


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "queue",
        "state",
        "attempt_of",
        "stop_reason",
        "run_at",
        "updated_at",
        "short_error",
    )
    list_filter = ("state", "queue", "stop_reason", "name")
    search_fields = ("=id", "name", "idempotency_key")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    actions = ("retry_selected", "cancel_selected")
    fieldsets = (
        (
            None,
            {"fields": ("id", "name", "queue", "state", "attempt_of", "stop_reason", "priority")},
        ),
        ("Why it stopped", {"fields": ("last_error",)}),
        ("Steps", {"fields": ("step_timeline",)}),
        ("Data", {"fields": ("pretty_input", "pretty_result", "idempotency_key", "run_id")}),
        (
            "Timing and lease",
            {
                "fields": (
                    "run_at",
                    "created_at",
                    "updated_at",
                    "visible_at",
                    "claimed_by",
                    "lease_expiries",
                )
            },
        ),
        ("Origin", {"fields": ("tenant_id", "enqueued_by", "traceparent")}),
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in Job._meta.fields] + [
            "attempt_of",
            "step_timeline",
            "pretty_input",
            "pretty_result",
        ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # --- columns and fields ----------------------------------------------------------------

    @admin.display(description="attempt")
    def attempt_of(self, obj: Job) -> str:
        return f"{obj.attempt} of {obj.max_attempts}"

    @admin.display(description="last error")
    def short_error(self, obj: Job) -> str:
        text = obj.last_error or ""
        return text if len(text) <= 80 else text[:77] + "..."

    @admin.display(description="input")
    def pretty_input(self, obj: Job) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.input, indent=2, ensure_ascii=False))

    @admin.display(description="result")
    def pretty_result(self, obj: Job) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.result, indent=2, ensure_ascii=False))

    @admin.display(description="step timeline")
    def step_timeline(self, obj: Job) -> str:
        trace = inspect.inspect_job(obj.pk)
        steps = trace["steps"] if trace else []
        if not steps:
            return "no steps recorded"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            (
                (
                    s["name"],
                    s["status"],
                    s["attempts"],
                    "-" if s["duration"] is None else f"{s['duration']:.3f}s",
                    s["wake_at"] or "-",
                    s["error"] or "-",
                    _preview(s.get("output")),
                )
                for s in steps
            ),
        )
        return format_html(
            "<table><thead><tr><th>step</th><th>status</th><th>attempts</th><th>took</th>"
            "<th>wakes</th><th>error</th><th>output</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )

    # --- actions ------------------------------------------------------------------------------

    @admin.action(description="Retry selected jobs (dead or failed)")
    def retry_selected(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._each(request, queryset, "queued again", lambda job: inspect.retry_job(job.pk))

    @admin.action(description="Cancel selected jobs")
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        reason = f"cancelled from the admin by {request.user}"
        self._each(request, queryset, "cancelled", lambda job: inspect.cancel_job(job.pk, reason))

    def _each(self, request: HttpRequest, queryset: QuerySet[Job], done: str, act: Any) -> None:
        for job in queryset:
            try:
                act(job)
            except XJobsError as error:
                self.message_user(request, f"{job.name} {job.pk}: {error}", messages.WARNING)
            else:
                self.message_user(request, f"{job.name} {job.pk}: {done}", messages.SUCCESS)


def _preview(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."
