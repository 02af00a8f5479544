"""The operator's hands on jobs in the admin: the Retry, Cancel and Run now buttons of a job page,
the views they post to (each checks the change permission again) and the job list's actions on
the selected rows (one bulk call over their ids), all through ``django_xjobs.operations``; a refused call says why in the admin's terms."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponseRedirect
from django.utils import timezone
from django.utils.html import format_html_join

from .. import operations
from ..drivers.contract import BulkVerb
from ..errors import JobNotCancellableError, JobNotRetryableError, XJobsError
from ..models import Job
from ..operations.bulk import VERB_STATES
from ..states import WAITING_STATES
from .pages import admin_url
from .permissions import VIEWER as _viewer
from .permissions import has_permission, require_permission

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic to the type checker only
    _ModelAdmin = admin.ModelAdmin


#: the jobs a bulk action's summary names, at most (past that it counts them)
SUMMARY_NAMES = 3


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


class JobActions(_ModelAdmin):
    """Retry, cancel and run now: the job page's buttons, their views and the list's bulk
    actions, each the same operator call as ``manage.py xjobs``, each checking the permission."""

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
            lambda: operations.retry_job(job.pk, from_step=step, by=f"admin:{request.user}"),
        )
        return HttpResponseRedirect(admin_url(self.admin_site, "django_xjobs_job_change", job.pk))

    def retry_view(self, request: HttpRequest, object_id: str) -> HttpResponseRedirect:
        """The job page's Retry button: the same operator call as ``xjobs retry``."""
        job = self._job_to_change(request, object_id)
        by = f"admin:{request.user}"  # the audit trail's actor (SPEC AUDIT-05)
        self._act(
            request, job, "retry", "Queued again", lambda: operations.retry_job(job.pk, by=by)
        )
        return HttpResponseRedirect(admin_url(self.admin_site, "django_xjobs_job_change", job.pk))

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponseRedirect:
        """The job page's Cancel button: the same operator call as ``xjobs cancel``."""
        job = self._job_to_change(request, object_id)
        reason, by = f"cancelled from the admin by {request.user}", f"admin:{request.user}"
        self._act(
            request,
            job,
            "cancel",
            "Cancelled",
            lambda: operations.cancel_job(job.pk, reason, by=by),
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
        self._act_many(request, queryset, "retry", "Queued again")

    @admin.action(description="Cancel selected jobs", permissions=["change"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._act_many(request, queryset, "cancel", "Cancelled")

    @admin.action(
        description="Run selected jobs now (delayed or scheduled)", permissions=["change"]
    )
    def run_now_selected(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        """One ``run_job_now`` per selected job: there is no bulk verb for it."""
        by = f"admin:{request.user}"
        went: list[Job] = []
        refused: dict[tuple[str, str], list[Job]] = {}
        for job in queryset:
            try:
                operations.run_job_now(job.pk, by=by)
            except XJobsError as error:
                refused.setdefault((error.code, _admin_hint(error, job.state)), []).append(job)
            else:
                self.log_change(request, job, "Made due now from the admin.")
                went.append(job)
        self._summary(request, "run", "Made due now", went, refused, 0)

    def _act_many(
        self, request: HttpRequest, queryset: QuerySet[Job], verb: BulkVerb, done: str
    ) -> None:
        """One bulk call over the selected ids (``retry_jobs``/``cancel_jobs`` with ``ids=``,
        SPEC BULK-13), one audit record, and one message for them all (issue 42): how many
        went through, and the rows the verb does not act on refused by the code its single-job
        verb gives, with the fix."""
        selected = list(queryset)
        acts_on = VERB_STATES[verb]
        refusal = JobNotRetryableError if verb == "retry" else JobNotCancellableError
        refused: dict[tuple[str, str], list[Job]] = {}
        for job in selected:
            if job.state not in acts_on:
                error = refusal("", hint="")
                refused.setdefault((error.code, _admin_hint(error, job.state)), []).append(job)
        eligible = [job for job in selected if job.state in acts_on]
        skipped = 0
        if eligible:
            by = f"admin:{request.user}"
            ids = [job.pk for job in eligible]
            if verb == "retry":
                result = operations.retry_jobs(ids=ids, by=by)
            else:
                reason = f"cancelled from the admin by {request.user}"
                result = operations.cancel_jobs(ids=ids, reason=reason, by=by)
            skipped = result.skipped
        now = dict(Job.objects.filter(pk__in=[j.pk for j in eligible]).values_list("pk", "state"))
        ended = "ready" if verb == "retry" else "cancelled"
        went = [job for job in eligible if now.get(job.pk) == ended]
        for job in went:
            self.log_change(request, job, f"{done} from the admin.")
        self._summary(request, verb, done, went, refused, skipped)

    def _summary(
        self,
        request: HttpRequest,
        verb: str,
        done: str,
        went: list[Job],
        refused: dict[tuple[str, str], list[Job]],
        skipped: int,
    ) -> None:
        total = len(went) + skipped + sum(len(jobs) for jobs in refused.values())
        parts = [f"{done} {len(went)} of {total} selected job{'s' if total != 1 else ''}"]
        if went and len(went) <= SUMMARY_NAMES:
            parts[0] += ": " + _named(went)
        if skipped:
            parts.append(
                f"Skipped {skipped}: they moved on meanwhile, or a live job holds their key"
            )
        parts += [
            f"Could not {verb} {len(jobs)}: {code} ({_named(jobs)}) — {hint}"
            for (code, hint), jobs in refused.items()
        ]
        text = ". ".join(parts)
        bad = refused or skipped
        self.message_user(request, text, messages.WARNING if bad else messages.SUCCESS)

    def _act(
        self, request: HttpRequest, job: Job, verb: str, done: str, act: Callable[[], object]
    ) -> None:
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


def _named(jobs: list[Job]) -> str:
    shown = ", ".join(f"{j.name} {j.pk}" for j in jobs[:SUMMARY_NAMES])
    return shown + (f" and {len(jobs) - SUMMARY_NAMES} more" if len(jobs) > SUMMARY_NAMES else "")
