"""The version a run started under, as the operator sees it (issue 44): ``inspect_job``,
``inspect_versions``, ``xjobs show``, ``xjobs versions [--json]`` and the admin's job page
(SPEC VER-03, VER-04)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from django_xjobs import operations
from django_xjobs.drivers import get_driver
from django_xjobs.drivers.contract import DeclaredVersions, SuspendUntil
from django_xjobs.testing import run_until_idle
from tests import versioned


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


def started_under(handle, version: int, token: str):
    """A run of ``handle`` claimed by a worker declaring ``version``, parked again unrun."""
    job_id = handle.enqueue(token=token).id
    driver = get_driver()
    [job] = driver.runs().claim(
        queues=[handle.queue],
        limit=1,
        visibility_timeout=30.0,
        worker_id=f"v{version}",
        versions=DeclaredVersions({handle.name: (version, False)}),
    )
    assert (job.id, job.version) == (job_id, version)
    assert driver.runs().suspend(SuspendUntil(job.id, job.lease_token, delay=3600))
    return job_id


def test_ver_03_inspect_job_shows_the_version_the_run_started_under(db):
    job_id = versioned.replays.enqueue(token="shown").id
    fresh = operations.inspect_job(job_id)
    assert (fresh.version, fresh.parked) == (None, False)  # stamped at its first claim
    run_until_idle()  # the first step, then the sleep parks it
    trace = operations.inspect_job(job_id)
    assert (trace.state, trace.version, trace.parked) == ("suspended", versioned.VERSION, False)
    assert trace.to_json()["version"] == versioned.VERSION
    text = xjobs("show", str(job_id))
    assert f"  version    {versioned.VERSION}\n" in text
    assert json.loads(xjobs("show", str(job_id), "--json"))["version"] == versioned.VERSION


def test_ver_04_inspect_versions_says_what_this_code_does_with_each_version(db):
    started_under(versioned.replays, 1, "old-replay")
    started_under(versioned.parks, 1, "old-park")
    started_under(versioned.restarts, 1, "old-restart")
    started_under(versioned.replays, versioned.VERSION + 1, "newer")
    versioned.replays.enqueue(token="new")
    found = {(v.job.rsplit(".", 1)[1], v.version): v for v in operations.inspect_versions()}
    fates = {key: v.fate for key, v in found.items()}
    assert fates == {
        ("parks", 1): "park",
        ("replays", None): "new",
        ("replays", 1): "replay",
        ("replays", versioned.VERSION + 1): "newer",
        ("restarts", 1): "restart",
    }
    assert {key for key, v in found.items() if v.blocks} == {
        ("parks", 1),
        ("replays", versioned.VERSION + 1),
    }
    old = found[("replays", 1)]
    assert (old.declared, old.old_runs, old.waiting, old.running, old.parked) == (
        versioned.VERSION,
        "replay",
        1,
        0,
        0,
    )
    assert json.loads(xjobs("versions", "--json")) == [
        v.to_json() for v in operations.inspect_versions()
    ]
    text = xjobs("versions")
    assert text.splitlines()[0].split() == [
        "JOB",
        "VERSION",
        "DECLARED",
        "RUNNING",
        "WAITING",
        "PARKED",
        "FATE",
    ]
    assert "newer: a newer version: no worker of this code runs it" in text


def test_ver_04_versions_says_so_when_no_run_is_live(db):
    assert xjobs("versions") == "no live runs\n"
    assert json.loads(xjobs("versions", "--json")) == []


@pytest.fixture
def admin_client(client, db):
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


def test_ver_03_the_admin_job_page_shows_the_version(admin_client):
    job_id = versioned.replays.enqueue(token="admin").id
    html = admin_client.get(f"/admin/django_xjobs/job/{job_id}/change/").content.decode()
    assert "stamped at its first claim" in html
    run_until_idle()
    html = admin_client.get(f"/admin/django_xjobs/job/{job_id}/change/").content.decode()
    assert "field-version_shown" in html
    assert f'<div class="readonly">{versioned.VERSION}</div>' in html
