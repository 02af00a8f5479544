"""What the job page opens with (issues 30, 42): one header block above the fold — the state as
a coloured badge, the stop reason, the last error, the attempt, why it is not running (every
cause ``why_job`` finds, checked against the store) and when its next attempt is due — then the
rest of the row below. ``JobAdmin`` mixes ``JobExplained`` in."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db import models
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from ..durations import format_span, format_time
from ..errors import JobNotFoundError
from ..models import Job, JobState
from ..operations.why import why_job
from ..run.controls import fraction, progress_text
from ..states import WAITING_STATES, after_dependencies, shown_attempt, shown_state
from ..text import MESSAGE_LIMIT, cap

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:
    _ModelAdmin = admin.ModelAdmin

#: badge colours by shown state: green for done, amber for waiting on something, red for
#: stopped for good, blue for running; text stays dark on light for contrast
BADGE = {
    "done": ("#1b5e20", "#e8f5e9"),
    "ready": ("#0d47a1", "#e3f2fd"),
    "delayed": ("#6d4c00", "#fff8e1"),
    "running": ("#01579b", "#b3e5fc"),
    "suspended": ("#4a148c", "#f3e5f5"),
    "failed": ("#b71c1c", "#ffebee"),
    "dead": ("#ffffff", "#c62828"),
    "cancelled": ("#424242", "#eeeeee"),
}
#: characters of the last error the header shows; the whole text is in the history below
HEADER_ERROR = 600


def badge(state: str, shown: object = None) -> str:
    """``shown`` (default: ``state``) in a pill coloured for ``state``."""
    fg, bg = BADGE.get(state, ("#000000", "#eeeeee"))
    return format_html(
        '<span class="xjobs-state xjobs-state-{}" style="color:{};background:{};'
        'padding:1px 8px;border-radius:9px;white-space:nowrap">{}</span>',
        state,
        fg,
        bg,
        state if shown is None else shown,
    )


def progress_short(progress: dict[str, object] | None) -> str:
    """A stored ``ctx.progress`` as the job list prints it: "3/10", or "3" without a total."""
    if not progress:
        return ""
    done, total = progress.get("done"), progress.get("total")
    text = f"{done:g}" if isinstance(done, int | float) else str(done)
    return f"{text}/{total:g}" if isinstance(total, int | float) and total else text


def state_of(obj: Job) -> str:
    """The one state word of a row: a waiting row is ready once due, delayed until then."""
    return shown_state(obj.state, obj.run_at, timezone.now())


def attempt_text(obj: Job) -> str:
    started = obj.started_at is not None
    attempt = f"{shown_attempt(obj.state, obj.attempt, started)} of {obj.max_attempts}"
    if obj.state == JobState.SUSPENDED and started:
        return f"{attempt} (parked: it spends no attempt)"
    return attempt


def when_text(value: datetime | None) -> str:
    """A time of the row, to the second in one format; a dependant's far future in words."""
    if value is None:
        return "-"
    if after_dependencies(value):
        return "runs after its dependencies"
    return format_time(value)


def next_attempt_text(obj: Job) -> str:
    """When a waiting job is due: "in 7m 0s, at 2026-12-06 19:24:20 UTC"."""
    if obj.state not in (*WAITING_STATES, JobState.SUSPENDED):
        return "-"
    if after_dependencies(obj.run_at):
        return "runs after its dependencies"
    now = timezone.now()
    if obj.run_at <= now:
        return f"due now (since {format_time(obj.run_at)})"
    return f"in {format_span((obj.run_at - now).total_seconds())}, at {format_time(obj.run_at)}"


def time_column_of(model: type[models.Model], field: str) -> Callable[[object, object], str]:
    """A time of a row as a column or field, labelled as the model labels it: to the second,
    one format (``format_time``), where Django's own shows minutes."""

    def shown(model_admin: object, obj: object) -> str:
        return when_text(getattr(obj, field))

    shown.__name__ = f"{field}_shown"
    label = str(getattr(model._meta.get_field(field), "verbose_name", field))
    return admin.display(description=label, ordering=field)(shown)


def time_column(field: str) -> Callable[[object, object], str]:
    """``time_column_of`` a job's field."""
    return time_column_of(Job, field)


#: the row's times the page and the list show through ``time_column``, by the field they show
TIMES = {
    "run_at_shown": "run_at",
    "created_shown": "created_at",
    "started_shown": "started_at",
    "last_attempted_shown": "last_attempted_at",
    "updated_shown": "updated_at",
    "visible_shown": "visible_at",
    "expires_shown": "expires_at",
}


