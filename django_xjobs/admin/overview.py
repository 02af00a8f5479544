"""The admin's fleet overview page (issue 30): per queue and job name over the last hour or day,
what ended per slot as inline SVG bars, failure rate, wait and run-time p50 / p95 from the
rollup, each queue's depth over time from the samples the workers take once a minute, current
depth, the top failing jobs with their latest error, live workers and their
load. Every number links to the filtered job list behind it. No JavaScript: the page refreshes
itself with a meta refresh, which ``?refresh=off`` turns off."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import admin
from django.http import HttpRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils import timezone
from django.utils.safestring import mark_safe

from .. import conf, operations
from ..drivers import get_driver
from ..drivers.reading import ReadSource, reading
from ..drivers.routing.surface import per_alias
from ..metrics.depths import queue_depths
from ..metrics.overview import DEPTH, WINDOWS, Figures, chart, overview, seconds_text
from ..models import Job, Overview
from .filters import DATABASE_PARAM
from .pages import OverviewPages, admin_url

#: seconds between refreshes while auto-refresh is on
REFRESH = 30
TOP_FAILING = 5


class FleetOverview(OverviewPages):
    """``job/overview/``, framed and permission-checked (the view permission) by
    ``OverviewPages._page`` like the queues page; ``JobAdmin`` mixes it in."""

    def overview_view(self, request: HttpRequest) -> TemplateResponse:
        self._viewable(request)  # before any read (issue 40)
        # every figure of the page from one database, the read one when set, and how old they
        # are (SPEC READ-01, READ-02)
        with reading(fallback=True) as source:
            return self._overview(request, source)

    def _overview(self, request: HttpRequest, source: ReadSource) -> TemplateResponse:
        window = request.GET.get("window", "1h")
        window = window if window in WINDOWS else "1h"
        refresh = request.GET.get("refresh") != "off"
        figures = overview(window, timezone.now())
        jobs_url = admin_url(self.admin_site, "django_xjobs_job_changelist")
        here = admin_url(self.admin_site, "django_xjobs_job_overview")
        split = per_alias(get_driver(), queue_depths)  # SPEC SHARD-23: each database apart
        depth: dict[tuple[str | None, str], dict[str, Any]]
        if split is None:
            depth = {(None, q["queue"]): dict(q) for q in operations.inspect_queues()["queues"]}
        else:
            depth = {(a.alias, q["queue"]): q for a in split for q in a.answer or []}
        down = dict(figures.down)
        down.update({a.alias: a.problem or "" for a in split or [] if a.answer is None})
        workers = [w for w in operations.inspect_workers() if w["alive"]]
        queues = sorted(
            set(depth) | {(f.alias, f.queue) for f in figures.queues},
            key=lambda k: (k[1], k[0] or ""),
        )
        by_queue = {(f.alias, f.queue): f for f in figures.queues}
        # every chart of the page on one time axis, each slot's tooltip naming its minute
        axis: dict[str, Any] = {"starts": figures.slot_starts, "slot": WINDOWS[window][1]}
        rows = [
            _row(
                by_queue.get(k) or Figures(k[1], None, slots=[], alias=k[0]),
                jobs_url,
                depth.get(k),
                axis,
            )
            for k in queues
        ]
        job_rows = [_row(f, jobs_url, None, axis) for f in figures.jobs]
        failing = sorted(
            (f for f in figures.jobs if f.total - f.done), key=lambda f: f.done - f.total
        )[:TOP_FAILING]
        alias = source.database or conf.get().database
        top = [
            {
                **_row(f, jobs_url, None),
                "latest_error": Job.objects.using(f.alias or alias)
                .filter(queue=f.queue, name=f.name, last_error__isnull=False)
                .order_by("-updated_at")
                .values_list("last_error", flat=True)
                .first(),
            }
            for f in failing
        ]
        context = self._page(
            request,
            "Overview",
            page="overview",
            window=window,
            windows=[(w, f"{here}?{urlencode({'window': w})}") for w in WINDOWS],
            since=figures.since,
            refresh=REFRESH if refresh else None,
            refresh_toggle=f"{here}?{urlencode({'window': window, 'refresh': 'on' if not refresh else 'off'})}",
            rows=rows,
            depth_rows=[
                {
                    "queue": d.queue,
                    "alias": d.alias,
                    "chart": mark_safe(chart(d.slots, width=480, series=DEPTH, **axis)),
                    "latest": d.latest,
                    "links": _row(Figures(d.queue, None, alias=d.alias), jobs_url, None)["links"],
                }
                for d in figures.depth
            ],
            job_rows=job_rows,
            top=top,
            workers=workers,
            workers_url=admin_url(self.admin_site, "django_xjobs_worker_changelist"),
            in_flight=sum(w["in_flight"] for w in workers),
            read_note=_read_note(source),
            read_problem=source.problem is not None,
            routed=split is not None,
            down=sorted(down.items()),
        )
        return TemplateResponse(request, "django_xjobs/admin/overview.html", context)


def _read_note(source: ReadSource) -> str:
    """How old the page's figures are: current from the jobs database, or a standby's lag."""
    return source.note() or (
        f"Figures current: read from the jobs database {source.database!r}."
        if source.database
        else "Figures current."
    )


def _row(
    figures: Figures,
    jobs_url: str,
    depth: dict[str, Any] | None,
    axis: dict[str, Any] | None = None,
) -> dict[str, Any]:
    where = {"queue__exact": figures.queue}
    if figures.alias is not None:  # the list reads one database at a time (SPEC SHARD-24)
        where = {DATABASE_PARAM: figures.alias, **where}
    if figures.name is not None:
        where["name__exact"] = figures.name

    def link(**extra: str) -> str:
        return f"{jobs_url}?{urlencode({**where, **extra})}"

    rate = figures.failure_rate
    return {
        "queue": figures.queue,
        "alias": figures.alias,
        "name": figures.name,
        "done": figures.done,
        "failed": figures.retried + figures.failed,
        "dead": figures.dead,
        "total": figures.total,
        "rate": "-" if rate is None else f"{rate:.0%}",
        "run_p50": seconds_text(figures.run_p50),
        "run_p95": seconds_text(figures.run_p95),
        "wait_p50": seconds_text(figures.wait_p50),
        "wait_p95": seconds_text(figures.wait_p95),
        "chart": mark_safe(chart(figures.slots, **(axis or {}))) if figures.slots else "",
        "depth": depth,
        "links": {
            "all": link(),
            "done": link(state__exact="done"),
            "failed": link(),
            "dead": link(state__exact="dead"),
            "ready": link(state__exact="ready"),
            "delayed": link(state__exact="delayed"),
            "running": link(state__exact="running"),
        },
    }


if TYPE_CHECKING:
    _OverviewAdmin = admin.ModelAdmin[Overview]
else:  # ModelAdmin is generic to the type checker only
    _OverviewAdmin = admin.ModelAdmin


class OverviewEntry(_OverviewAdmin):
    """The overview's entry on the admin index (issue 42): its list is the overview page, seen by
    who may view jobs; nothing else is behind it."""

    def _jobs(self, request: HttpRequest) -> bool:
        jobs = self.admin_site._registry.get(Job)
        return jobs is not None and bool(jobs.has_view_permission(request))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._jobs(request)

    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return obj is None and self._jobs(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.changelist_view)
        return [path("", view, name="django_xjobs_overview_changelist")]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, object] | None = None
    ) -> HttpResponseRedirect:
        if not self.has_view_permission(request):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        return HttpResponseRedirect(admin_url(self.admin_site, "django_xjobs_job_overview"))
