"""The job list and a job's page: its columns, the state and unknown-name filters, the page's
header block and fieldsets, and the URLs of the overview pages and the operator views.
``JobAdmin`` is put together from ``JobActions`` (actions.py), ``JobTrace`` (trace.py),
``JobExplained`` (job.py), ``MatchingActions`` (matching.py) and ``FleetOverview``
(overview.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from django.contrib import admin, messages
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.db.models.functions import Now
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path
from django.utils.html import format_html

from .. import conf, operations
from ..drivers.routing.surface import is_down
from ..errors import JobFilterError
from ..models import Job, JobHistory, JobState
from ..run.controls import fraction, progress_text
from ..states import WAITING_STATES, shown_attempt
from ..text import MESSAGE_LIMIT, cap
from .actions import JobActions
from .batches import batch_link as _batch_link
from .databases import OneDatabaseList
from .filters import (
    DatabaseFilter,
    ErrorCodeFilter,
    InputFilter,
    NameFilter,
    QueueFilter,
    searched,
)
from .job import TIMES, JobExplained, badge
from .matching import MatchingActions
from .overview import FleetOverview
from .pages import UNKNOWN_CODE, admin_url, parked_unknown
from .rows import LibraryRows
from .trace import JobTrace, key_text, payload_text

SHORT_ERROR = 60  # characters of "last error" in the list: the columns fit a 1440 px screen


def _parked_unknown(obj: Job) -> bool:
    return obj.state == JobState.SUSPENDED and (obj.last_error or "").startswith(UNKNOWN_CODE)


class UnknownJobFilter(admin.SimpleListFilter):
    """Rows whose job name no process registers (a rename, or code not deployed yet): parked
    as suspended with an ``X_JOB_UNKNOWN`` last error until the grace runs out."""

    title = "unknown job name"
    parameter_name = "unknown"

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        return [
            ("parked", "parked: no process registers the name"),
            ("here", "not registered in this process (any state)"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        if self.value() == "parked":
            return queryset.filter(parked_unknown())
        if self.value() == "here":
            from ..declarations import registry

            # a django.tasks task is known by its module path, which registry.get_job imports
            names = queryset.values_list("name", flat=True).distinct().order_by()
            return queryset.exclude(name__in=[n for n in names if registry.get_job(n)])
        return queryset


class StateFilter(admin.SimpleListFilter):
    """By the state the queues page counts: a waiting row is ready once due and delayed until
    then, whichever it is stored as (DESIGN Q-05). Keeps the ``state__exact`` parameter, so
    the links of the queues page and of "Dead letters" still land here."""

    title = "state"
    parameter_name = "state__exact"

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        return [(value, label) for value, label in JobState.choices]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        from ..models import state_filter

        value = self.value()
        return queryset if value is None else queryset.filter(state_filter(value))


class JobAdmin(
    JobActions,
    JobTrace,
    JobExplained,
    MatchingActions,
    FleetOverview,
    OneDatabaseList,  # the list of one database at a time, a job's page in its own (SHARD-24)
    LibraryRows,
):
    # what an operator scans for first, left, where a 1400 px screen with the admin's sidebar
    # open shows it without scrolling (issue 42): the state, the stop reason, the last error
    list_display = (
        "name",
        "state_shown",
        "stop_reason_shown",
        "short_error",
        "queue",
        "attempt_of",
        "progress_column",
        "run_at_shown",
        "updated_shown",
    )
    list_filter = (
        DatabaseFilter,  # shown with jobs in several databases only (SPEC SHARD-24)
        StateFilter,
        UnknownJobFilter,
        QueueFilter,
        "stop_reason",
        NameFilter,
        InputFilter,
        ErrorCodeFilter,
    )
    # a filtered list says "N results" without counting the whole table as well: that count
    # reads every row, seconds at 10 million (SPEC BULK-22)
    show_full_result_count = False
    search_fields = ("=id", "name", "idempotency_key")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    actions = ("retry_selected", "cancel_selected", "run_now_selected")
    change_list_template = "django_xjobs/admin/job_change_list.html"
    change_form_template = "django_xjobs/admin/job_change_form.html"
    #: the batch a job is a member of, linked for who may view batches (issue 32)
    batch_link = _batch_link
    # the state, stop reason, last error, attempt, why and next attempt open the page in one
    # header block (admin/job.py, issue 42); the rest of the row follows
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id",
                    "name",
                    "queue",
                    "progress_bar",
                    "priority",
                    "version_shown",
                    "operator_buttons",
                )
            },
        ),
        ("Failed attempts", {"fields": ("attempt_history",)}),
        ("Steps", {"fields": ("step_timeline",)}),
        ("Data", {"fields": ("pretty_input", "pretty_result", "key_shown", "run_id")}),
        (
            "Timing and lease",
            {
                "fields": (
                    "run_at_shown",
                    "created_shown",
                    "started_shown",
                    "last_attempted_shown",
                    "attempted_by",
                    "updated_shown",
                    "visible_shown",
                    "claimed_by",
                    "lease_expiries",
                    "expires_shown",
                    "snoozes",
                )
            },
        ),
        ("Origin", {"fields": ("tenant_id", "enqueued_by", "traceparent", "batch_link")}),
        # issue 32: what it runs after, and who waits for it (the header says it in words)
        (
            "Dependencies",
            {
                "classes": ("collapse",),
                "fields": ("after", "waiting_on", "after_failed", "run_anyway", "dependants"),
            },
        ),
    )

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, object] | None = None,
    ) -> HttpResponse:
        """The job page is read-only: no Save buttons, and a posted form changes nothing (a
        stale copy saved over the row would undo what a worker wrote since). Jobs change only
        through retry and cancel."""
        if request.method == "POST":
            self.message_user(
                request,
                "Jobs are not edited by hand: use the Retry and Cancel buttons of the job "
                "page, the job list's actions, or “retry from here” on a step.",
                messages.WARNING,
            )
            return HttpResponseRedirect(request.path)
        moved = self._collapsed_into(object_id)
        if moved is not None:
            self.message_user(
                request,
                f"Job {object_id} was staged and, at publish, collapsed into this live job with "
                "the same idempotency key.",
                messages.INFO,
            )
            return HttpResponseRedirect(
                admin_url(self.admin_site, "django_xjobs_job_change", moved)
            )
        if self._moved_to_history(object_id):  # HIST-08: its page is the history's now
            return HttpResponseRedirect(
                admin_url(self.admin_site, "django_xjobs_jobhistory_change", object_id)
            )
        buttons = {
            "title": f"Job {self._job_name(object_id) or ''}".strip(),
            "show_save": False,
            "show_save_and_continue": False,
            "show_save_and_add_another": False,
            "show_delete": False,
        }
        return super().change_view(
            request, object_id, form_url, {**buttons, **(extra_context or {})}
        )

    def _job_name(self, object_id: str) -> str | None:
        try:
            wanted = UUID(str(object_id))
        except ValueError:
            return None
        routing = conf.get().routing
        for alias in routing.aliases if routing is not None else (conf.get().database,):
            rows = Job.objects.using(alias).filter(pk=wanted).values_list("name")
            try:
                name = next((name for (name,) in rows), None)
            except Exception as error:  # one database down: the others may hold it (SHARD-25)
                if routing is None or not is_down(error):
                    raise
                continue
            if name is not None:
                return name
        return None

    def _collapsed_into(self, object_id: str) -> UUID | None:
        """The job a staged id that names no row collapsed into, if it did."""
        try:
            wanted = UUID(str(object_id))
        except ValueError:
            return None
        if self._job_name(object_id) is not None:
            return None
        return operations.collapsed_into(wanted)

    def _moved_to_history(self, object_id: str) -> bool:
        """Whether the id names no live row but a job moved to the history (issue 46), in the
        jobs database or, with jobs in several, in any that answers (SPEC SHARD-51)."""
        try:
            wanted = UUID(str(object_id))
        except ValueError:
            return False
        if self._job_name(object_id) is not None:
            return False
        routing = conf.get().routing
        for database in (conf.get().database,) if routing is None else routing.aliases:
            try:
                if JobHistory.objects.using(database).filter(pk=wanted).exists():
                    return True
            except Exception as error:
                if routing is None or not is_down(error):
                    raise
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: object = None) -> list[str]:
        return [f.name for f in Job._meta.fields] + [
            "state_shown",
            "attempt_of",
            "progress_bar",
            "version_shown",
            "attempt_history",
            "step_timeline",
            "pretty_input",
            "pretty_result",
            "key_shown",
            "operator_buttons",
            "batch_link",
            *TIMES,
        ]

    # --- the queue overview and the cron schedules -----------------------------------------

    def get_urls(self) -> list[URLPattern]:
        # before the default patterns: "<path:object_id>/" would take "queues/" for a job id
        view = self.admin_site.admin_view
        return [
            # before "<path:object_id>/retry/", which would take "matching/retry/" for a job's
            path(
                "matching/<str:verb>/",
                view(self.matching_view),
                name="django_xjobs_job_matching",
            ),
            path("queues/", view(self.queues_view), name="django_xjobs_job_queues"),
            path("overview/", view(self.overview_view), name="django_xjobs_job_overview"),
            path("crons/", view(self.crons_view), name="django_xjobs_job_crons"),
            # path, not str: a name the pages link to may hold a "/" (a cron's name, a queue
            # name written by another version), and a link that cannot be made is a 500
            path(
                "paused-jobs/<str:action>/",
                view(self.job_pause_view),
                name="django_xjobs_job_pause_control",
            ),
            path(
                "queues/<path:queue>/<str:action>/",
                view(self.queue_control_view),
                name="django_xjobs_job_queue_control",
            ),
            path(
                "crons/<path:cron>/<str:action>/",
                view(self.cron_control_view),
                name="django_xjobs_job_cron_control",
            ),
            path("<path:object_id>/retry/", view(self.retry_view), name="django_xjobs_job_retry"),
            path(
                "<path:object_id>/cancel/", view(self.cancel_view), name="django_xjobs_job_cancel"
            ),
            path(
                "<path:object_id>/run-now/",
                view(self.run_now_view),
                name="django_xjobs_job_run_now",
            ),
            path(
                "<path:object_id>/retry-from-step/",
                view(self.retry_from_step_view),
                name="django_xjobs_job_retry_from_step",
            ),
            *super().get_urls(),
        ]

    # --- columns and fields ----------------------------------------------------------------

    @admin.display(description="progress")
    def progress_bar(self, obj: Job) -> str:
        """The run's latest ``ctx.progress`` as a bar (issue 29); blank for a job without."""
        if not obj.progress:
            return ""
        share = fraction(obj.progress)
        text = progress_text(obj.progress)
        if share is None:
            return text
        return format_html(
            '<progress class="xjobs-progress" value="{}" max="100" title="{}">{}</progress> {}',
            round(share * 100),
            text,
            text,
            text,
        )

    @admin.display(description="attempt")
    def attempt_of(self, obj: Job) -> str:
        started = obj.started_at is not None
        attempt = f"{shown_attempt(obj.state, obj.attempt, started)} of {obj.max_attempts}"
        parked = obj.state == JobState.SUSPENDED and started
        return f"{attempt} (parked)" if parked else attempt

    def state_badge(self, obj: Job, state: str) -> str:
        return self.state_shown(obj)

    def render_change_form(
        self,
        request: HttpRequest,
        context: Mapping[str, object],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        if obj is not None:
            context = {**context, "xjobs_header": self.job_header(obj)}
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        # whether each row is due, on the database clock: the state column says ready or
        # delayed as the queues page counts it (DESIGN Q-05)
        due = ExpressionWrapper(Q(run_at__lte=Now()), output_field=BooleanField())
        rows: QuerySet[Job] = super().get_queryset(request).annotate(xjobs_due=due)
        return rows

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        """``input:{...}`` and ``error:CODE`` search by what a job carries (SPEC BULK-12);
        any other term searches the id, name and key as ever."""
        try:
            found = searched(queryset, search_term.strip())
        except JobFilterError as error:
            messages.warning(request, f"{error.code}: {error.message} — {error.hint}")
            return queryset.none(), False
        if found is not None:
            return found, False
        return super().get_search_results(request, queryset, search_term)

    @admin.display(description="state", ordering="state")
    def state_shown(self, obj: Job) -> str:
        """A row parked because no process registers its name says so, not only "suspended";
        a waiting row says ready or delayed by its run_at, as the queues page counts it."""
        if obj.state in WAITING_STATES and hasattr(obj, "xjobs_due"):
            return badge("ready" if obj.xjobs_due else "delayed")
        if _parked_unknown(obj):
            return format_html(
                '{} <span class="xjobs-unknown" title="{}">(unknown job)</span>',
                badge(obj.state),
                "no process registers this job name; it waits for code that declares it "
                "and is dead-lettered after XJOBS['UNKNOWN_JOB_GRACE']",
            )
        return badge(obj.state)

    @admin.display(description="stop reason", ordering="stop_reason")
    def stop_reason_shown(self, obj: Job) -> str:
        """The stop reason as every other screen and the filter's URL spell it
        (``attempts-exhausted``), not its choice label ("Attempts Exhausted")."""
        return obj.stop_reason or "-"

    @admin.display(description="last error")
    def short_error(self, obj: Job) -> str:
        """One line that fits beside the other columns; the full text is on hover."""
        text = obj.last_error or ""
        if not text:
            return "-"
        short = text.splitlines()[0]
        short = short if len(short) <= SHORT_ERROR else short[: SHORT_ERROR - 1] + "…"
        # a row stored before messages were capped must not bloat every row of the list
        title = cap(text, MESSAGE_LIMIT)
        return format_html('<span class="xjobs-error" title="{}">{}</span>', title, short)

    @admin.display(description="input")
    def pretty_input(self, obj: Job) -> str:
        return format_html("<pre>{}</pre>", payload_text(obj.input))

    @admin.display(description="result")
    def pretty_result(self, obj: Job) -> str:
        return format_html("<pre>{}</pre>", payload_text(obj.result))

    @admin.display(description="idempotency key")
    def key_shown(self, obj: Job) -> str:
        return key_text(obj.name, obj.idempotency_key)
