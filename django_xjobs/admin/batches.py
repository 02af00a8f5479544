"""Batches in the admin (issue 32): each batch's counts, its callbacks and its members, linked
to their job pages. View-only like every row the library writes: a batch changes only through
its members' settles. The page needs ``view_jobbatch``; its input shows its values only with
the payload permission (admin_permissions.py)."""

from __future__ import annotations

import contextvars
import json
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from .. import redact
from ..declarations.workflows import batch_state
from ..models import Job, JobBatch, JobHistory
from ..states import shown_state
from .databases import OneDatabaseList
from .filters import DatabaseFilter
from .job import badge
from .pages import admin_url
from .permissions import VIEWER as job_viewer  # the job page's request (set by its view)
from .permissions import has_permission, sees_payloads
from .rows import LibraryRows

#: members the batch page lists
MEMBERS = 200

_viewer: contextvars.ContextVar[HttpRequest | None] = contextvars.ContextVar(
    "xjobs_batch_viewer", default=None
)


@admin.display(description="batch")
def batch_link(model_admin: Any, obj: Job) -> str:
    """A job page's lineage (``JobAdmin``): the batch it is a member of, linked for who may
    view batches."""
    if obj.batch_id is None:
        return "-"
    request = job_viewer.get()
    batches = model_admin.admin_site._registry.get(JobBatch)
    if request is None or batches is None or not has_permission(batches, request, "view"):
        return str(obj.batch_id)
    url = admin_url(model_admin.admin_site, "django_xjobs_jobbatch_change", obj.batch_id)
    return format_html('<a href="{}">{}</a>', url, obj.batch_id)


class JobBatchAdmin(OneDatabaseList, LibraryRows):
    """A batch lives with its jobs (issue 48): with jobs in several databases the list reads one
    at a time, and a batch's page, opened from a member's, reads the database that holds it,
    its callbacks and members there (SPEC SHARD-50, SHARD-51)."""

    list_display = (
        "id",
        "state",
        "total",
        "pending",
        "done",
        "dead",
        "failed",
        "cancelled",
        "created_at",
        "completed_at",
    )
    list_filter = (
        DatabaseFilter,  # shown with jobs in several databases only (SPEC SHARD-50)
        ("completed_at", admin.EmptyFieldListFilter),
    )
    search_fields = ("=id",)
    ordering = ("-created_at", "-id")
    readonly_fields = (
        "id",
        "state",
        "total",
        "pending",
        "done",
        "dead",
        "failed",
        "cancelled",
        "created_at",
        "closed_at",
        "completed_at",
        "input_shown",
        "callback_jobs",
        "member_jobs",
    )
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, object] | None = None,
    ) -> HttpResponse:
        # the fields read who is looking (the input's values, the links): per request, not on
        # this admin, which every request's thread shares
        token = _viewer.set(request)
        try:
            response = super().change_view(request, object_id, form_url, extra_context)
            if hasattr(response, "render"):
                response.render()
            return response
        finally:
            _viewer.reset(token)

    @admin.display(description="state")
    def state(self, obj: JobBatch) -> str:
        return batch_state(obj)

    @admin.display(description="input")
    def input_shown(self, obj: JobBatch) -> str:
        if sees_payloads(_viewer.get()):
            return json.dumps(redact.mask(obj.input), indent=2)
        return json.dumps(sorted(obj.input), indent=2) + "  (keys only: no payload permission)"

    @admin.display(description="callbacks")
    def callback_jobs(self, obj: JobBatch) -> str:
        if not obj.callbacks:
            return "none"
        ids = [c["id"] for c in obj.callbacks]
        database = obj._state.db  # the batch's database holds its callbacks (SPEC SHARD-51)
        queued = {  # HIST-11: a callback that ran and moved to the history was queued too
            *Job.objects.using(database).filter(id__in=ids).values_list("id", flat=True),
            *JobHistory.objects.using(database).filter(id__in=ids).values_list("id", flat=True),
        }
        return format_html_join(
            "",
            "<div>on {}: {}</div>",
            ((c["kind"], self._job_link(c["id"], c["name"], queued)) for c in obj.callbacks),
        )

    @admin.display(description="members")
    def member_jobs(self, obj: JobBatch) -> str:
        columns = ("id", "name", "state", "run_at")
        live, moved = Job.objects.using(obj._state.db), JobHistory.objects.using(obj._state.db)
        rows = [  # HIST-11: the members moved to the history too, in the order they joined
            *live.filter(batch_id=obj.id).order_by("id").values_list(*columns)[:MEMBERS],
            *moved.filter(batch_id=obj.id).order_by("id").values_list(*columns)[:MEMBERS],
        ]
        now = timezone.now()
        # the state word every screen shows: a waiting member is ready or delayed (issue 42)
        links = [
            (self._job_link(str(job_id), name, None), badge(shown_state(state, run_at, now)))
            for job_id, name, state, run_at in sorted(rows)[:MEMBERS]
        ]
        if not links:
            return "none"
        return format_html_join("", "<div>{} {}</div>", links)

    def _job_link(self, job_id: str, name: str, queued: set[Any] | None) -> str:
        if queued is not None and not any(str(q) == job_id for q in queued):
            return format_html("{} {} (not queued yet)", name, job_id)
        request = _viewer.get()
        if request is None or not has_permission(self.admin_site._registry[Job], request, "view"):
            return format_html("{} {}", name, job_id)
        url = admin_url(self.admin_site, "django_xjobs_job_change", job_id)
        return format_html('<a href="{}">{} {}</a>', url, name, job_id)
