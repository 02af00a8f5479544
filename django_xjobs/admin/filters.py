"""The job list's filters by what a job carries (issue 45): ``?input={...}``, a JSON object the
input contains, and ``?error_code=X_...``, the code at the start of ``last_error`` — the same
filter fields as ``xjobs ls --input/--error-code`` and the bulk verbs, checked the same way.
Each shows in the sidebar while it is given (with a link that clears it); the search box takes
``input:{...}`` and ``error:CODE`` too.

And the list's filters by queue and by job name, which list what the code and the operators
declare rather than what the table holds (SPEC BULK-22): Django's own filter for a field reads
every row of the table (``SELECT DISTINCT``) on every view of the list, seconds at 10 million
rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, TypeVar

from django.contrib import admin, messages
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest

from .. import conf
from ..declarations import registry
from ..drivers import get_driver
from ..drivers.routing.surface import per_alias
from ..errors import JobFilterError
from ..models import Job
from ..operations import job_filter

if TYPE_CHECKING:
    from django.contrib.admin.filters import _ListFilterChoices
    from django.contrib.admin.views.main import ChangeList


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


class _Declared(admin.SimpleListFilter):
    """A field's values as the code and the operators declare them, and the one given (a link
    from the queues page may name a queue nothing declares); the same ``<field>__exact``
    parameter as Django's own filter, so every link to the list still lands."""

    field = ""

    def declared(self) -> set[str]:
        raise NotImplementedError

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        values = self.declared()
        given = self.value()
        if given is not None:
            values.add(given)
        return [(value, value) for value in sorted(values)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        return queryset if value is None else queryset.filter(**{self.field: value})


class QueueFilter(_Declared):
    title = "queue"
    parameter_name = "queue__exact"
    field = "queue"

    def declared(self) -> set[str]:
        """``default``, the queues the jobs and ``XJOBS["QUEUES"]`` declare, and those an
        operator paused or capped (a small table of its own)."""
        queues = registry.known_queues(conf.get().queues)
        driver = get_driver()
        # with jobs in several databases, those that answer: one down never fails the list
        split = per_alias(driver, lambda each: each.limits().queue_controls())
        if split is None:
            return queues | {state.queue for state in driver.limits().queue_controls()}
        return queues | {state.queue for each in split for state in each.answer or []}


class NameFilter(_Declared):
    title = "name"
    parameter_name = "name__exact"
    field = "name"

    def declared(self) -> set[str]:
        """The jobs this process registers; a name it does not is the "unknown job name"
        filter's."""
        return {job.name for job in registry.registered_jobs()}


M = TypeVar("M", bound=Model)

#: the job list's parameter naming the database it reads, with jobs in several (SPEC SHARD-24)
DATABASE_PARAM = "database"


class DatabaseFilter(admin.SimpleListFilter):
    """With jobs in several databases, which one the list reads (SPEC SHARD-24): a list pages
    and sorts one table, so it shows one database's jobs at a time, the jobs database's
    (``XJOBS["DATABASE"]``) until another is picked, and says which. The lists of what lives
    with the jobs (batches, history, events) filter the same way (SHARD-50). Without routing it
    is not shown and the list reads ``XJOBS["DATABASE"]`` as ever."""

    title = "database"
    parameter_name = DATABASE_PARAM

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        routing = conf.get().routing
        return [] if routing is None else [(alias, alias) for alias in routing.aliases]

    def picked(self) -> str:
        """The alias the list reads: the one given, else the jobs database."""
        return picked_database(self.value())

    def choices(self, changelist: ChangeList) -> Iterator[_ListFilterChoices]:
        picked = self.picked()  # no "All": the list reads one database; the default marked
        for alias, label in self.lookup_choices:
            yield {
                "selected": alias == picked,
                "query_string": changelist.get_query_string({self.parameter_name: alias}),
                "display": label,
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet[M]) -> QuerySet[M]:
        given = self.value()
        if given is not None and given != self.picked():
            messages.warning(request, f"{given!r} is not one of the jobs' databases")
            return queryset.none()
        return queryset.using(self.picked()) if conf.get().routing is not None else queryset


def picked_database(given: str | None) -> str:
    """The alias the job list reads for its ``database`` parameter ``given`` (SPEC SHARD-24):
    one of the jobs' databases, else ``XJOBS["DATABASE"]``."""
    routing = conf.get().routing
    if routing is not None and given is not None and given in routing.aliases:
        return given
    return conf.get().database
