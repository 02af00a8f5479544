"""Every job in the Django admin: why it stopped, its step timeline, and the operator actions.

Rows are read-only; retry and cancel go through ``django_xjobs.operations``, the same path as
``manage.py xjobs`` and the tests. Beside the job list (``/admin/django_xjobs/job/``):

* ``job/queues/``: depth per queue from ``inspect_queues()``, with the outbox, fleet slots and
  scheduler leader at a glance, and how many suspended rows are parked unknown job names;
* ``job/?unknown=parked``: rows parked because no process registers their job name;
* ``job/?state__exact=dead``: the dead letters, linked from every page as "Dead letters (N)";
* ``job/crons/``: every cron with its schedule and policy, last firing, next run and the leader;
* ``outboxentry/``, ``joblease/``, ``schedulerstate/``: the staged rows, the fleet slots held
  and the scheduler's watermarks, view-only;
* ``worker/``: every worker process, its runs in flight and whether it is alive or lapsed;
* ``backfill/``: every backfill pass in the ledger, its progress and its name's history.
"""

from __future__ import annotations

import json
from datetime import datetime
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.db.models.functions import Now
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.text import capfirst

from .. import conf, operations, redact
from ..durations import format_span, format_time
from ..errors import XJobsError
from ..models import Backfill, Job, JobLease, JobState, OutboxEntry, SchedulerState, Worker
from ..run.controls import fraction, progress_text
from ..states import WAITING_STATES, shown_attempt
from ..text import MESSAGE_LIMIT, cap
from .backfill import BackfillColumns
from .job import TIMES, JobExplained, badge
from .overview import FleetOverview
from .pages import UNKNOWN_CODE, Navigated, admin_url, parked_unknown
from .permissions import VIEWER as _viewer
from .permissions import has_permission, require_permission, sees_payloads
from .workers import WorkerAliveFilter, WorkerColumns

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic to the type checker only
    _ModelAdmin = admin.ModelAdmin


