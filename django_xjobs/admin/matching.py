"""The job list's "retry / cancel / delete / requeue all N matching" (issue 45): every job the
list's filter admits, not only the page's selected rows. The list's filters (state, queue, name,
stop reason, tenant, error code, input, the created-at date drill-down, an ``input:``/``error:``
search) are read as one ``JobFilter``; a list narrowed by anything that maps onto none (a free-
text search, "unknown job name") offers no such action, so it never acts on other jobs than the
list shows. A confirmation page shows the verb's own count and a sample (the dry run); its
CSRF-protected POST, by a user holding the verb's permission (``change_job``; ``delete_job`` to
delete), acts at once on a batch or less and otherwise by the library's background job, and
lands on the action's audit record, which shows its progress (SPEC BULK-14, BULK-16)."""

from __future__ import annotations

import calendar
import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.template.response import TemplateResponse
from django.utils import timezone

from .. import operations
from ..drivers.contract import JobFilter
from ..drivers.routing.surface import is_down
from ..errors import JobFilterError, XJobsError
from ..operations import bulk
from ..operations.background import NAMED, QUEUE, VERBS
from ..operations.filters import shown_filter
from .databases import shown_database
from .filters import DATABASE_PARAM
from .history import moved_note
from .pages import OverviewPages, admin_url
from .permissions import has_permission, require_permission

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic to the type checker only
    _ModelAdmin = admin.ModelAdmin

#: each list parameter that maps onto a filter field
PARAMETERS = {
    "state__exact": "state",
    "queue": "queue",
    "queue__exact": "queue",
    "name": "name",
    "name__exact": "name",
    "stop_reason": "stop_reason",
    "stop_reason__exact": "stop_reason",
    "tenant_id": "tenant_id",
    "tenant_id__exact": "tenant_id",
    "input": "input",
    "error_code": "error_code",
}
#: the list's parameters that choose how it shows, not which jobs: ignored; ``database`` picks
#: the one database the list reads, and the verbs over many act in every database (SHARD-24)
SHOWING = frozenset({"o", "p", "all", "_changelist_filters", DATABASE_PARAM})
#: the date drill-down's parameters (``date_hierarchy = "created_at"``)
DATES = ("created_at__year", "created_at__month", "created_at__day")
#: what each verb says it did, and the permission it needs (as the job page's buttons)
DONE = {"retry": "Queued again", "cancel": "Cancelled", "delete": "Deleted", "requeue": "Moved"}
PERMISSION = {"retry": "change", "cancel": "change", "delete": "delete", "requeue": "change"}


def list_filter(query: QueryDict) -> dict[str, object]:
    """The filter the job list's parameters make; ``JobFilterError`` for a parameter that maps
    onto no filter field (acting on it would act on jobs the list does not show)."""
    given: dict[str, object] = {}
    for key in query:
        value = query.get(key, "")
        if key in SHOWING or key in DATES:
            continue
        if key == "q":
            given.update(_searched(value))
        elif key in PARAMETERS:
            given[PARAMETERS[key]] = value
        else:
            raise JobFilterError(
                f"the list is narrowed by {key}={value!r}, which no bulk filter field matches",
                hint="narrow it by state, queue, name, stop reason, error code, input or date",
            )
    given.update(_dates(query))
    return given


def _searched(term: str) -> dict[str, object]:
    term = term.strip()
    if not term:
        return {}
    for prefix, field in (("input:", "input"), ("error:", "error_code")):
        if term.startswith(prefix):
            return {field: term.removeprefix(prefix).strip()}
    raise JobFilterError(
        f"the list is narrowed by the search {term!r}, which no bulk filter field matches",
        hint="search input:{...} or error:CODE, or filter by the sidebar's fields",
    )


def _dates(query: QueryDict) -> dict[str, object]:
    """The date drill-down as a created-at range, in the admin's time zone."""
    parts = []
    for key in DATES:
        if key not in query:
            break
        try:
            parts.append(int(str(query.get(key))))
        except ValueError:
            raise JobFilterError(f"{key}={query.get(key)!r} is not a number") from None
    if not parts:
        return {}
    zone = timezone.get_current_timezone()
    year, month, day = [*parts, 1, 1][:3]
    try:
        low = datetime(year, month, day, tzinfo=zone)
    except ValueError:
        raise JobFilterError(f"the date {'-'.join(map(str, parts))} does not exist") from None
    if len(parts) == 1:
        high = low.replace(year=year + 1)
    elif len(parts) == 2:
        high = low + timedelta(days=calendar.monthrange(year, month)[1])
    else:
        high = low + timedelta(days=1)
    return {"created_after": low, "created_before": high}


