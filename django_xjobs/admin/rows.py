"""The base of every admin page over rows the library writes: read from ``XJOBS["DATABASE"]``,
never added or deleted by hand, titled without "Change"; ``ViewOnly`` for the rows not even
an operator action changes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.text import capfirst

from .. import conf
from .pages import Navigated
from .permissions import VIEWER as _viewer

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic to the type checker only
    _ModelAdmin = admin.ModelAdmin


class LibraryRows(Navigated, _ModelAdmin):
    """Rows the library writes: shown, never added or deleted by hand, read from
    ``XJOBS["DATABASE"]`` (where the driver, and so retry and cancel, reads and writes)."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).using(conf.get().database)

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
        return super().changelist_view(request, {**title, **(extra_context or {})})


class ViewOnly(LibraryRows):
    """Rows only the library writes: not even their state changes from the admin."""

    change_list_template = "django_xjobs/admin/change_list.html"

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
