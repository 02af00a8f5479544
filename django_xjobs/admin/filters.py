"""The job list's filters by what a job carries (issue 45): ``?input={...}``, a JSON object the
input contains, and ``?error_code=X_...``, the code at the start of ``last_error`` — the same
filter fields as ``xjobs ls --input/--error-code`` and the bulk verbs, checked the same way.
Each shows in the sidebar while it is given (with a link that clears it); the search box takes
``input:{...}`` and ``error:CODE`` too."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from ..errors import JobFilterError
from ..models import Job
from ..operations import job_filter


class _Carried(admin.SimpleListFilter):
    """A filter given as text in the URL: listed as its one value while it is given."""

    field = ""

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        value = self.value()
        return [] if value is None else [(value, value)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        if value is None:
            return queryset
        try:
            return carried(queryset, **{self.field: value})
        except JobFilterError as error:  # one line with its fix; nothing listed
            messages.warning(request, f"{error.code}: {error.message} — {error.hint}")
            return queryset.none()


class InputFilter(_Carried):
    title = "input contains"
    parameter_name = "input"
    field = "input"


class ErrorCodeFilter(_Carried):
    title = "error code"
    parameter_name = "error_code"
    field = "error_code"


def carried(queryset: QuerySet[Job], **fields: str) -> QuerySet[Job]:
    """``queryset`` narrowed to the jobs whose input contains ``input`` and whose last error
    starts with ``error_code`` (SPEC BULK-12); a malformed value raises ``JobFilterError``."""
    where = job_filter(dict(fields))
    if where.input is not None:
        queryset = queryset.filter(input__contains=dict(where.input))
    if where.error_code is not None:
        code = where.error_code
        queryset = queryset.filter(Q(last_error=code) | Q(last_error__startswith=f"{code}:"))
    return queryset


def searched(queryset: QuerySet[Job], term: str) -> QuerySet[Job] | None:
    """The search box's ``input:{...}`` and ``error:CODE``; None for any other term."""
    for prefix, field in (("input:", "input"), ("error:", "error_code")):
        if term.startswith(prefix):
            return carried(queryset, **{field: term.removeprefix(prefix).strip()})
    return None
