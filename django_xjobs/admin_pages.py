"""The admin's own pages beside the job list: the queue overview and the cron schedules, and
the navigation every page of the app shows (``JobAdmin`` mixes these in)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import BooleanField, Count, ExpressionWrapper, Q
from django.db.models.functions import Now
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from . import conf, inspect
from .admin_permissions import has_permission, require_permission
from .durations import format_span
from .errors import JobUnknownError, XJobsError
from .models import Job, JobLease, JobState, SchedulerLeader, SchedulerState

UNKNOWN_CODE = JobUnknownError.code

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic to the type checker only
    _ModelAdmin = admin.ModelAdmin


class OverviewPages(_ModelAdmin):
    """``job/queues/`` and ``job/crons/``, framed like the admin's own pages."""

    def _page(self, request: HttpRequest, title: str, **context: Any) -> dict[str, Any]:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return {
            **self.admin_site.each_context(request),
            **nav_links(self.admin_site, request),
            "title": title,
            "opts": self.opts,
            **context,
        }

    def queues_view(self, request: HttpRequest) -> TemplateResponse:
        """Depth per queue (``inspect_queues()``), each number a link to the matching jobs."""
        overview = inspect.inspect_queues()
        jobs_url = admin_url(self.admin_site, "django_xjobs_job_changelist")
        alias = conf.get().database
        # of the suspended rows, those parked because no process registers their job name
        unknown = dict(
            Job.objects.using(alias)
            .filter(parked_unknown())
            .values("queue")
            .annotate(n=Count("id"))
            .values_list("queue", "n")
        )
        rows = [
            {
                **q,
                "unknown": unknown.get(q["queue"], 0),
                "oldest_ready": format_span(q["oldest_ready_seconds"]) if q["ready"] else "-",
                "url": f"{jobs_url}?{urlencode({'queue__exact': q['queue']})}",
                "control": admin_url(
                    self.admin_site,
                    "django_xjobs_job_queue_control",
                    q["queue"],
                    "resume" if q["paused"] else "pause",
                ),
                "links": {
                    state: f"{jobs_url}?{urlencode({'queue__exact': q['queue'], 'state__exact': state})}"
                    # ready and delayed too: the list's filter counts them as this page does
                    for state in ("ready", "delayed", "running", "suspended", "dead")
                }
                | {
                    "unknown": f"{jobs_url}?{urlencode({'queue__exact': q['queue'], 'unknown': 'parked'})}"
                },
            }
            for q in overview["queues"]
        ]
        outbox = inspect.inspect_outbox()
        context = self._page(
            request,
            "Queues",
            page="queues",
            driver=overview["driver"],
            # the buttons only for who may press them; the view checks again (CTRL-06)
            can_control=has_permission(self, request, "change"),
            rows=rows,
            totals=overview["totals"],
            unknown_total=sum(unknown.values()),
            unknown_url=f"{jobs_url}?unknown=parked",
            oldest_ready=format_span(overview["oldest_ready_seconds"])
            if overview["totals"]["ready"]
            else "-",
            outbox_pending=outbox["pending"],
            outbox_oldest=format_span(outbox["oldest_pending_seconds"]),
            outbox_quarantined=outbox["quarantined"],
            slots_held=JobLease.objects.using(alias).filter(expires_at__gt=Now()).count(),
            leader=leader_row(alias),
        )
        return TemplateResponse(request, "django_xjobs/admin/queues.html", context)

    def queue_control_view(
        self, request: HttpRequest, queue: str, action: str
    ) -> HttpResponseRedirect:
        """The queues page's Pause / Resume buttons: the same operator calls as ``xjobs pause``
        and ``xjobs resume``, by a POST from a user holding ``change_job`` (SPEC CTRL-06)."""
        if action not in ("pause", "resume"):
            raise Http404
        require_permission(self, request, "change")
        call = inspect.pause_queue if action == "pause" else inspect.resume_queue
        try:
            call(queue, by=f"admin:{request.user}")
        except XJobsError as error:
            messages.error(request, f"{action} {queue}: {error}")
        else:
            done = "Paused" if action == "pause" else "Resumed"
            messages.success(request, f"{done} queue {queue} for every worker.")
        return HttpResponseRedirect(admin_url(self.admin_site, "django_xjobs_job_queues"))

    def crons_view(self, request: HttpRequest) -> TemplateResponse:
        """Every registered cron: its schedule and policy, last firing, next run."""
        from .cron import registered_crons
        from .scheduler.role import last_fired

        alias = conf.get().database
        fired = dict(SchedulerState.objects.using(alias).values_list("task_name", "last_fired_at"))
        now = timezone.now()
        crons = []
        for handle in registered_crons():
            next_run = handle.next_occurrence(now)
            crons.append(
                {
                    "name": handle.name,
                    "origin": handle.origin,
                    "schedule": handle.schedule
                    + ("" if handle.seconds is None else f" seconds={handle.seconds}"),
                    "tz": handle.tz,
                    "catch_up": handle.catch_up,
                    "max_catch_up": handle.max_catch_up,
                    "jobs": handle.job_names(),
                    "last_fired": last_fired(handle, fired.pop(handle.name, None)),
                    "next_run": next_run,
                    # formatted here: the template's date filter would turn it into TIME_ZONE
                    "next_run_text": f"{next_run.astimezone(handle.zone):%Y-%m-%d %H:%M} {handle.tz}"
                    + ("" if handle.tz == "UTC" else f" ({next_run:%H:%M} UTC)"),
                    "next_in": format_span((next_run - now).total_seconds()),
                }
            )
        context = self._page(
            request,
            "Cron schedules",
            page="crons",
            crons=crons,
            leader=leader_row(alias),
            # watermarks of crons this code no longer declares (renamed or removed)
            orphans=sorted(fired.items()),
        )
        return TemplateResponse(request, "django_xjobs/admin/crons.html", context)


