"""The admin's own pages beside the job list: the queue overview and the cron schedules, and
the navigation every page of the app shows (``JobAdmin`` mixes these in)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import django
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import BooleanField, Count, ExpressionWrapper, Q
from django.db.models.functions import Now
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from .. import conf, operations, redact
from ..declarations import registry
from ..drivers import get_driver
from ..drivers.reading import figures_database, reading_primary
from ..drivers.routing.surface import is_down, per_alias
from ..durations import format_span
from ..errors import JobUnknownError, XJobsError
from ..limits.operator import (
    inspect_job_pauses,
    inspect_limits,
    parse_cap,
    pause_jobs,
    resume_jobs,
    set_queue_limit,
)
from ..metrics.depths import queue_depths
from ..models import Job, JobHistory, JobLease, JobState, SchedulerLeader, SchedulerState
from ..operations.answers import KeyUseReport
from .filters import DATABASE_PARAM
from .permissions import has_permission, require_permission, sees_payloads

UNKNOWN_CODE = JobUnknownError.code
#: the dead letters every page counts, at most: past it the link says "10,000+" (SPEC BULK-22)
DEAD_SHOWN = 10_000

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic to the type checker only
    _ModelAdmin = admin.ModelAdmin


class OverviewPages(_ModelAdmin):
    """``job/queues/`` and ``job/crons/``, framed like the admin's own pages."""

    def _viewable(self, request: HttpRequest) -> None:
        """The gate of every page here, before it reads anything: a page that did its work
        first answered a user without ``view_job`` with whatever that work raised (issue 40)."""
        if not self.has_view_permission(request):
            raise PermissionDenied

    def _page(self, request: HttpRequest, title: str, **context: object) -> dict[str, Any]:
        self._viewable(request)
        return {
            **self.admin_site.each_context(request),
            **nav_links(self.admin_site, request),
            "title": title,
            "opts": self.opts,
            # Django 6 draws breadcrumbs from an <ol>; 5.2 from a <div> (issue 30)
            "xjobs_breadcrumb_list": django.VERSION >= (6, 0),
            **context,
        }

    def queues_view(self, request: HttpRequest) -> TemplateResponse:
        """Depth per queue (``inspect_queues()``), each number a link to the matching jobs.
        Read from the jobs database, not ``READ_DATABASE``: its buttons pause and resume by
        what it shows, and an operator lands on it right after pressing one (SPEC READ-01)."""
        self._viewable(request)
        with reading_primary():
            split = per_alias(get_driver(), queue_depths)  # SPEC SHARD-22
            overview = operations.inspect_queues() if split is None else None
        jobs_url = admin_url(self.admin_site, "django_xjobs_job_changelist")
        alias = conf.get().database
        if overview is not None:
            queues, down = [{**q, "alias": alias} for q in overview["queues"]], []
        else:  # jobs in several databases: each queue under its alias, one down said so
            assert split is not None
            queues = [{**q, "alias": a.alias} for a in split for q in a.answer or []]
            down = [{"alias": a.alias, "problem": a.problem} for a in split if a.answer is None]
        # of the suspended rows, those parked because no process registers their job name
        unknown = {
            (database, queue): n
            for database in dict.fromkeys(q["alias"] for q in queues)
            for queue, n in Job.objects.using(database)
            .filter(parked_unknown())
            .values("queue")
            .annotate(n=Count("id"))
            .values_list("queue", "n")
        }
        routed = split is not None
        rows = [
            {
                **q,
                "unknown": unknown.get((q["alias"], q["queue"]), 0),
                "oldest_ready": format_span(q["oldest_ready_seconds"]) if q["ready"] else "-",
                "url": _listed(jobs_url, routed, q),
                "control": admin_url(
                    self.admin_site,
                    "django_xjobs_job_queue_control",
                    q["queue"],
                    "resume" if q["paused"] else "pause",
                ),
                "limit_control": admin_url(
                    self.admin_site, "django_xjobs_job_queue_control", q["queue"], "limit"
                ),
                "links": {
                    state: _listed(jobs_url, routed, q, state__exact=state)
                    # ready and delayed too: the list's filter counts them as this page does
                    for state in ("ready", "delayed", "running", "suspended", "dead")
                }
                | {"unknown": _listed(jobs_url, routed, q, unknown="parked")},
            }
            for q in queues
        ]
        buckets = ("ready", "delayed", "running", "suspended", "dead")
        totals = {b: sum(q[b] for q in queues) for b in buckets}
        oldest = max((q["oldest_ready_seconds"] for q in queues), default=0.0)
        outbox = operations.inspect_outbox()
        context = self._page(
            request,
            "Queues",
            page="queues",
            driver=get_driver().name,
            routed=routed,
            down=down,
            # the buttons only for who may press them; the view checks again (CTRL-06)
            can_control=has_permission(self, request, "change"),
            rows=rows,
            totals=totals,
            unknown_total=sum(unknown.values()),
            unknown_url=f"{jobs_url}?unknown=parked",
            oldest_ready=format_span(oldest) if totals["ready"] else "-",
            outbox_pending=outbox["pending"],
            outbox_oldest=format_span(outbox["oldest_pending_seconds"]),
            outbox_quarantined=outbox["quarantined"],
            slots_held=JobLease.objects.using(alias).filter(expires_at__gt=Now()).count(),
            # with a database down, the limit keys (read from every one) are not shown: said above
            limit_keys=[] if down else limit_keys_shown(request),
            # SPEC PAUSE-08: the jobs and keys paused, each with its Resume button
            job_pauses=job_pauses_shown(request),
            declared_jobs=sorted(h.name for h in registry.registered_jobs()),
            job_pause_url=admin_url(self.admin_site, "django_xjobs_job_pause_control", "pause"),
            job_resume_url=admin_url(self.admin_site, "django_xjobs_job_pause_control", "resume"),
            leader=leader_row(alias),
        )
        return TemplateResponse(request, "django_xjobs/admin/queues.html", context)

    def job_pause_view(self, request: HttpRequest, action: str) -> HttpResponseRedirect:
        """The queues page's Pause job / Resume buttons: the calls ``xjobs pause-jobs`` and
        ``xjobs resume-jobs`` make, by a CSRF-protected POST from a user holding ``change_job``
        (SPEC PAUSE-08). The form's ``name``, ``key`` (empty: the whole job) and ``for`` (a
        duration; empty: until resumed)."""
        if action not in ("pause", "resume"):
            raise Http404
        require_permission(self, request, "change")
        name = str(request.POST.get("name", "")).strip()
        key = str(request.POST.get("key", "")).strip() or None
        shown = name if key is None else f"{name}[{key}]"
        by = f"admin:{request.user}"
        try:
            if action == "pause":
                ends = str(request.POST.get("for", "")).strip() or None
                pause_jobs(name=name, limit_key=key, until=ends, by=by)
            else:
                resume_jobs(name=name, limit_key=key, by=by)
        except XJobsError as error:
            messages.error(request, f"{action} {shown}: {error}")
        else:
            done = "Paused" if action == "pause" else "Resumed"
            messages.success(request, f"{done} {shown} for every worker.")
        return HttpResponseRedirect(admin_url(self.admin_site, "django_xjobs_job_queues"))

    def queue_control_view(
        self, request: HttpRequest, queue: str, action: str
    ) -> HttpResponseRedirect:
        """The queues page's Pause / Resume buttons: the same operator calls as ``xjobs pause``
        and ``xjobs resume``, by a POST from a user holding ``change_job`` (SPEC CTRL-06)."""
        if action not in ("pause", "resume", "limit"):
            raise Http404
        require_permission(self, request, "change")
        if action == "limit":  # the same call as xjobs limit: a cap, or none when left empty
            return self._set_limit(request, queue)
        call = operations.pause_queue if action == "pause" else operations.resume_queue
        try:
            call(queue, by=f"admin:{request.user}")
        except XJobsError as error:
            messages.error(request, f"{action} {queue}: {error}")
        else:
            done = "Paused" if action == "pause" else "Resumed"
            messages.success(request, f"{done} queue {queue} for every worker.")
        return HttpResponseRedirect(admin_url(self.admin_site, "django_xjobs_job_queues"))

    def cron_control_view(
        self, request: HttpRequest, cron: str, action: str
    ) -> HttpResponseRedirect:
        """The crons page's Pause / Resume / Run now buttons: the calls ``xjobs cron`` makes, by
        a POST from a user holding ``change_job`` (SPEC CRONCTL-06). Run now carries the key the
        page rendered into its form, so a double click enqueues once (CRONCTL-04)."""
        from ..operations import cron_controls

        if action not in ("pause", "resume", "run"):
            raise Http404
        require_permission(self, request, "change")
        by = f"admin:{request.user}"
        try:
            if action == "run":
                run = cron_controls.run_cron_now(cron, key=request.POST.get("key") or None, by=by)
            elif action == "pause":
                cron_controls.pause_cron(cron, by=by)
            else:
                cron_controls.resume_cron(cron, by=by)
        except XJobsError as error:
            messages.error(request, f"{action} {cron}: {error}")
        else:
            if action != "run":
                done = "Paused" if action == "pause" else "Resumed"
                messages.success(request, f"{done} cron {cron}.")
            elif run.deduped:
                messages.info(request, f"Cron {cron} already ran for this click: nothing enqueued.")
            else:
                messages.success(request, f"Ran cron {cron} now: {len(run.job_ids)} job(s).")
        return HttpResponseRedirect(admin_url(self.admin_site, "django_xjobs_job_crons"))

    def _set_limit(self, request: HttpRequest, queue: str) -> HttpResponseRedirect:
        given = str(request.POST.get("limit", "")).strip()
        try:
            cap = parse_cap(given or "off")
            set_queue_limit(queue, cap, by=f"admin:{request.user}")
        except XJobsError as error:
            messages.error(request, f"limit {queue}: {error}")
        else:
            done = f"at most {cap} runs at once" if cap is not None else "no cap"
            messages.success(request, f"Queue {queue}: {done}, for every worker.")
        return HttpResponseRedirect(admin_url(self.admin_site, "django_xjobs_job_queues"))

    def crons_view(self, request: HttpRequest) -> TemplateResponse:
        """Every registered cron: its schedule and policy, paused or not, last firing, next 5
        fire times, and (with ``change_job``) Pause / Resume / Run now."""
        from ..declarations.cron import registered_crons
        from ..ids import uuid7
        from ..operations.cron_controls import next_fires
        from ..scheduler.role import last_fired

        self._viewable(request)
        alias = conf.get().database
        fired = dict(SchedulerState.objects.using(alias).values_list("task_name", "last_fired_at"))
        paused = {c.cron: c for c in get_driver().scheduler().cron_controls() if c.paused}
        now = timezone.now()
        crons = []
        for handle in registered_crons():
            next_run = handle.next_occurrence(now)
            control = paused.get(handle.name)
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
                    "next_fires": [
                        f"{t.astimezone(handle.zone):%Y-%m-%d %H:%M:%S} {handle.tz}"
                        for t in next_fires(handle, now)
                    ],
                    "paused": control is not None,
                    "paused_by": control.paused_by if control else None,
                    "paused_at": control.paused_at if control else None,
                    "control": admin_url(
                        self.admin_site,
                        "django_xjobs_job_cron_control",
                        handle.name,
                        "resume" if control else "pause",
                    ),
                    "run": admin_url(
                        self.admin_site, "django_xjobs_job_cron_control", handle.name, "run"
                    ),
                }
            )
        context = self._page(
            request,
            "Cron schedules",
            page="crons",
            crons=crons,
            # the buttons only for who may press them; the view checks again (CRONCTL-06)
            can_control=has_permission(self, request, "change"),
            # one key per rendered page: a double click on Run now sends it twice (CRONCTL-04)
            run_key=f"admin-{uuid7()}",
            leader=leader_row(alias),
            # watermarks of crons this code no longer declares (renamed or removed)
            orphans=sorted(fired.items()),
        )
        return TemplateResponse(request, "django_xjobs/admin/crons.html", context)


