"""The finished jobs' history (``JobHistory``, issue 46): the jobs ``XJOBS["HISTORY"]`` moved out
of x_jobs, newest finished first, read-only, filtered by state and queue. Its payloads show as
the job page shows them (values only with ``view_job_payload``); "Retry selected" brings a dead
or failed job back to the live table through ``retry_job``, for a user holding ``change_job``.
The job page of a moved job's id sends here (admin/jobs.py)."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from .. import conf, operations
from ..drivers.contract import JobFilter
from ..errors import XJobsError
from ..models import JobHistory
from ..states import FINISHED_STATES
from .databases import OneDatabaseList
from .filters import DATABASE_PARAM, DatabaseFilter, ErrorCodeFilter, InputFilter
from .pages import admin_url
from .rows import ViewOnly
from .trace import key_text, payload_text

#: the moved jobs the job list counts at most, as its dead letters (SPEC BULK-22): past it the
#: note says "10,000+"
MOVED_SHOWN = 10_000


class JobHistoryAdmin(OneDatabaseList, ViewOnly):
    """SPEC HIST-08: seen with ``view_jobhistory``; nothing is added, changed or deleted. With
    jobs in several databases each keeps the history of its own jobs: the list reads one at a
    time, and a moved job's page opens in the database that holds it (SPEC SHARD-50, SHARD-51)."""

    list_display = ("id", "name", "queue", "state", "stop_reason", "attempt", "finished_at")
    list_filter = (
        DatabaseFilter,  # shown with jobs in several databases only (SPEC SHARD-50)
        "state",
        "queue",
        "name",
        "stop_reason",
        InputFilter,
        ErrorCodeFilter,
    )
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


def moved_matching(where: JobFilter, database: str) -> QuerySet[JobHistory]:
    """HIST-14: the moved jobs ``where`` admits, as the bulk verbs' filter admits them."""
    rows = JobHistory.objects.using(database).all()
    if where.state:
        rows = rows.filter(state__in=[s for s in where.state if s in FINISHED_STATES])
    for name in ("queue", "name", "tenant_id", "stop_reason"):
        value = getattr(where, name)
        if value is not None:
            rows = rows.filter(**{name: value})
    if where.error_code is not None:
        code = where.error_code
        rows = rows.filter(Q(last_error=code) | Q(last_error__startswith=f"{code}:"))
    for field, low, high in (
        ("created_at", where.created_after, where.created_before),
        ("updated_at", where.updated_after, where.updated_before),
    ):
        if low is not None:
            rows = rows.filter(**{f"{field}__gte": low})
        if high is not None:
            rows = rows.filter(**{f"{field}__lt": high})
    if where.input is not None:
        rows = rows.filter(input__contains=dict(where.input))
    if where.ids:
        rows = rows.filter(id__in=where.ids)
    return rows


def moved_note(
    site: admin.AdminSite, request: HttpRequest, where: JobFilter, database: str | None = None
) -> dict[str, str]:
    """What the job list says of the jobs its filter admits that moved to the history (HIST-14):
    how many (up to ``MOVED_SHOWN``) and the history's list narrowed the same way; empty for
    none, or for a user who may not view the history. With jobs in several databases, those of
    ``database``, the one the list reads, linked to that database's history (SPEC SHARD-50)."""
    if not request.user.has_perm("django_xjobs.view_jobhistory"):
        return {}
    rows = moved_matching(where, database or conf.get().database)
    count = rows.order_by().values("pk")[: MOVED_SHOWN + 1].count()  # unsorted: any 10,001
    if not count:
        return {}
    query: dict[str, str] = {} if database is None else {DATABASE_PARAM: database}
    shown = [s for s in where.state if s in FINISHED_STATES]
    if len(shown) == 1:
        query["state__exact"] = shown[0]
    for name in ("queue", "name", "stop_reason", "tenant_id"):
        value = getattr(where, name)
        if value is not None:
            query[f"{name}__exact"] = value
    if where.input is not None:
        query["input"] = json.dumps(dict(where.input))
    if where.error_code is not None:
        query["error_code"] = where.error_code
    if where.created_after is not None:
        query["created_at__gte"] = where.created_after.isoformat()
    if where.created_before is not None:
        query["created_at__lt"] = where.created_before.isoformat()
    url = admin_url(site, "django_xjobs_jobhistory_changelist")
    return {
        "count": f"{MOVED_SHOWN:,}+" if count > MOVED_SHOWN else f"{count:,}",
        "url": f"{url}?{urlencode(query)}" if query else url,
    }
