"""The transactional outbox in the admin: staged rows by status (pending, quarantined,
published), their input as the viewer may see it, and the retry and discard actions on
quarantined rows (issue 24), with each database's backlog above the list."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html

from .. import operations
from ..durations import format_span
from ..errors import XJobsError
from ..models import OutboxEntry
from .rows import ViewOnly
from .trace import key_text, payload_text


class OutboxStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        return [
            ("pending", "pending (not published yet)"),
            ("quarantined", "quarantined (refused: retry or discard)"),
            ("published", "published"),
        ]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[OutboxEntry]
    ) -> QuerySet[OutboxEntry]:
        if self.value() == "pending":
            return queryset.filter(published_at__isnull=True, quarantined_at__isnull=True)
        if self.value() == "quarantined":
            return queryset.filter(published_at__isnull=True, quarantined_at__isnull=False)
        if self.value() == "published":
            return queryset.filter(published_at__isnull=False)
        return queryset


class OutboxEntryAdmin(ViewOnly):
    """The transactional outbox: rows staged inside ``atomic()`` until the relay publishes them
    as jobs; published rows stay for ``OUTBOX_RETENTION`` as an audit trail."""

    change_list_template = "django_xjobs/admin/outbox_change_list.html"
    list_display = (
        "job",
        "queue",
        "status",
        "staged_at",
        "age",
        "claimed_by",
        "claimed_at",
        "published_at",
        "error_code",
    )
    list_filter = (OutboxStatusFilter, "queue", "job")
    search_fields = ("=id", "job", "idempotency_key")
    ordering = ("-staged_at",)
    actions = ["retry_quarantined", "discard_quarantined"]

    # the staged input is a payload: its values need view_job_payload, like a job's, and so
    # does the key made from it
    exclude = ("input", "idempotency_key")
    readonly_fields = ("staged_input", "staged_key")

    @admin.display(description="input")
    def staged_input(self, obj: OutboxEntry) -> str:
        return format_html("<pre>{}</pre>", payload_text(obj.input))

    @admin.display(description="idempotency key")
    def staged_key(self, obj: OutboxEntry) -> str:
        return key_text(obj.job, obj.idempotency_key)

    @admin.display(description="status")
    def status(self, obj: OutboxEntry) -> str:
        if obj.published_at is not None:
            return "published"
        if obj.quarantined_at is not None:
            return "quarantined"
        return "claimed" if obj.claimed_by else "pending"

    # A quarantined row waits for an operator (issue 24): retry needs the change permission on
    # outbox entries, discard the delete permission (the admin's own edit and delete stay off:
    # only the library writes these rows).

    def has_retry_quarantined_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("django_xjobs.change_outboxentry"))

    def has_discard_quarantined_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("django_xjobs.delete_outboxentry"))

    @admin.action(
        description="Retry selected quarantined rows (after fixing)",
        permissions=["retry_quarantined"],
    )
    def retry_quarantined(self, request: HttpRequest, queryset: QuerySet[OutboxEntry]) -> None:
        self._outbox_act(request, queryset, "retry", operations.retry_outbox_entry)

    @admin.action(
        description="Discard selected quarantined rows", permissions=["discard_quarantined"]
    )
    def discard_quarantined(self, request: HttpRequest, queryset: QuerySet[OutboxEntry]) -> None:
        self._outbox_act(request, queryset, "discard", operations.discard_outbox_entry)

    def _outbox_act(
        self, request: HttpRequest, queryset: QuerySet[OutboxEntry], verb: str, act: Any
    ) -> None:
        for entry in queryset:
            try:
                act(entry.pk)
            except XJobsError as error:
                self.message_user(
                    request,
                    f"Could not {verb} {entry.job} {entry.pk}: {error.code}: {error.message}",
                    messages.WARNING,
                )
            else:
                self.log_change(request, entry, f"{verb.capitalize()} from the admin.")
                self.message_user(request, f"{verb}: {entry.job} {entry.pk}", messages.SUCCESS)

    @admin.display(description="age", ordering="staged_at")
    def age(self, obj: OutboxEntry) -> str:
        """How long an unpublished row has waited; a published one has no age."""
        if obj.published_at is not None:
            return "-"
        return format_span((timezone.now() - obj.staged_at).total_seconds())

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, object] | None = None
    ) -> HttpResponse:
        outbox = operations.inspect_outbox()
        databases = [
            (alias, d["pending"], format_span(d["oldest_pending_seconds"]), d["quarantined"])
            for alias, d in outbox["databases"].items()
        ]
        return super().changelist_view(
            request, {"outbox_databases": databases, **(extra_context or {})}
        )
