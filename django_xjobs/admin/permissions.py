"""Who may do what in the admin: one check every state-changing path calls, and the payload
permission that decides whether inputs, results, step outputs and event data show their values
or only their shape.

Every path that changes a row (an action, a button on a page, a view of its own) goes through
``require_permission``; a page decides whether to show a button with ``has_permission``, and the
view behind the button checks again, because a POST can come from anywhere. Actions declare
``@admin.action(permissions=["change"])`` so Django hides them from, and refuses them to, users
without ``has_change_permission``.
"""

from __future__ import annotations

import contextvars
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

#: the permission that shows payload values (``Job.Meta.permissions``); without it a payload
#: shows its shape: keys, value types and sizes
PAYLOAD_PERMISSION = "django_xjobs.view_job_payload"


def has_permission(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, action: str, obj: object = None
) -> bool:
    """Whether an active staff user may ``action`` ("change", "delete", "view") rows of
    ``model_admin``'s model: the admin's own ``has_<action>_permission``, which reads the
    user's ``<app>.<action>_<model>`` permission (a superuser holds them all)."""
    user = getattr(request, "user", None)
    if user is None or not (user.is_active and user.is_staff):
        return False
    check = getattr(model_admin, f"has_{action}_permission")
    return bool(check(request, obj) if obj is not None else check(request))


def require_permission(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, action: str, obj: object = None
) -> None:
    """The one gate of a state-changing admin view: a POST (so the CSRF check ran) by a user
    holding the matching permission, else ``PermissionDenied`` (403)."""
    if request.method != "POST" or not has_permission(model_admin, request, action, obj):
        raise PermissionDenied


def sees_payloads(request: HttpRequest | None) -> bool:
    """Whether ``request``'s user may read payload values, not only their shape."""
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_active and user.has_perm(PAYLOAD_PERMISSION))


#: the request of the admin page being rendered (set by the job page's view), for the columns and
#: fields that show a payload only to who may see it (``sees_payloads``)
VIEWER: contextvars.ContextVar[HttpRequest | None] = contextvars.ContextVar(
    "xjobs_admin_viewer", default=None
)
