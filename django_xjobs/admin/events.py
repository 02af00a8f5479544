"""Events in the admin (issue 43): each published event, who it was for, and what its publish
did — waiting runs released, jobs started and cancelled, declarations refused — as
``xjobs events`` shows them. View-only like every row the library writes: an event changes only
through its publish. The page needs ``view_jobevent``; its data shows its values only with the
payload permission, secret keys masked, as a job's input does (admin/permissions.py)."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from ..models import JobEvent
from .databases import OneDatabaseList
from .filters import DatabaseFilter
from .job import time_column_of
from .rows import ViewOnly
from .trace import payload_text


class JobEventAdmin(OneDatabaseList, ViewOnly):
    """Published events, newest first, kept until their ``ttl`` runs out (then swept). With jobs
    in several databases an event is stored in each, and each row says what the publish did
    there (the runs it released in that database; the jobs it started and cancelled, in the
    database it was published in), and one whose copy was not written yet is only where it was
    published: the list reads one database at a time, as the job list (SPEC SHARD-52)."""

    list_display = (
        "name",
        "tenant_id",
        "published_shown",
        "released",
        "started",
        "cancelled",
        "refused_count",
    )
    list_filter = (DatabaseFilter, "name", "tenant_id")  # by database: routed only
    search_fields = ("=id", "name", "correlation_key")
    ordering = ("-published_at", "-id")
    # the data is a payload: its values need view_job_payload, like a job's input; the
    # refusals are listed one to a line
    exclude = ("payload", "refused", "published_at", "expires_at")
    readonly_fields = (
        "id",
        "name",
        "tenant_id",
        "correlation_key",
        "published_shown",
        "expires_shown",
        "released",
        "started",
        "cancelled",
        "data",
        "refusals",
    )

    # to the second, in the one format every screen of the app uses (issue 42)
    published_shown = time_column_of(JobEvent, "published_at")
    expires_shown = time_column_of(JobEvent, "expires_at")

    @admin.display(description="refused")
    def refused_count(self, obj: JobEvent) -> int:
        """``on_event`` declarations the publish could not start."""
        return len(obj.refused or [])

    @admin.display(description="data")
    def data(self, obj: JobEvent) -> str:
        return format_html("<pre>{}</pre>", payload_text(obj.payload))

    @admin.display(description="refused declarations")
    def refusals(self, obj: JobEvent) -> str:
        entries = [r for r in obj.refused or [] if isinstance(r, dict)]
        if not entries:
            return "none"
        return format_html_join(
            "",
            "<div><code>{}</code> {}: {}</div>",
            ((r.get("job", ""), r.get("code", ""), r.get("message", "")) for r in entries),
        )