def time_help() -> dict[str, str]:
    """The model fields' help texts, for the fields ``time_column`` shows in their place."""
    found = {
        name: str(getattr(Job._meta.get_field(field), "help_text", ""))
        for name, field in TIMES.items()
    }
    return {name: text for name, text in found.items() if text}


class JobExplained(_ModelAdmin):
    run_at_shown = time_column("run_at")
    created_shown = time_column("created_at")
    started_shown = time_column("started_at")
    last_attempted_shown = time_column("last_attempted_at")
    updated_shown = time_column("updated_at")
    visible_shown = time_column("visible_at")
    expires_shown = time_column("expires_at")

    def get_form(self, request: Any, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        # the help texts of the fields the times stand in for (a readonly callable has none)
        kwargs["help_texts"] = {**time_help(), **kwargs.get("help_texts", {})}
        return super().get_form(request, obj, change, **kwargs)

    @admin.display(description="version")
    def version_shown(self, obj: Job) -> str:
        """The version of its job's code the run started under (issue 44): a run claimed
        before runs recorded one reads as 1, one never claimed has none yet."""
        if obj.version is None and obj.started_at is None:
            return "- (stamped at its first claim)"
        version = 1 if obj.version is None else obj.version
        return f"{version} (parked by a worker of a newer version)" if obj.parked else str(version)

    @admin.display(description="progress")
    def progress_column(self, obj: Job) -> str:
        """The list's progress (issue 30): a short bar and "3/10" for a job that reports it,
        with the whole text (share and note) on hover, so a long note cannot widen the list;
        blank for a job that does not."""
        if not obj.progress:
            return ""
        share, whole = fraction(obj.progress), progress_text(obj.progress)
        if share is None:
            return format_html('<span title="{}">{}</span>', whole, progress_short(obj.progress))
        return format_html(
            '<span class="xjobs-progress-cell" title="{}" style="white-space:nowrap">'
            '<progress value="{}" max="100" style="width:4em">{}</progress> {}</span>',
            whole,
            round(share * 100),
            whole,
            progress_short(obj.progress),
        )

    def why_list(self, obj: Job) -> str:
        """Each cause ``why_job`` finds, for a job in any state."""
        try:
            reasons = why_job(obj.pk).reasons
        except JobNotFoundError:  # gone between the page's read and this one
            return "-"
        if not reasons:
            return format_html(
                '<ul class="xjobs-why"><li data-code="">{}</li></ul>',
                "nothing holds it: it is due and a worker watches its queue",
            )
        return format_html(
            '<ul class="xjobs-why">{}</ul>',
            format_html_join("", '<li data-code="{}">{}</li>', ((r.code, r.text) for r in reasons)),
        )

    def job_header(self, obj: Job) -> str:
        """The block the page opens with: what an operator looks for first, in one place."""
        state = state_of(obj)
        error = obj.last_error or ""
        shown_error = error if len(error) <= HEADER_ERROR else error[: HEADER_ERROR - 1] + "…"
        error_html = (
            format_html(
                '<pre class="xjobs-last-error" title="{}">{}</pre>',
                cap(error, MESSAGE_LIMIT),
                shown_error,
            )
            if error
            else "-"
        )
        cells = [
            ("state", "State", self.state_badge(obj, state), False),
            ("attempt", "Attempt", attempt_text(obj), False),
            ("stop-reason", "Stop reason", obj.stop_reason or "-", False),
            ("next-attempt", "Next attempt", next_attempt_text(obj), False),
            ("last-error", "Last error", error_html, True),
            ("why", self.why_label(obj), self.why_list(obj), True),
        ]
        return format_html(
            '<div id="xjobs-job-header" class="module"><dl class="xjobs-header">{}</dl></div>',
            format_html_join(
                "",
                '<div class="xjobs-h xjobs-h-{}{}"><dt>{}</dt><dd>{}</dd></div>',
                (
                    (key, " xjobs-wide" if wide else "", label, value)
                    for key, label, value, wide in cells
                ),
            ),
        )

    def why_label(self, obj: Job) -> str:
        if obj.state == JobState.RUNNING:
            return "Where it runs"
        if obj.state in (JobState.DONE, JobState.DEAD, JobState.FAILED, JobState.CANCELLED):
            return "How it ended"
        return "Why it is not running"

    def state_badge(self, obj: Job, state: str) -> str:
        return badge(state)
