"""The base of every admin page over rows the library writes: never added or deleted by hand,
titled without "Change"; ``ViewOnly`` for the rows not even an operator action changes.

Where they are read (SPEC READ-01): a list shown (a GET of the changelist) from
``XJOBS["READ_DATABASE"]`` when one is set, saying so when it lags or did not answer (then the
jobs database is read); everything an operator acts on from ``XJOBS["DATABASE"]``, where the
driver, and so retry and cancel, reads and writes: a row's page and its buttons, and the rows
an action selects (a POST of the changelist), so none is skipped for not being replayed yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.text import capfirst

from .. import conf
from ..drivers.reading import ReadSource, pinned_database, reading, reading_primary
from .pages import Navigated
from .permissions import VIEWER as _viewer

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic to the type checker only
    _ModelAdmin = admin.ModelAdmin


class LibraryRows(Navigated, _ModelAdmin):
    """Rows the library writes: shown, never added or deleted by hand; the list read from
    ``XJOBS["READ_DATABASE"]`` when one is set, a row's page and an action's selection from
    ``XJOBS["DATABASE"]`` (where the driver, and so retry and cancel, reads and writes)."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        alias = pinned_database() or conf.get().database
        return super().get_queryset(request).using(alias)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, object] | None = None,
    ) -> HttpResponse:
        viewer = _viewer.set(request)
        # rows are never edited by hand: the page is not titled "Change ..." (issue 30)
        extra_context = {"title": capfirst(self.opts.verbose_name), **(extra_context or {})}
        try:
            # the page an operator acts from reads where the actions write (SPEC READ-01)
            with reading_primary():
                response = super().change_view(request, object_id, form_url, extra_context)
                # rendered here, while the fields can still see who is looking
                render = getattr(response, "render", None)
                if render is not None:
                    render()
        finally:
            _viewer.reset(viewer)
        return response

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, object] | None = None
    ) -> HttpResponse:
        # rows are never edited by hand: not "Select job to change" (issue 30)
        title = {"title": capfirst(self.opts.verbose_name_plural)}
        if request.method not in ("GET", "HEAD"):  # an action: it selects on the primary
            with reading_primary():
                return super().changelist_view(request, {**title, **(extra_context or {})})
        with reading(fallback=True) as source:  # SPEC READ-01, READ-02
            said(request, source)
            response = super().changelist_view(request, {**title, **(extra_context or {})})
            # rendered here: the columns that read (why, progress) read where the list did
            render = getattr(response, "render", None)
            if render is not None:
                render()
        return response


class ViewOnly(LibraryRows):
    """Rows only the library writes: not even their state changes from the admin."""

    change_list_template = "django_xjobs/admin/change_list.html"

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


#: a list read from a standby says how far behind it is once it is this many seconds or more
LAG_WORTH_SAYING = 5.0


def said(request: HttpRequest, source: ReadSource) -> None:
    """Tell the page's reader what it reads when it is not the current jobs database: a read
    database that did not answer (a warning: the jobs database was read), or one that lags."""
    note = source.note()
    if note is None:
        return
    if source.problem is not None:
        messages.warning(request, note)
    elif source.lag_seconds is None or source.lag_seconds >= LAG_WORTH_SAYING:
        messages.info(request, note)