def limit_keys_shown(request: HttpRequest) -> list[KeyUseReport]:
    """``inspect_limits()`` as the viewer may see it: a key is made from a run's inputs, so
    without ``view_job_payload`` it shows the template it was rendered from, never the values
    (``redact.key_shown``, as the job page shows an idempotency key)."""
    rows = inspect_limits()
    if sees_payloads(request):
        return rows
    shown = []
    for row in rows:
        declared = registry.jobs.get(row.job)
        template = None if declared is None or declared.limits is None else declared.limits.key
        shown.append(replace(row, key=redact.key_shown(row.key, template, values=False)))
    return shown


def job_pauses_shown(request: HttpRequest) -> list[dict[str, Any]]:
    """``inspect_job_pauses()`` for the queues page: a key is made from a run's inputs, so
    without ``view_job_payload`` it shows its template, and no Resume button carries it."""
    shown = []
    for pause in inspect_job_pauses():
        key, resumable = pause.key, True
        if key is not None and not sees_payloads(request):
            declared = registry.jobs.get(pause.job)
            template = None if declared is None or declared.limits is None else declared.limits.key
            key, resumable = redact.key_shown(key, template, values=False), False
        shown.append({**pause.to_json(), "key": key, "resumable": resumable})
    return shown


class Navigated(_ModelAdmin):
    """Every page of the app, its lists and its rows' pages, opens with the same links, in the
    place Django's own pages put their tools (issue 42: the batch pages and the rows' pages had
    none)."""

    change_list_template = "django_xjobs/admin/change_list.html"
    change_form_template = "django_xjobs/admin/change_form.html"

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, object] | None = None
    ) -> HttpResponse:
        nav = nav_links(self.admin_site, request)
        response: HttpResponse = super().changelist_view(request, {**nav, **(extra_context or {})})
        return response

    def render_change_form(
        self,
        request: HttpRequest,
        context: Mapping[str, object],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: object = None,
    ) -> HttpResponse:
        context = {**context, **nav_links(self.admin_site, request)}
        response: HttpResponse = super().render_change_form(
            request, context, add, change, form_url, obj
        )
        return response


