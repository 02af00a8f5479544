"""The admin's workers page (issues 23, 42): each worker process, alive, lapsed or exited, with
the jobs it runs now and since when; a worker gone a while is aged out of the list (its row
stays a day, for the crash verdicts of its runs). ``WorkerAdmin`` mixes ``WorkerColumns`` in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.contrib import admin
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.db.models.functions import Now
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from .. import conf, operations
from ..drivers.routing.surface import is_down
from ..durations import format_span, format_time
from ..models import Job, JobState, Worker
from .job import badge, time_column_of
from .pages import admin_url
from .rows import ViewOnly

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic to the type checker only
    _ModelAdmin = admin.ModelAdmin

#: how long the workers page keeps a worker that lapsed or exited, unless asked for every row
#: (its row stays a day: a later claim judges its runs' lapses by it)
GONE_SHOWN = timedelta(minutes=15)
#: runs a worker's row names, at most
RUNS_SHOWN = 5


class WorkerAliveFilter(admin.SimpleListFilter):
    """Alive workers, and those gone a short while: a worker that exited an hour ago is history,
    not fleet (issue 42); "every row" shows them all."""

    title = "presence"
    parameter_name = "alive"

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        return [
            ("yes", "alive"),
            ("no", "lapsed or exited"),
            ("all", "every row, however long gone"),
        ]

    def choices(self, changelist: Any) -> Any:
        for choice in super().choices(changelist):
            if choice["query_string"] == changelist.get_query_string(remove=[self.parameter_name]):
                choice["display"] = (
                    f"alive, or gone in the last {format_span(GONE_SHOWN.total_seconds())}"
                )
            yield choice

    def queryset(self, request: HttpRequest, queryset: QuerySet[Worker]) -> QuerySet[Worker]:
        if self.value() == "yes":
            return queryset.filter(expires_at__gte=Now(), stopped_at__isnull=True)
        if self.value() == "no":
            return queryset.filter(Q(expires_at__lt=Now()) | Q(stopped_at__isnull=False))
        if self.value() == "all":
            return queryset
        return queryset.filter(expires_at__gte=Now() - GONE_SHOWN)


def held_runs(worker_id: str) -> list[tuple[UUID, str, datetime | None]]:
    """The runs worker ``worker_id`` holds, oldest first, up to one past ``RUNS_SHOWN``: with
    jobs in several databases, those of each that answers (SPEC SHARD-53). The list of workers
    itself reads ``XJOBS["DATABASE"]``: a worker's presence is written to every database, and
    never passes over the jobs database."""
    routing = conf.get().routing
    runs: list[tuple[UUID, str, datetime | None]] = []
    for database in (conf.get().database,) if routing is None else routing.aliases:
        rows = (
            Job.objects.using(database)
            .filter(state=JobState.RUNNING, claimed_by=worker_id)
            .order_by("last_attempted_at", "id")
            .values_list("id", "name", "last_attempted_at")[: RUNS_SHOWN + 1]
        )
        try:
            runs += list(rows)
        except Exception as error:  # one database down: the others' runs are still named
            if routing is None or not is_down(error):
                raise
    late = datetime.max.replace(tzinfo=UTC)  # NULLS LAST, as the database sorts them
    return sorted(runs, key=lambda run: (run[2] or late, str(run[0])))[: RUNS_SHOWN + 1]


class WorkerColumns(_ModelAdmin):
    def get_queryset(self, request: HttpRequest) -> QuerySet[Worker]:
        alive = ExpressionWrapper(Q(expires_at__gte=Now()), output_field=BooleanField())
        rows: QuerySet[Worker] = super().get_queryset(request).annotate(is_alive=alive)
        return rows

    @admin.display(description="queues")
    def queue_list(self, obj: Worker) -> str:
        return ", ".join(obj.queues)

    def alive(self, obj: Worker) -> bool:
        return bool(getattr(obj, "is_alive", False)) and obj.stopped_at is None

    @admin.display(description="state", ordering="is_alive")
    def worker_state(self, obj: Worker) -> str:
        """Alive, lapsed, or exited: gone past its shutdown timeout with runs in flight."""
        state = operations.worker_state(self.alive(obj), obj.stopped_at)
        colour = {"alive": "running", "lapsed": "delayed", "exited": "failed"}[state]
        return format_html('<span class="xjobs-worker-{}">{}</span>', state, badge(colour, state))

    @admin.display(description="runs now")
    def runs_now(self, obj: Worker) -> str:
        """The jobs it holds now, each linked, and since when it runs them."""
        runs = held_runs(obj.id)
        if not runs:
            return "-"
        now = timezone.now()
        items = format_html_join(
            "",
            '<li class="xjobs-run"><a href="{}">{}</a> since {} ({})</li>',
            (
                (
                    admin_url(self.admin_site, "django_xjobs_job_change", job_id),
                    name,
                    format_time(since) if since else "-",
                    format_span((now - since).total_seconds()) if since else "-",
                )
                for job_id, name, since in runs[:RUNS_SHOWN]
            ),
        )
        more = (
            format_html(
                '<li>and more: <a href="{}?state__exact=running">the running jobs</a></li>',
                admin_url(self.admin_site, "django_xjobs_job_changelist"),
            )
            if len(runs) > RUNS_SHOWN
            else ""
        )
        return format_html(
            '<ul class="xjobs-runs-now" style="margin:0;padding-left:1em">{}{}</ul>', items, more
        )

    started_shown = time_column_of(Worker, "started_at")
    last_seen_shown = time_column_of(Worker, "last_seen")
    expires_shown = time_column_of(Worker, "expires_at")
    stopped_shown = time_column_of(Worker, "stopped_at")


class WorkerAdmin(WorkerColumns, ViewOnly):
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
