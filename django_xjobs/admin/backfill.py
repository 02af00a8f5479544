"""The backfill ledger in the admin: each pass's progress, its job, and the other passes of its
name (``BackfillAdmin`` puts these columns on the rows, view-only like the other rows
the library writes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from .. import conf
from ..backfills import get_backfill
from ..durations import format_span
from ..models import Backfill
from .pages import admin_url
from .rows import ViewOnly

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic to the type checker only
    _ModelAdmin = admin.ModelAdmin

#: passes of one name the detail page lists
HISTORY = 20


class BackfillColumns(_ModelAdmin):
    """Every pass in ``x_backfills``: the list reads only the rows (no count per row); a pass's
    page adds the rows its backfill still matches, the time left and its name's history."""

    list_display = (
        "name",
        "status",
        "environment",
        "rows_processed",
        "pages",
        "started_at",
        "completed_at",
        "progress",
        "job_link",
    )
    list_filter = ("status", "name", "environment")
    search_fields = ("name", "=run_id", "=job_id")
    ordering = ("-started_at", "-run_id")
    fieldsets = (
        (None, {"fields": ("name", "status", "environment", "progress_detail", "job_link")}),
        ("Why it stopped", {"fields": ("error",)}),
        (
            "The pass",
            {
                "fields": (
                    "rows_processed",
                    "pages",
                    "last_cursor",
                    "started_at",
                    "completed_at",
                    "run_id",
                    "checksum",
                    "app_version",
                )
            },
        ),
        ("Declaration", {"fields": ("declaration",)}),
        ("Passes of this backfill", {"fields": ("history",)}),
    )
    readonly_fields = ("progress_detail", "job_link", "declaration", "history")

    @admin.display(description="progress")
    def progress(self, obj: Backfill) -> str:
        """How the pass went, from its row alone: the pace while it runs, the time it took."""
        took = ((obj.completed_at or timezone.now()) - obj.started_at).total_seconds()
        if obj.status == "running":
            rate = obj.rows_processed / took if took > 0 else 0.0
            return f"{rate:,.0f} rows/s for {format_span(took)}"
        if obj.status == "completed":
            return f"done in {format_span(took)}"
        return f"stopped after {format_span(took)}"

    @admin.display(description="progress")
    def progress_detail(self, obj: Backfill) -> str:
        """A running pass's rows against what its backfill still matches (one count), and the
        time left at its pace so far."""
        text = self.progress(obj)
        spec = get_backfill(obj.name)
        if obj.status != "running" or spec is None:
            return text
        left = spec.remaining()
        total = obj.rows_processed + left
        took = (timezone.now() - obj.started_at).total_seconds()
        rate = obj.rows_processed / took if took > 0 else 0.0
        eta = f", about {format_span(left / rate)} left" if rate > 0 else ""
        return f"{obj.rows_processed:,} of about {total:,} rows; {text}{eta}"

    @admin.display(description="job")
    def job_link(self, obj: Backfill) -> str:
        if obj.job_id is None:
            return "-"
        url = admin_url(self.admin_site, "django_xjobs_job_change", obj.job_id)
        return format_html('<a href="{}">{}</a>', url, obj.job_id)

    @admin.display(description="declaration")
    def declaration(self, obj: Backfill) -> str:
        spec = get_backfill(obj.name)
        if spec is None:
            return "not declared in this process (renamed or removed?)"
        changed = "" if spec.checksum == obj.checksum else " — changed since this pass"
        return (
            f"batch {spec.batch}, rate {spec.rate:g} pages/s, environments "
            f"{', '.join(spec.environments or ['any'])}, requires "
            f"{'.'.join(spec.requires) if spec.requires else '-'}, checksum {spec.checksum}"
            f"{changed}"
        )

    @admin.display(description="history")
    def history(self, obj: Backfill) -> str:
        """The passes of this backfill, newest first, this one marked."""
        rows = (
            Backfill.objects.using(conf.get().database)
            .filter(name=obj.name)
            .order_by("-started_at", "-run_id")[:HISTORY]
        )
        cells = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
            "</tr>",
            (
                (
                    "this pass"
                    if row.pk == obj.pk
                    else format_html(
                        '<a href="{}">{}</a>',
                        admin_url(self.admin_site, "django_xjobs_backfill_change", row.pk),
                        row.started_at,
                    ),
                    row.status,
                    row.environment or "-",
                    f"{row.rows_processed:,}",
                    row.pages,
                    row.completed_at or "-",
                    (row.error or "-").splitlines()[0],
                )
                for row in rows
            ),
        )
        return format_html(
            "<table><thead><tr><th>started</th><th>status</th><th>environment</th><th>rows</th>"
            "<th>pages</th><th>ended</th><th>error</th></tr></thead><tbody>{}</tbody></table>",
            cells,
        )


class BackfillAdmin(BackfillColumns, ViewOnly):
    """Backfill passes, from the ``x_backfills`` ledger: written by the passes only."""
