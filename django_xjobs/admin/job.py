"""What the job page opens with (issue 30): the state as a coloured badge, why the job waits or
stopped (``why.why_job``, checked against the store), and when its next attempt is due, above
the step timeline and history. ``JobAdmin`` mixes ``JobExplained`` in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from ..durations import format_span
from ..models import Job, JobState
from ..operations.why import why_job
from ..run.controls import fraction, progress_text
from ..states import WAITING_STATES

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


def badge(state: str, shown: Any = None) -> str:
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


def progress_short(progress: dict[str, Any] | None) -> str:
    """A stored ``ctx.progress`` as the job list prints it: "3/10", or "3" without a total."""
    if not progress:
        return ""
    done, total = progress.get("done"), progress.get("total")
    text = f"{done:g}" if isinstance(done, int | float) else str(done)
    return f"{text}/{total:g}" if isinstance(total, int | float) and total else text


class JobExplained(_ModelAdmin):
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

    @admin.display(description="why it is not running")
    def why_waiting(self, obj: Job) -> str:
        """Each cause ``why_job`` finds, for a job that is not running or finished."""
        if obj.state not in (*WAITING_STATES, JobState.SUSPENDED):
            if obj.state == JobState.RUNNING:
                return f"running on {obj.claimed_by or '?'}"
            return f"it ended: {obj.state}" + (f" ({obj.stop_reason})" if obj.stop_reason else "")
        reasons = why_job(obj.pk).reasons
        if not reasons:
            return "nothing holds it: it is due and a worker watches its queue"
        return format_html(
            '<ul class="xjobs-why" style="margin:0;padding-left:1.2em">{}</ul>',
            format_html_join(
                "",
                '<li data-code="{}">{}</li>',
                ((r.code, r.text) for r in reasons),
            ),
        )

    @admin.display(description="next attempt")
    def next_attempt(self, obj: Job) -> str:
        """When a waiting job is due: "in 7m, at 19:24:20" (the admin's time zone)."""
        if obj.state not in (*WAITING_STATES, JobState.SUSPENDED):
            return "-"
        now = timezone.now()
        local = timezone.localtime(obj.run_at)
        if obj.run_at <= now:
            return f"due now (since {local:%H:%M:%S})"
        return f"in {format_span((obj.run_at - now).total_seconds())}, at {local:%Y-%m-%d %H:%M:%S}"