def parked_unknown() -> Q:
    """The rows ``execute`` parks when it finds no job registered under their name."""
    return Q(state=JobState.SUSPENDED, last_error__startswith=UNKNOWN_CODE)


def leader_row(alias: str) -> dict[str, Any] | None:
    """The scheduler's leadership row, with whether its lease is still running."""
    from .scheduler.role import LEADER_KEY

    alive = ExpressionWrapper(Q(expires_at__gt=Now()), output_field=BooleanField())
    row = (
        SchedulerLeader.objects.using(alias)
        .filter(lock_key=LEADER_KEY)
        .annotate(is_live=alive)
        .values("holder", "expires_at", "is_live")
        .first()
    )
    return None if row is None else dict(row)


def admin_url(site: admin.AdminSite, name: str, *args: Any) -> str:
    return reverse(f"{site.name}:{name}", args=args, current_app=site.name)


def nav_links(site: admin.AdminSite, request: HttpRequest) -> dict[str, Any]:
    """The links every page of the app shows: one click to each view, and to the dead letters."""
    jobs = admin_url(site, "django_xjobs_job_changelist")
    dead = Job.objects.using(conf.get().database).filter(state=JobState.DEAD).count()
    return {
        "xjobs_nav": [
            ("Queues", admin_url(site, "django_xjobs_job_queues")),
            (f"Dead letters ({dead})", f"{jobs}?state__exact=dead"),
            ("Cron schedules", admin_url(site, "django_xjobs_job_crons")),
            ("Outbox", admin_url(site, "django_xjobs_outboxentry_changelist")),
            ("Fleet slots", admin_url(site, "django_xjobs_joblease_changelist")),
            ("Workers", admin_url(site, "django_xjobs_worker_changelist")),
            ("Backfills", admin_url(site, "django_xjobs_backfill_changelist")),
        ],
        "xjobs_dead": dead,
    }
