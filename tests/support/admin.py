"""The admin as a staff user sees it: a logged-in client with CSRF checks on, holding exactly
the permissions a test names, and the token its forms carry."""

from __future__ import annotations

import re

from django.contrib.auth.models import Permission, User
from django.test import Client

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
