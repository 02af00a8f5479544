"""The finished jobs' history (``JobHistory``, issue 46): the jobs ``XJOBS["HISTORY"]`` moved out
of x_jobs, newest finished first, read-only, filtered by state and queue. Its payloads show as
the job page shows them (values only with ``view_job_payload``); "Retry selected" brings a dead
or failed job back to the live table through ``retry_job``, for a user holding ``change_job``.
The job page of a moved job's id sends here (admin/jobs.py)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from .. import operations
from ..errors import XJobsError
from ..models import JobHistory
from .rows import ViewOnly
from .trace import key_text, payload_text


class JobHistoryAdmin(ViewOnly):
    """SPEC HIST-08: seen with ``view_jobhistory``; nothing is added, changed or deleted."""

    list_display = ("id", "name", "queue", "state", "stop_reason", "attempt", "finished_at")
    list_filter = ("state", "queue")
    search_fields = ("name", "=idempotency_key", "=tenant_id")
    ordering = ("-finished_at",)
    date_hierarchy = "finished_at"
    exclude = ("input", "result", "errors", "progress", "idempotency_key")
    readonly_fields = ("pretty_input", "pretty_result", "key_shown")
    actions = ("retry_selected",)

    @admin.display(description="input")
    def pretty_input(self, obj: JobHistory) -> str:
        return format_html("<pre>{}</pre>", payload_text(obj.input))

    @admin.display(description="result")
    def pretty_result(self, obj: JobHistory) -> str:
        return format_html("<pre>{}</pre>", payload_text(obj.result))

    @admin.display(description="idempotency key")
    def key_shown(self, obj: JobHistory) -> str:
        return key_text(obj.name, obj.idempotency_key)

    def has_retry_permission(self, request: HttpRequest) -> bool:
        """The job list's own permission to retry (``change_job``)."""
        return request.user.has_perm("django_xjobs.change_job")

    @admin.action(description="Retry selected jobs (back to the live jobs)", permissions=["retry"])
    def retry_selected(self, request: HttpRequest, queryset: QuerySet[JobHistory]) -> None:
        """SPEC HIST-05: each through ``retry_job``, as the job list's action; one message."""
        by, went, refused = f"admin:{request.user}", 0, []
        for job in queryset:
            try:
                operations.retry_job(job.pk, by=by)
            except XJobsError as error:
                refused.append(f"{job.name} {job.pk}: {error.code}")
            else:
                went += 1
        text = f"Queued again {went} of {went + len(refused)} selected job(s)"
        if refused:
            text += ". Could not retry: " + "; ".join(refused)
        self.message_user(request, text, messages.WARNING if refused else messages.SUCCESS)