class MatchingActions(OverviewPages):
    """``job/matching/<verb>/``: the confirmation page (GET) and the action (POST)."""

    def matching_links(self, request: HttpRequest) -> list[tuple[str, str]]:
        """The list's "all matching" links the user may follow, while a filter that maps onto
        a ``JobFilter`` is given; none without one (a bare list is every job)."""
        try:
            given = list_filter(request.GET)
        except JobFilterError:
            return []
        if not given:
            return []
        query = request.GET.urlencode()
        return [
            (verb, f"{admin_url(self.admin_site, 'django_xjobs_job_matching', verb)}?{query}")
            for verb in VERBS
            if has_permission(self, request, PERMISSION[verb])
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, object] | None = None
    ) -> HttpResponse:
        # the database the list reads, and a database that is down: OneDatabaseList's (SHARD-24)
        context = {
            "xjobs_matching": self.matching_links(request),
            "xjobs_moved": self.moved(request),
            **(extra_context or {}),
        }
        response: HttpResponse = super().changelist_view(request, context)
        return response

    def moved(self, request: HttpRequest) -> dict[str, str]:
        """HIST-14: the jobs the list's filter admits that moved to the history, which the
        list (x_jobs) does not show and the "all matching" actions act on too; nothing for a
        list narrowed by what no filter field matches."""
        try:
            where = operations.job_filter(list_filter(request.GET))
        except XJobsError:
            return {}
        database = shown_database(request)
        try:  # the history of the database the list reads (SPEC SHARD-50)
            return moved_note(self.admin_site, request, where, database)
        except Exception as error:
            if database is None or not is_down(error):
                raise
            return {}  # the list itself says the database is down

    def matching_view(self, request: HttpRequest, verb: str) -> HttpResponse:
        """The dry run's count and sample, and a form that posts the action (SPEC BULK-16)."""
        checked = NAMED.get(verb)
        if checked is None:
            raise Http404(f"no bulk verb {verb!r}")
        if not has_permission(self, request, PERMISSION[verb]):
            raise PermissionDenied
        query = QueryDict(request.POST.get("query", "")) if request.method == "POST" else None
        shown = query if query is not None else request.GET
        back = f"{admin_url(self.admin_site, 'django_xjobs_job_changelist')}?{shown.urlencode()}"
        try:
            where = operations.job_filter(list_filter(shown))
        except XJobsError as error:
            self.message_user(request, _refusal(error), messages.WARNING)
            return HttpResponseRedirect(back)
        if request.method == "POST":
            require_permission(self, request, PERMISSION[verb])
            return self._act_on_matching(request, verb, where, back)
        try:
            looked = bulk.preview(checked, where)
        except XJobsError as error:
            self.message_user(request, _refusal(error), messages.WARNING)
            return HttpResponseRedirect(back)
        context = self._page(
            request,
            f"{verb.capitalize()} all {looked.matched:,} matching jobs",
            page="matching",
            verb=verb,
            looked=looked,
            # shown masked, as a job's inputs are; the form posts the query as given
            filter_text=json.dumps(shown_filter(where.to_json()), sort_keys=True),
            query=shown.urlencode(),
            back=back,
            background=looked.matched > bulk.BATCH,
            batch=bulk.BATCH,
            queue=QUEUE,
            served=_served(QUEUE),
        )
        return TemplateResponse(request, "django_xjobs/admin/matching.html", context)

    def _act_on_matching(
        self, request: HttpRequest, verb: str, where: JobFilter, back: str
    ) -> HttpResponseRedirect:
        reason = request.POST.get("reason") or f"cancelled from the admin by {request.user}"
        try:
            started = operations.act_on_matching(
                verb,
                where,
                reason=reason if verb == "cancel" else None,
                queue=(request.POST.get("to") or None) if verb == "requeue" else None,
                by=f"admin:{request.user}",
            )
        except XJobsError as error:
            self.message_user(request, _refusal(error), messages.WARNING)
            return HttpResponseRedirect(back)
        if started.background:
            text = (
                f"{verb.capitalize()} of {started.matched:,} matching jobs goes on in the "
                f"background (job {started.job_id} on queue {QUEUE}); its audit record shows "
                "how far it got"
            )
        else:
            result = started.result
            changed = 0 if result is None else result.changed
            text = f"{DONE[verb]} {changed:,} of {started.matched:,} matching jobs"
            if result is not None and result.skipped:
                text += f"; {result.skipped:,} skipped (they moved on meanwhile)"
        self.message_user(request, text, messages.SUCCESS)
        user = request.user
        if started.audit_id and user.has_perm("django_xjobs.view_operatoraction"):
            target = admin_url(
                self.admin_site, "django_xjobs_operatoraction_change", started.audit_id
            )
            return HttpResponseRedirect(target)
        return HttpResponseRedirect(back)


def _refusal(error: XJobsError) -> str:
    return f"{error.code}: {error.message} — {error.hint}" if error.hint else error.message


def _served(queue: str) -> bool:
    """Whether a live worker works ``queue`` now."""
    return any(w.alive and queue in w.queues for w in operations.inspect_workers())
