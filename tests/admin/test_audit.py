"""The audit trail in the admin (issue 45): an admin action is recorded with the Django user
who did it, only once the CSRF-protected POST of a user holding ``change_job`` went through; the
trail's own page is read-only and needs its own view permission. Driven through the real admin
with the CSRF checks on, by real users holding real permission rows."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from django_xjobs.models import Job, OperatorAction
from django_xjobs.operations import cancel_job, retry_jobs
from django_xjobs.testing.factories import DeadJobFactory
from tests.support.admin import TOKEN, staff_client

AUDIT = "/admin/django_xjobs/operatoraction/"


def _token(client: Client, job_id) -> str:
    page = client.get(f"/admin/django_xjobs/job/{job_id}/change/")
    found = TOKEN.search(page.content.decode()) if page.status_code == 200 else None
    if found:
        return found.group(1)
    client.get("/admin/", follow=True)
    return client.cookies["csrftoken"].value


def test_audit_05_an_admin_action_is_recorded_with_its_user_after_the_csrf_check(db):
    job = DeadJobFactory()
    alice = staff_client("alice", "view_job", "change_job")
    refused = alice.post(f"/admin/django_xjobs/job/{job.id}/retry/", {})  # no CSRF token
    assert refused.status_code == 403
    assert not OperatorAction.objects.exists()
    done = alice.post(
        f"/admin/django_xjobs/job/{job.id}/retry/", {"csrfmiddlewaretoken": _token(alice, job.id)}
    )
    assert done.status_code == 302 and Job.objects.get(pk=job.id).state == "ready"
    [row] = OperatorAction.objects.all()
    assert (row.actor, row.verb, row.job_id) == ("admin:alice", "retry_job", str(job.id))
    selected = DeadJobFactory()
    alice.post(
        "/admin/django_xjobs/job/",
        {
            "action": "cancel_selected",
            "_selected_action": [str(job.id)],
            "csrfmiddlewaretoken": _token(alice, selected.id),
        },
    )
    latest = OperatorAction.objects.order_by("-id").first()
    # the selected rows are one bulk call over their ids (SPEC BULK-13): one record for them
    assert (latest.actor, latest.verb, latest.reason, latest.filter) == (
        "admin:alice",
        "cancel_jobs",
        "cancelled from the admin by alice",
        {"ids": [str(job.id)]},
    )


def test_audit_05_a_user_without_change_job_acts_on_nothing_and_leaves_no_row(db):
    job = DeadJobFactory()
    bob = staff_client("bob", "view_job")
    response = bob.post(
        f"/admin/django_xjobs/job/{job.id}/retry/", {"csrfmiddlewaretoken": _token(bob, job.id)}
    )
    assert response.status_code == 403
    assert Job.objects.get(pk=job.id).state == "dead"
    assert not OperatorAction.objects.exists()


def test_audit_05_the_trail_is_read_only_and_needs_its_own_view_permission(db):
    DeadJobFactory(input={"order_id": 4711})
    retry_jobs(state="dead", input={"order_id": 4711}, by="ops:carol")
    [row] = OperatorAction.objects.all()
    # change_job alone does not show the trail: it has its own permission
    assert staff_client("dave", "view_job", "change_job").get(AUDIT).status_code == 403
    auditor = staff_client("erin", "view_operatoraction")
    page = auditor.get(AUDIT)
    assert page.status_code == 200
    text = page.content.decode()
    assert "ops:carol" in text and "retry_jobs" in text and "order_id" in text
    assert auditor.get(f"{AUDIT}{row.pk}/change/").status_code == 200
    assert auditor.get(f"{AUDIT}add/").status_code == 403
    # nothing to post to: no change, no delete
    token = auditor.cookies["csrftoken"].value
    posted = auditor.post(f"{AUDIT}{row.pk}/change/", {"csrfmiddlewaretoken": token, "actor": "x"})
    assert posted.status_code == 403
    gone = auditor.post(f"{AUDIT}{row.pk}/delete/", {"csrfmiddlewaretoken": token, "post": "yes"})
    assert gone.status_code == 403
    assert OperatorAction.objects.get(pk=row.pk).actor == "ops:carol"
    assert {p.codename for p in Permission.objects.filter(codename__endswith="operatoraction")} == {
        "view_operatoraction"
    }


@pytest.mark.parametrize("verb", ["retry_jobs", "cancel_job"])
def test_audit_05_the_trail_filters_by_verb(db, verb):
    job = DeadJobFactory()
    retry_jobs(state="dead")
    cancel_job(job.id)
    auditor = staff_client("frank", "view_operatoraction")
    page = auditor.get(f"{AUDIT}?verb={verb}").content.decode()
    assert re.findall(r'class="field-verb">([^<]+)<', page) == [verb]
