"""The admin: list, filters, the detail page with its step timeline, and the operator actions."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from django_xjobs.clock import FrozenClock
from django_xjobs.models import Job
from django_xjobs.testing import run_to_completion, run_until_idle
from tests import jobs


@pytest.fixture
def admin_client(client, db):
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


def test_the_list_shows_why_each_job_stopped_and_filters(admin_client):
    jobs.terminal.enqueue(n=1)
    jobs.ok.enqueue(n=2)
    run_until_idle()
    page = admin_client.get("/admin/django_xjobs/job/")
    assert page.status_code == 200
    assert (
        b"1 of 5" in page.content and b"terminal" in page.content and b"X_TERMINAL" in page.content
    )
    dead = admin_client.get("/admin/django_xjobs/job/?state__exact=dead")
    assert [j.name for j in dead.context["cl"].result_list] == ["tests.jobs.terminal"]
    found = admin_client.get("/admin/django_xjobs/job/?q=ok:2")
    assert [j.idempotency_key for j in found.context["cl"].result_list] == ["ok:2"]


def test_the_detail_page_has_the_step_timeline_and_the_data(admin_client):
    job_id = jobs.fails_at_b.enqueue(token="admin-detail").id
    run_to_completion(job_id, clock=FrozenClock())
    page = admin_client.get(f"/admin/django_xjobs/job/{job_id}/change/")
    assert page.status_code == 200
    body = page.content.decode().lower()
    for fragment in ("step timeline", ">a<", ">b<", ">c<", "completed", "admin-detail"):
        assert fragment in body


def test_actions_go_through_the_operator_api_and_report_each_row(admin_client):
    dead = jobs.terminal.enqueue(n=3).id
    run_until_idle()
    ready = jobs.ok.enqueue(n=4).id
    response = admin_client.post(
        "/admin/django_xjobs/job/",
        {"action": "retry_selected", "_selected_action": [str(dead), str(ready)]},
        follow=True,
    )
    text = response.content.decode()
    assert "queued again" in text and "X_JOB_NOT_RETRYABLE" in text
    assert Job.objects.get(id=dead).state == "ready"
    admin_client.post(
        "/admin/django_xjobs/job/",
        {"action": "cancel_selected", "_selected_action": [str(ready)]},
        follow=True,
    )
    row = Job.objects.get(id=ready)
    assert row.state == "cancelled" and "admin" in row.last_error


def test_rows_cannot_be_edited_by_hand(admin_client):
    job_id = jobs.ok.enqueue(n=5).id
    admin_client.post(f"/admin/django_xjobs/job/{job_id}/change/", {"state": "done"})
    assert Job.objects.get(id=job_id).state == "ready"