def _listed(jobs_url: str, routed: bool, row: Mapping[str, object], **more: str) -> str:
    """The job list filtered to a queue's row: with jobs in several databases, in its alias
    (the list reads one database at a time, SPEC SHARD-24)."""
    where = {"queue__exact": str(row["queue"]), **more}
    if routed:
        where = {DATABASE_PARAM: str(row["alias"]), **where}
    return f"{jobs_url}?{urlencode(where)}"


def parked_unknown() -> Q:
    """The rows ``execute`` parks when it finds no job registered under their name."""
    return Q(state=JobState.SUSPENDED, last_error__startswith=UNKNOWN_CODE)


def leader_row(alias: str) -> dict[str, Any] | None:
    """The scheduler's leadership row, with whether its lease is still running."""
    from ..drivers.contract import LEADER_KEY

    alive = ExpressionWrapper(Q(expires_at__gt=Now()), output_field=BooleanField())
    row = (
        SchedulerLeader.objects.using(alias)
        .filter(lock_key=LEADER_KEY)
        .annotate(is_live=alive)
        .values("holder", "expires_at", "is_live")
        .first()
    )
    return None if row is None else dict(row)


def _dead(database: str, bound: int) -> int:
    """The dead letters in ``database``, counted up to ``bound``."""
    rows = Job.objects.using(database).filter(state=JobState.DEAD)
    dead = rows.order_by().values("pk")[:bound].count()  # unsorted: any 10,001
    if dead < bound:  # HIST-14: and those moved to the history, to the same bound
        moved = JobHistory.objects.using(database).filter(state=JobState.DEAD)
        dead += moved.order_by().values("pk")[: bound - dead].count()
    return dead


