"""What a job page shows of a run's history: the failed attempts (tracebacks folding open), the
snoozes, the step timeline with its "retry from here" buttons; and how payloads, previews and
idempotency keys are printed for a viewer with or without the payload permission."""

from __future__ import annotations

import json
from datetime import datetime
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from .. import crypt, operations, redact
from ..durations import format_time
from ..models import Job
from ..payload import JSONValue
from .pages import admin_url
from .permissions import VIEWER as _viewer
from .permissions import has_permission, sees_payloads

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic to the type checker only
    _ModelAdmin = admin.ModelAdmin


#: steps the timeline shows, the latest: a run may hold up to MAX_STEPS_PER_RUN of them
TIMELINE_STEPS = 200


class JobTrace(_ModelAdmin):
    """The job page's failed attempts and step timeline, read through ``inspect_job``."""

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


def _preview(value: object, values: bool) -> str:
    try:
        text = json.dumps(redact.mask(value) if values else shape(value), ensure_ascii=False)
    except RecursionError:
        return TOO_DEEP
    return text if len(text) <= 60 else text[:57] + "..."


def payload_text(value: object) -> str:
    """A payload as the viewer may see it: its values (secret keys masked) with the payload
    permission, else its shape."""
    try:
        if sees_payloads(_viewer.get()):
            return json.dumps(redact.mask(value), indent=2, ensure_ascii=False)
        return json.dumps(shape(value), indent=2, ensure_ascii=False)
    except RecursionError:
        return TOO_DEEP


def key_text(name: str, key: str) -> str:
    """A job's idempotency key as the viewer may see it: it is made from the inputs, so without
    the payload permission the template it was made from (``operations.key_shown``, the one
    rule the queues page's limit keys follow too)."""
    return operations.key_shown(
        SimpleNamespace(name=name, idempotency_key=key), values=sees_payloads(_viewer.get())
    )


def shape(value: object, depth: int = 0) -> JSONValue:
    """What a payload holds without what it says: its keys, each value's type and size."""
    if crypt.is_sealed(value):  # its shape is that of what it seals (SPEC CRYPT-04)
        value = crypt.shown(value)
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
