"""A row whose payload is encrypted with a key this process lacks (issue 46 item 3, SPEC
CRYPT-04): the admin's job list, job page and history still render, the payload reading
``encrypted (no key)``; ``xjobs show`` says the same. With the key, the values show as ever."""

from __future__ import annotations

import json
import uuid
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from django_xjobs import crypt
from tests import jobs
from tests.test_crypt import EMAIL, NEW, OLD, keys


@pytest.fixture
def sealed_job(db):
    with keys(OLD):
        return jobs.sealed.enqueue(token=f"t-{uuid.uuid4()}", email=EMAIL).id


def _pages(job_id) -> list[tuple[int, str]]:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return [
        (response.status_code, response.content.decode())
        for response in (
            client.get(url)
            for url in (
                "/admin/django_xjobs/job/",
                f"/admin/django_xjobs/job/{job_id}/change/",
                f"/admin/django_xjobs/job/{job_id}/history/",
            )
        )
    ]


def test_crypt_04_without_the_key_the_admin_renders_and_says_encrypted(sealed_job):
    with keys(NEW):
        pages = _pages(sealed_job)
    assert [status for status, _ in pages] == [200, 200, 200]
    change = pages[1][1]
    assert crypt.NO_KEY in change and EMAIL not in change
    assert crypt.MARK not in change  # the wrapper is never shown as if it were the input


def test_crypt_04_with_the_key_the_admin_shows_the_values(sealed_job):
    with keys(NEW, OLD):
        pages = _pages(sealed_job)
    assert [status for status, _ in pages] == [200, 200, 200]
    assert EMAIL in pages[1][1] and crypt.NO_KEY not in pages[1][1]


def test_crypt_04_xjobs_show_says_encrypted_without_the_key(sealed_job):
    out = StringIO()
    with keys(NEW):
        call_command("xjobs", "show", str(sealed_job), "--json", "--reveal", stdout=out)
    assert json.loads(out.getvalue())["input"] == crypt.NO_KEY
    out = StringIO()
    with keys(NEW, OLD):
        call_command("xjobs", "show", str(sealed_job), "--json", "--reveal", stdout=out)
    assert json.loads(out.getvalue())["input"]["email"] == EMAIL


def test_crypt_06_the_admins_input_filter_on_encrypted_inputs_says_why_it_lists_nothing(sealed_job):
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    with keys(NEW, OLD):
        page = client.get("/admin/django_xjobs/job/", {"input": json.dumps({"email": EMAIL})})
    assert page.status_code == 200
    text = page.content.decode()
    assert "X_INPUT_ENCRYPTED" in text and str(sealed_job) not in text