def _shown(count: int) -> str:
    return f"{DEAD_SHOWN:,}+" if count > DEAD_SHOWN else str(count)


def dead_letters() -> dict[str, int]:
    """With jobs in several databases, the dead letters of each database that has some, each
    counted up to the bound; one that does not answer is left out (the queues page names it,
    SHARD-22), the jobs database's error passes."""
    routing = conf.get().routing
    assert routing is not None
    found: dict[str, int] = {}
    for database in routing.aliases:
        try:
            count = _dead(database, DEAD_SHOWN + 1)
        except Exception as error:
            if database == routing.default or not is_down(error):
                raise
            continue
        if count:
            found[database] = count
    return found


def admin_url(site: admin.AdminSite, name: str, *args: Any) -> str:
    return reverse(f"{site.name}:{name}", args=args, current_app=site.name)


def nav_links(site: admin.AdminSite, request: HttpRequest) -> dict[str, Any]:
    """The links every page of the app shows: one click to each view, and to the dead letters;
    only those the user may open (a page needs its model's view permission)."""
    from ..models import Backfill, JobBatch, JobEvent, OutboxEntry, SchedulerState, Worker

    jobs = admin_url(site, "django_xjobs_job_changelist")
    # counted up to a bound: every page shows it, and 500,000 dead rows took 0.1-0.2 s to count;
    # on the read database when one is set, whatever the page reads (SPEC READ-10)
    found = dead_letters() if conf.get().routing is not None else None
    if found is None:
        dead = _dead(figures_database() or conf.get().database, DEAD_SHOWN + 1)
    else:
        dead = sum(found.values())
    dead_links = [(Job, f"Dead letters ({_shown(dead)})", f"{jobs}?state__exact=dead")]
    if found:  # each link opens the list of the database its count is from (SPEC SHARD-54)
        dead_links = [
            (
                Job,
                f"Dead letters ({_shown(count)})"
                if len(found) == 1
                else f"Dead letters in {alias} ({_shown(count)})",
                f"{jobs}?{urlencode({DATABASE_PARAM: alias, 'state__exact': 'dead'})}",
            )
            for alias, count in found.items()
        ]
    links = [
        (Job, "Jobs", jobs),
        (Job, "Overview", admin_url(site, "django_xjobs_job_overview")),
        (Job, "Queues", admin_url(site, "django_xjobs_job_queues")),
        *dead_links,
        (Job, "Cron schedules", admin_url(site, "django_xjobs_job_crons")),
        (JobBatch, "Batches", admin_url(site, "django_xjobs_jobbatch_changelist")),
        (JobEvent, "Events", admin_url(site, "django_xjobs_jobevent_changelist")),
        (OutboxEntry, "Outbox", admin_url(site, "django_xjobs_outboxentry_changelist")),
        (JobLease, "Fleet slots", admin_url(site, "django_xjobs_joblease_changelist")),
        (Worker, "Workers", admin_url(site, "django_xjobs_worker_changelist")),
        (Backfill, "Backfills", admin_url(site, "django_xjobs_backfill_changelist")),
        (
            SchedulerState,
            "Scheduler states",
            admin_url(site, "django_xjobs_schedulerstate_changelist"),
        ),
    ]
    registry = site._registry
    return {
        "xjobs_nav": [
            (label, url)
            for model, label, url in links
            if model in registry and registry[model].has_view_permission(request)
        ],
        "xjobs_dead": dead,
    }
