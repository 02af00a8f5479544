"""Fixtures of the admin's tests."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client


@pytest.fixture
def superuser_client(client: Client) -> Client:
    """The test client logged in as a new superuser."""
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client
