"""Payload values need their own permission (issue 26, item 2): with ``view_job`` alone, the
admin shows a payload's shape (keys, value types, sizes) but no value — in the list, the job
page, its step timeline and its history. With ``view_job_payload`` the values show, still
with the values under ``XJOBS["REDACT_KEYS"]`` masked. ``xjobs show`` masks them too unless
``--reveal``."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client

from django_xjobs.testing import run_until_idle
from tests import jobs

SECRET = "hunter2-payload-secret"
NOTE = "note-visible-with-the-permission"


def _viewer(perms: tuple[str, ...]) -> Client:
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="django_xjobs", codename__in=perms)
    )
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


@pytest.fixture
def done_job(db):
    job_id = jobs.secret_echo.enqueue(user="ada", password=SECRET, note=NOTE, fail=False).id
    run_until_idle()
    return job_id


def _pages(client: Client, job_id) -> str:
    return "".join(
        client.get(url).content.decode()
        for url in (
            "/admin/django_xjobs/job/",
            f"/admin/django_xjobs/job/{job_id}/change/",
            f"/admin/django_xjobs/job/{job_id}/history/",
        )
    )


def test_view_job_alone_shows_the_shape_of_payloads_not_their_values(done_job):
    page = _pages(_viewer(("view_job",)), done_job)
    assert SECRET not in page and NOTE not in page
    # the shape: keys and what each holds, for the input, the result and the step output
    assert "&quot;note&quot;: &quot;str of 32&quot;" in page
    assert "&quot;fail&quot;: &quot;bool&quot;" in page
    assert "session_token" in page


def test_the_payload_permission_shows_values_with_secret_keys_masked(done_job):
    """SPEC REDACT-02."""
    page = _pages(_viewer(("view_job", "view_job_payload")), done_job)
    assert NOTE in page and SECRET not in page
    assert "[redacted]" in page


def test_xjobs_show_masks_secret_keys_unless_revealed(done_job):
    """SPEC REDACT-02."""
    out = StringIO()
    call_command("xjobs", "show", str(done_job), "--json", stdout=out)
    shown = json.loads(out.getvalue())
    assert SECRET not in out.getvalue()
    assert shown["input"]["password"] == "[redacted]" and shown["input"]["note"] == NOTE
    assert shown["result"]["session_token"] == "[redacted]"
    assert shown["steps"][0]["output"]["password"] == "[redacted]"
    revealed = StringIO()
    call_command("xjobs", "show", str(done_job), "--json", "--reveal", stdout=revealed)
    assert json.loads(revealed.getvalue())["input"]["password"] == SECRET


def _user_client(name: str, perms: tuple[str, ...]) -> Client:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="django_xjobs", codename__in=perms)
    )
    client = Client()
    client.force_login(user)
    return client


def test_keys_made_from_the_inputs_are_masked_like_the_payload(db):
    """Issue 40 (and 42): a limit key and an idempotency key are made from the inputs, so
    without ``view_job_payload`` they show the template they were rendered from, never the
    values; and a template that reads a secret input (``REDACT_KEYS``) masks the key for
    everyone, on the pages, ``inspect_job``, ``inspect_limits`` and ``xjobs queues --json``."""
    from django_xjobs import inspect_job, inspect_limits
    from django_xjobs.drivers import get_driver
    from django_xjobs.limits.claims import ClaimLimits
    from django_xjobs.limits.worker import declared_limits

    account = jobs.per_account.enqueue(account="acct-visible-77", n=1).id
    token = jobs.token_call.enqueue(api_token="tok-SECRET-9931", n=1).id
    get_driver().runs().claim(  # a worker's claim, which records the keys it takes runs of
        queues=["limited"],
        limit=5,
        visibility_timeout=30,
        worker_id="w",
        limits=ClaimLimits(jobs=declared_limits()[0]),
    )

    def seen(client: Client) -> str:
        return "".join(
            client.get(url).content.decode()
            for url in (
                "/admin/django_xjobs/job/queues/",
                f"/admin/django_xjobs/job/{account}/change/",
                f"/admin/django_xjobs/job/{token}/change/",
            )
        )

    view_only = seen(_user_client("view-only", ("view_job",)))
    assert "acct-visible-77" not in view_only and "tok-SECRET-9931" not in view_only
    assert "per-account:{account}:{n}" in view_only  # the idempotency key's template
    assert "<td>{account}</td>" in view_only and "<td>{api_token}</td>" in view_only

    payloads = seen(_user_client("payloads", ("view_job", "view_job_payload")))
    assert "per-account:acct-visible-77:1" in payloads and "<td>acct-visible-77</td>" in payloads
    assert "tok-SECRET-9931" not in payloads and "[redacted]" in payloads

    assert inspect_job(token)["idempotency_key"] == "[redacted]"
    assert inspect_job(account)["idempotency_key"] == "per-account:acct-visible-77:1"
    keys = {k["job"]: k["key"] for k in inspect_limits()}
    assert keys == {jobs.token_call.name: "[redacted]", jobs.per_account.name: "acct-visible-77"}
    out = StringIO()
    call_command("xjobs", "queues", "--json", stdout=out)
    assert "tok-SECRET-9931" not in out.getvalue() and "[redacted]" in out.getvalue()
