"""A row whose payload is encrypted with a key this process lacks (issue 46 item 3, SPEC
CRYPT-04, CRYPT-10): the admin's job list, job page and history, and an event's page, still
render, the payload reading ``encrypted (no key)``; ``xjobs show`` and ``xjobs events`` say the
same. With the key, the values show as ever."""

from __future__ import annotations

import json
import uuid
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from django_xjobs import crypt, publish_event
from django_xjobs.operations import inspect_event
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


# --- event data (SPEC CRYPT-10) -------------------------------------------------------------------


@pytest.fixture
def sealed_event(db):
    with keys(OLD):
        return publish_event("user.created", {"user_id": 7, "email": EMAIL}).id


def test_crypt_10_an_events_readers_open_its_data_with_the_key(sealed_event):
    with keys(NEW, OLD):
        assert inspect_event(sealed_event, reveal=True).payload == {"user_id": 7, "email": EMAIL}
        assert inspect_event(sealed_event).payload["email"] == EMAIL  # masked only by REDACT_KEYS
        out = StringIO()
        call_command("xjobs", "events", str(sealed_event), stdout=out)
        assert EMAIL in out.getvalue() and crypt.MARK not in out.getvalue()
        client = Client()
        client.force_login(User.objects.create_superuser("root", password="pw"))
        page = client.get(f"/admin/django_xjobs/jobevent/{sealed_event}/change/")
    assert page.status_code == 200 and EMAIL in page.content.decode()


def test_crypt_10_without_the_key_an_event_reads_encrypted_and_the_admin_renders(sealed_event):
    with keys(NEW):
        assert inspect_event(sealed_event, reveal=True).payload == crypt.NO_KEY
        assert inspect_event(sealed_event).payload == crypt.NO_KEY
        out = StringIO()
        call_command("xjobs", "events", str(sealed_event), "--json", "--reveal", stdout=out)
        assert json.loads(out.getvalue())["payload"] == crypt.NO_KEY
        client = Client()
        client.force_login(User.objects.create_superuser("root", password="pw"))
        pages = [
            client.get(url)
            for url in (
                "/admin/django_xjobs/jobevent/",
                f"/admin/django_xjobs/jobevent/{sealed_event}/change/",
            )
        ]
    assert [p.status_code for p in pages] == [200, 200]
    change = pages[1].content.decode()
    assert crypt.NO_KEY in change and EMAIL not in change and crypt.MARK not in change
