"""The admin's lists of rows kept with their jobs, with jobs in several databases (issue 48): the
jobs, their batches, their history and the events each database stored. A list pages and sorts
one table, so it reads one database at a time, ``XJOBS["DATABASE"]`` until another is picked
under "By database" (``DatabaseFilter``), and says which (SPEC SHARD-24, SHARD-50); the list of
a database that does not answer sends back to the jobs database's with ``X_ALIAS_UNAVAILABLE``,
never a 500 (SHARD-25). A row's page opens the row in whichever database holds it: ids are
UUIDv7 minted in the process, so one database holds each. On one database nothing changes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db.models import Model
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from .. import conf
from ..drivers.routing.surface import is_down
from ..errors import AliasUnavailableError
from .filters import DATABASE_PARAM, picked_database

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic to the type checker only
    _ModelAdmin = admin.ModelAdmin


def shown_database(request: HttpRequest) -> str | None:
    """The database a list of ``request`` reads with jobs in several; None on one database."""
    if conf.get().routing is None:
        return None
    return picked_database(request.GET.get(DATABASE_PARAM))


class OneDatabaseList(_ModelAdmin):
    """A list with ``DatabaseFilter`` among its filters, and its rows' pages, under routing."""

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, object] | None = None
    ) -> HttpResponse:
        database = shown_database(request)
        context = {"xjobs_database": database, **(extra_context or {})}
        try:
            response: HttpResponse = super().changelist_view(request, context)
            return response
        except Exception as error:  # the list's count meets a database that is down
            if database is None or database == conf.get().database or not is_down(error):
                raise
        # never a 500 for one database down: say so, and list the jobs database (SHARD-25)
        self.message_user(
            request,
            f"{AliasUnavailableError.code}: database {database!r} did not answer; "
            f"listing {conf.get().database!r} instead",
            messages.ERROR,
        )
        rest = request.GET.copy()
        rest[DATABASE_PARAM] = conf.get().database
        return HttpResponseRedirect(f"{request.path}?{rest.urlencode()}")

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Model | None:
        """The row, in the jobs database or, with jobs in several, in the one that holds it
        (SPEC SHARD-06, SHARD-51); a database that does not answer is said and passed over."""
        found: Model | None = super().get_object(request, object_id, from_field)
        routing = conf.get().routing
        if found is not None or routing is None or from_field is not None:
            return found
        try:
            wanted = self.model._meta.pk.to_python(object_id)
        except Exception:  # not an id at all: the admin's "no such object", as ever
            return None
        for alias in routing.aliases:
            if alias == conf.get().database:
                continue
            try:
                row: Model | None = (
                    self.get_queryset(request).using(alias).filter(pk=wanted).first()
                )
            except Exception as error:
                if not is_down(error):
                    raise
                self.message_user(
                    request,
                    f"{AliasUnavailableError.code}: database {alias!r} did not answer",
                    messages.ERROR,
                )
                continue
            if row is not None:
                return row
        return None
