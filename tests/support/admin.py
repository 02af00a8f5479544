"""The admin as a staff user sees it: a logged-in client with CSRF checks on, holding exactly
the permissions a test names, and the token its forms carry."""

from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.http import HttpResponse
from django.test import Client, override_settings

#: the CSRF token a rendered admin form carries
TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def staff_client(name: str, *perms: str) -> Client:
    """A client logged in as a new staff user ``name`` holding only ``perms`` of the app."""
    user = User.objects.create_user(name, password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="django_xjobs", codename__in=perms)
    )
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


# --- the admin with jobs in two databases (tests/settings' "shard" alias; SHARD-2x, SHARD-5x) ---

#: the aliases a routed admin test reads
BOTH = ["default", "shard"]
#: the settings that put the "reports" queue's jobs in the "shard" database
ROUTED = {"QUEUES": ["other", "reports"], "QUEUE_DATABASES": {"reports": "shard"}}


def routed() -> override_settings:
    """The suite's XJOBS with ``ROUTED`` on top."""
    return override_settings(XJOBS={**settings.XJOBS, **ROUTED})


def listed(page: HttpResponse) -> set[str]:
    """The primary keys a changelist page shows."""
    return {str(row.pk) for row in page.context["cl"].result_list}
