"""The admin's job page with jobs in several databases (issue 48): a job routed to the ``shard``
alias opens as one in the jobs database does, its trace read through the operator API."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from tests import jobs

ROUTED = {"QUEUES": ["other", "reports"], "QUEUE_DATABASES": {"reports": "shard"}}


@pytest.mark.django_db(databases=["default", "shard"])
def test_shard_06_the_job_page_opens_a_job_in_another_database(admin_client):
    with override_settings(XJOBS={**settings.XJOBS, **ROUTED}):
        job_id = jobs.ok.using(queue="reports").enqueue(n=41).id
        page = admin_client.get(f"/admin/django_xjobs/job/{job_id}/change/")
        assert page.status_code == 200
        body = page.content.decode()
        assert "tests.jobs.ok" in body and "reports" in body and str(job_id) in body
        missing = admin_client.get(
            "/admin/django_xjobs/job/01a24f00-0000-7000-8000-000000000000/change/"
        )
    assert missing.status_code == 302  # the admin's "no such object" redirect, as on one database
    # without the routing, the jobs database alone is read: the routed job is not found there
    assert admin_client.get(f"/admin/django_xjobs/job/{job_id}/change/").status_code == 302