class _LibraryRows(Navigated, _ModelAdmin):
    """Rows the library writes: shown, never added or deleted by hand, read from
    ``XJOBS["DATABASE"]`` (where the driver, and so retry and cancel, reads and writes)."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).using(conf.get().database)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        viewer = _viewer.set(request)
        # rows are never edited by hand: the page is not titled "Change ..." (issue 30)
        extra_context = {"title": capfirst(self.opts.verbose_name), **(extra_context or {})}
        try:
            response = super().change_view(request, object_id, form_url, extra_context)
            # rendered here, while the fields can still see who is looking
            render = getattr(response, "render", None)
            if render is not None:
                render()
        finally:
            _viewer.reset(viewer)
        return response

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # rows are never edited by hand: not "Select job to change" (issue 30)
        title = {"title": capfirst(self.opts.verbose_name_plural)}
        return super().changelist_view(request, {**title, **(extra_context or {})})


#: the jobs a bulk action's summary names, at most (past that it counts them)
SUMMARY_NAMES = 3
SHORT_ERROR = 60  # characters of "last error" in the list: the columns fit a 1440 px screen
#: steps the timeline shows, the latest: a run may hold up to MAX_STEPS_PER_RUN of them
TIMELINE_STEPS = 200


def _admin_hint(error: XJobsError, state: str) -> str:
    """What to do about a refused retry or cancel, in the admin's terms (the library's hints
    name Python calls and command flags)."""
    if error.code == "X_JOB_NOT_CANCELLABLE":
        if state == "done":
            return "it already completed; there is nothing left to cancel"
        return "it already stopped; to run it again, select it and choose “Retry selected jobs”"
    if error.code == "X_JOB_NOT_RETRYABLE":
        if state == "cancelled":
            return (
                "it was cancelled on purpose; to run it anyway use "
                "“python manage.py xjobs retry <id> --force” on a server"
            )
        if state == "done":
            return "it completed; there is nothing to retry"
        return "it has not finished; wait for it, or choose “Cancel selected jobs” first"
    return error.hint


def _parked_unknown(obj: Job) -> bool:
    return obj.state == JobState.SUSPENDED and (obj.last_error or "").startswith(UNKNOWN_CODE)


class UnknownJobFilter(admin.SimpleListFilter):
    """Rows whose job name no process registers (a rename, or code not deployed yet): parked
    as suspended with an ``X_JOB_UNKNOWN`` last error until the grace runs out."""

    title = "unknown job name"
    parameter_name = "unknown"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("parked", "parked: no process registers the name"),
            ("here", "not registered in this process (any state)"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
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

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(value, label) for value, label in JobState.choices]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        from ..models import state_filter

        value = self.value()
        return queryset if value is None else queryset.filter(state_filter(value))


@admin.register(Job)
class JobAdmin(JobExplained, FleetOverview, _LibraryRows):
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
    list_filter = (StateFilter, UnknownJobFilter, "queue", "stop_reason", "name")
    search_fields = ("=id", "name", "idempotency_key")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    actions = ("retry_selected", "cancel_selected", "run_now_selected")
    change_list_template = "django_xjobs/admin/job_change_list.html"
    change_form_template = "django_xjobs/admin/job_change_form.html"
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
        extra_context: dict[str, Any] | None = None,
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
        rows = Job.objects.using(conf.get().database).filter(pk=wanted).values_list("name")
        return next((name for (name,) in rows), None)

    def _collapsed_into(self, object_id: str) -> Any:
        """The job a staged id that names no row collapsed into, if it did."""
        try:
            wanted = UUID(str(object_id))
        except ValueError:
            return None
        if Job.objects.filter(pk=wanted).exists():
            return None
        return operations.collapsed_into(wanted)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in Job._meta.fields] + [
            "state_shown",
            "attempt_of",
            "progress_bar",
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
            path("queues/", view(self.queues_view), name="django_xjobs_job_queues"),
            path("overview/", view(self.overview_view), name="django_xjobs_job_overview"),
            path("crons/", view(self.crons_view), name="django_xjobs_job_crons"),
            # path, not str: a name the pages link to may hold a "/" (a cron's name, a queue
            # name written by another version), and a link that cannot be made is a 500
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
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        if obj is not None:
            context = {**context, "xjobs_header": self.job_header(obj)}
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # whether each row is due, on the database clock: the state column says ready or
        # delayed as the queues page counts it (DESIGN Q-05)
        due = ExpressionWrapper(Q(run_at__lte=Now()), output_field=BooleanField())
        rows: QuerySet[Any] = super().get_queryset(request).annotate(xjobs_due=due)
        return rows

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
        return format_html("<pre>{}</pre>", _payload(obj.input))

    @admin.display(description="result")
    def pretty_result(self, obj: Job) -> str:
        return format_html("<pre>{}</pre>", _payload(obj.result))

    @admin.display(description="idempotency key")
    def key_shown(self, obj: Job) -> str:
        return _key(obj.name, obj.idempotency_key)

    @admin.display(description="operator")
    def operator_buttons(self, obj: Job) -> str:
        """Retry and Cancel, for a user who may change jobs: each posts the page's form (and
        its CSRF token) to a view that checks the permission again."""
        request = _viewer.get()
        if request is None or not has_permission(self, request, "change", obj):
            return "-"
        buttons = []
        if obj.state in ("dead", "failed"):
            buttons.append(("django_xjobs_job_retry", "Retry"))
        if obj.state in WAITING_STATES and obj.run_at > timezone.now():
            # a delayed or scheduled job, a backoff, a snooze (issue 42)
            buttons.append(("django_xjobs_job_run_now", "Run now"))
        if obj.state in ("ready", "delayed", "running", "suspended"):
            buttons.append(("django_xjobs_job_cancel", "Cancel"))
        if not buttons:
            return "-"
        return format_html_join(
            " ",
            '<button type="submit" formaction="{}" formmethod="post" name="xjobs_op" '
            'value="{}">{}</button>',
            (
                (admin_url(self.admin_site, name, obj.pk), label.lower().replace(" ", "-"), label)
                for name, label in buttons
            ),
        )

    @admin.display(description="attempt history")
    def attempt_history(self, obj: Job) -> str:
        """The last failed attempts, newest first, each traceback folding open (none drawn for
        an attempt that left none: a lost lease); the snoozes apart, as snoozes (issue 42)."""
        trace = operations.inspect_job(obj.pk)
        entries = trace["attempts"] if trace else []
        failed = [a for a in entries if a["outcome"] != "snoozed"]
        snoozes = [a for a in entries if a["outcome"] == "snoozed"]
        parts = [_failed_table(failed) if failed else "no failed attempts"]
        if snoozes:
            parts.append(
                format_html(
                    '<table class="xjobs-snoozes"><caption>Snoozes (its handler called '
                    "ctx.snooze: no attempt spent)</caption><thead><tr><th>during attempt</th>"
                    "<th>at</th><th>snoozed</th></tr></thead><tbody>{}</tbody></table>",
                    format_html_join(
                        "",
                        "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                        ((a["attempt"], _at(a["at"]), a["message"]) for a in reversed(snoozes)),
                    ),
                )
            )
        return format_html_join("", "{}", ((part,) for part in parts))

    @admin.display(description="step timeline")
    def step_timeline(self, obj: Job) -> str:
        trace = operations.inspect_job(obj.pk)
        steps = trace["steps"] if trace else []
        if not steps:
            return "no steps recorded"
        hidden = len(steps) - TIMELINE_STEPS
        steps = steps[-TIMELINE_STEPS:]
        retry_url = admin_url(self.admin_site, "django_xjobs_job_retry_from_step", obj.pk)
        request = _viewer.get()
        can_retry = (
            obj.state in ("dead", "failed")
            and request is not None
            and has_permission(self, request, "change", obj)
        )
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
            "<td><code>{}</code></td><td>{}</td></tr>",
            (
                (
                    s["name"],
                    s["status"],
                    s["attempts"],
                    "-" if s["duration"] is None else f"{s['duration']:.3f}s",
                    s["wake_at"] or "-",
                    s["error"] or "-",
                    _preview(s.get("output"), sees_payloads(request)),
                    # submits the change form's CSRF token to the retry view (no nested form)
                    format_html(
                        '<button type="submit" formaction="{}" formmethod="post" name="step" '
                        'value="{}">retry from here</button>',
                        retry_url,
                        s["name"],
                    )
                    if can_retry
                    else "",
                )
                for s in steps
            ),
        )
        note = (
            format_html(
                "<p>{} earlier steps not shown; <code>manage.py xjobs show {} --json</code> "
                "lists every step.</p>",
                f"{hidden:,}",
                obj.pk,
            )
            if hidden > 0
            else ""
        )
        return format_html(
            "{}<table><thead><tr><th>step</th><th>status</th><th>attempts</th><th>took</th>"
            "<th>wakes</th><th>error</th><th>output</th><th></th></tr></thead>"
            "<tbody>{}</tbody></table>",
            note,
            rows,
        )

    def retry_from_step_view(self, request: HttpRequest, object_id: str) -> HttpResponseRedirect:
        """Retry a dead or failed job from one step: it and later steps run again; earlier
        ones replay (the same operator call as ``xjobs retry --from-step``)."""
        job = self._job_to_change(request, object_id)
        step = request.POST.get("step", "")
        self._act(
            request,
            job,
            "retry",
            f"Queued again from step {step!r}",
            lambda: operations.retry_job(job.pk, from_step=step),
        )
        return HttpResponseRedirect(admin_url(self.admin_site, "django_xjobs_job_change", job.pk))

    def retry_view(self, request: HttpRequest, object_id: str) -> HttpResponseRedirect:
        """The job page's Retry button: the same operator call as ``xjobs retry``."""
        job = self._job_to_change(request, object_id)
        self._act(request, job, "retry", "Queued again", lambda: operations.retry_job(job.pk))
        return HttpResponseRedirect(admin_url(self.admin_site, "django_xjobs_job_change", job.pk))

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponseRedirect:
        """The job page's Cancel button: the same operator call as ``xjobs cancel``."""
        job = self._job_to_change(request, object_id)
        reason = f"cancelled from the admin by {request.user}"
        self._act(
            request, job, "cancel", "Cancelled", lambda: operations.cancel_job(job.pk, reason)
        )
        return HttpResponseRedirect(admin_url(self.admin_site, "django_xjobs_job_change", job.pk))

    def run_now_view(self, request: HttpRequest, object_id: str) -> HttpResponseRedirect:
        """The job page's Run now button: the same operator call as ``xjobs run-now``."""
        job = self._job_to_change(request, object_id)
        by = f"admin:{request.user}"
        self._act(request, job, "run", "Due now", lambda: operations.run_job_now(job.pk, by=by))
        return HttpResponseRedirect(admin_url(self.admin_site, "django_xjobs_job_change", job.pk))

    def _job_to_change(self, request: HttpRequest, object_id: str) -> Job:
        """The job a state-changing view acts on, once the request may change it."""
        require_permission(self, request, "change")
        job: Job | None = self.get_object(request, object_id)
        if job is None:
            raise PermissionDenied
        require_permission(self, request, "change", job)
        return job

    # --- actions ------------------------------------------------------------------------------

    # permissions= makes Django refuse the action to a user without change_job, even one who
    # posts it by hand
    @admin.action(description="Retry selected jobs (dead or failed)", permissions=["change"])
    def retry_selected(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._act_many(request, queryset, "retry", "Queued again", operations.retry_job)

    @admin.action(description="Cancel selected jobs", permissions=["change"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        reason = f"cancelled from the admin by {request.user}"
        self._act_many(
            request, queryset, "cancel", "Cancelled", lambda pk: operations.cancel_job(pk, reason)
        )

    @admin.action(
        description="Run selected jobs now (delayed or scheduled)", permissions=["change"]
    )
    def run_now_selected(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        by = f"admin:{request.user}"
        self._act_many(
            request, queryset, "run", "Made due now", lambda pk: operations.run_job_now(pk, by=by)
        )

    def _act_many(
        self, request: HttpRequest, queryset: QuerySet[Job], verb: str, done: str, act: Any
    ) -> None:
        """One operator call per selected job, and one message for them all (issue 42): how
        many went through, and how many were refused by code, with the fix."""
        went: list[Job] = []
        refused: dict[tuple[str, str], list[Job]] = {}
        for job in queryset:
            try:
                act(job.pk)
            except XJobsError as error:
                refused.setdefault((error.code, _admin_hint(error, job.state)), []).append(job)
            else:
                self.log_change(request, job, f"{done} from the admin.")
                went.append(job)
        total = len(went) + sum(len(jobs) for jobs in refused.values())
        parts = [f"{done} {len(went)} of {total} selected job{'s' if total != 1 else ''}"]
        if went and len(went) <= SUMMARY_NAMES:
            parts[0] += ": " + _named(went)
        parts += [
            f"Could not {verb} {len(jobs)}: {code} ({_named(jobs)}) — {hint}"
            for (code, hint), jobs in refused.items()
        ]
        text = ". ".join(parts)
        self.message_user(request, text, messages.WARNING if refused else messages.SUCCESS)

    def _act(self, request: HttpRequest, job: Job, verb: str, done: str, act: Any) -> None:
        """Run one operator call; say what happened (job names as written: the message starts
        with a verb, so the admin's capfirst leaves the name alone) and record it in the
        admin's history with the user who did it."""
        try:
            act()
        except XJobsError as error:
            self.message_user(
                request,
                f"Could not {verb} {job.name} {job.pk}: {error.code}: {error.message} — "
                f"{_admin_hint(error, job.state)}",
                messages.WARNING,
            )
        else:
            self.log_change(request, job, f"{done} from the admin.")
            self.message_user(request, f"{done}: {job.name} {job.pk}", messages.SUCCESS)


class _ViewOnly(_LibraryRows):
    """Rows only the library writes: not even their state changes from the admin."""

    change_list_template = "django_xjobs/admin/change_list.html"

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class OutboxStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("pending", "pending (not published yet)"),
            ("quarantined", "quarantined (refused: retry or discard)"),
            ("published", "published"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "pending":
            return queryset.filter(published_at__isnull=True, quarantined_at__isnull=True)
        if self.value() == "quarantined":
            return queryset.filter(published_at__isnull=True, quarantined_at__isnull=False)
        if self.value() == "published":
            return queryset.filter(published_at__isnull=False)
        return queryset


@admin.register(OutboxEntry)
class OutboxEntryAdmin(_ViewOnly):
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
        return format_html("<pre>{}</pre>", _payload(obj.input))

    @admin.display(description="idempotency key")
    def staged_key(self, obj: OutboxEntry) -> str:
        return _key(obj.job, obj.idempotency_key)

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
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        outbox = operations.inspect_outbox()
        databases = [
            (alias, d["pending"], format_span(d["oldest_pending_seconds"]), d["quarantined"])
            for alias, d in outbox["databases"].items()
        ]
        return super().changelist_view(
            request, {"outbox_databases": databases, **(extra_context or {})}
        )


class LeaseLiveFilter(admin.SimpleListFilter):
    title = "live"
    parameter_name = "live"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "held"), ("no", "expired")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "yes":
            return queryset.filter(expires_at__gt=Now())
        if self.value() == "no":
            return queryset.filter(expires_at__lte=Now())
        return queryset


@admin.register(JobLease)
class JobLeaseAdmin(_ViewOnly):
    """Fleet concurrency slots (``job(concurrency=N)``): a live row is a run holding a slot; an
    expired one is free for the next claim to take over."""

    list_display = ("lease_key", "slot", "holder", "expires_at", "live")
    list_filter = (LeaseLiveFilter, "lease_key")
    search_fields = ("lease_key", "holder")
    ordering = ("lease_key", "slot")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        alive = ExpressionWrapper(Q(expires_at__gt=Now()), output_field=BooleanField())
        rows: QuerySet[Any] = super().get_queryset(request).annotate(is_live=alive)
        return rows

    @admin.display(description="live", boolean=True, ordering="is_live")
    def live(self, obj: JobLease) -> bool:
        return bool(getattr(obj, "is_live", False))


@admin.register(Worker)
class WorkerAdmin(WorkerColumns, _ViewOnly):
    """Worker processes, renewed with each heartbeat: a lapsed one went a visibility timeout
    without reaching the database (killed, stopped or cut off); a clean stop removes its row.
    Each names the jobs it runs now and since when (issue 42)."""

    list_display = (
        "id",
        "worker_state",
        "runs_now",
        "queue_list",
        "host",
        "pid",
        "started_shown",
        "last_seen_shown",
        "in_flight",
    )
    list_filter = (WorkerAliveFilter, "host")
    search_fields = ("id", "host")
    ordering = ("started_at", "id")
    fields = (
        "id",
        "worker_state",
        "runs_now",
        "queue_list",
        "host",
        "pid",
        "started_shown",
        "last_seen_shown",
        "expires_shown",
        "stopped_shown",
        "in_flight",
    )
    readonly_fields = fields


@admin.register(SchedulerState)
class SchedulerStateAdmin(_ViewOnly):
    """Each cron's durable watermark: the last occurrence the scheduler fired."""

    list_display = ("task_name", "last_fired", "watermark", "updated_at", "declared")
    search_fields = ("task_name",)
    ordering = ("task_name",)

    @admin.display(description="declared in code", boolean=True)
    def declared(self, obj: SchedulerState) -> bool:
        from ..declarations.cron import registered_crons

        return obj.task_name in {c.name for c in registered_crons()}

    @admin.display(description="last fired", ordering="last_fired_at")
    def last_fired(self, obj: SchedulerState) -> Any:
        """What the Crons page says: an armed watermark is a time still ahead, not a firing
        (issue 23); the raw watermark stays in its own column."""
        from ..declarations.cron import registered_crons
        from ..scheduler.role import last_fired

        handle = next((c for c in registered_crons() if c.name == obj.task_name), None)
        if handle is None:
            return obj.last_fired_at  # no longer declared: only the mark is known
        return last_fired(handle, obj.last_fired_at) or "never"

    @admin.display(description="watermark", ordering="last_fired_at")
    def watermark(self, obj: SchedulerState) -> Any:
        """The stored mark the next round fires after (SPEC SCHED-01)."""
        return obj.last_fired_at


@admin.register(Backfill)
class BackfillAdmin(BackfillColumns, _ViewOnly):
    """Backfill passes, from the ``x_backfills`` ledger: written by the passes only."""


def _named(jobs: list[Job]) -> str:
    shown = ", ".join(f"{j.name} {j.pk}" for j in jobs[:SUMMARY_NAMES])
    return shown + (f" and {len(jobs) - SUMMARY_NAMES} more" if len(jobs) > SUMMARY_NAMES else "")


def _at(text: str | None) -> str:
    """An ISO time of ``inspect_job`` as every screen prints a time (``format_time``)."""
    return "-" if not text else format_time(datetime.fromisoformat(text))


def _failed_table(attempts: list[dict[str, Any]]) -> str:
    rows = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}{}</td></tr>",
        (
            (
                a["attempt"],
                _at(a["at"]),
                a["outcome"],
                a["code"] or "-",
                a["exception"] or "-",
                a["message"] or "-",
                format_html(
                    "<details><summary>traceback</summary><pre>{}</pre></details>",
                    a["traceback"],
                )
                if (a["traceback"] or "").strip()
                else "",
            )
            for a in reversed(attempts)
        ),
    )
    return format_html(
        '<table class="xjobs-attempts"><thead><tr><th>attempt</th><th>ended at</th><th>outcome'
        "</th><th>code</th><th>exception</th><th>message</th></tr></thead><tbody>{}</tbody>"
        "</table>",
        rows,
    )


# a row written by another version or by SQL may nest deeper than the printers can recurse
# (issue 24): it must not take the page down with it
TOO_DEEP = "(nested too deeply to show)"


def _preview(value: Any, values: bool) -> str:
    try:
        text = json.dumps(redact.mask(value) if values else shape(value), ensure_ascii=False)
    except RecursionError:
        return TOO_DEEP
    return text if len(text) <= 60 else text[:57] + "..."


def _payload(value: Any) -> str:
    """A payload as the viewer may see it: its values (secret keys masked) with the payload
    permission, else its shape."""
    try:
        if sees_payloads(_viewer.get()):
            return json.dumps(redact.mask(value), indent=2, ensure_ascii=False)
        return json.dumps(shape(value), indent=2, ensure_ascii=False)
    except RecursionError:
        return TOO_DEEP


def _key(name: str, key: str) -> str:
    """A job's idempotency key as the viewer may see it: it is made from the inputs, so without
    the payload permission the template it was made from (``operations.key_shown``, the one
    rule the queues page's limit keys follow too)."""
    return operations.key_shown(
        SimpleNamespace(name=name, idempotency_key=key), values=sees_payloads(_viewer.get())
    )


def shape(value: Any, depth: int = 0) -> Any:
    """What a payload holds without what it says: its keys, each value's type and size."""
    if depth >= redact.MAX_WALK and isinstance(value, dict):
        return redact.TOO_DEEP  # a row no enqueue accepted: it must not recurse past the limit
    if isinstance(value, dict):
        return {key: shape(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return f"list of {len(value)}"
    if isinstance(value, str):
        return f"str of {len(value)}"
    if value is None:
        return None
    return type(value).__name__


from . import batches as admin_batches  # noqa: E402  (registers the batch pages, issue 32)

JobAdmin.batch_link = admin_batches.batch_link  # type: ignore[attr-defined]  # lineage
