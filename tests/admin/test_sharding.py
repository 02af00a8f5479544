"""The admin's job page with jobs in several databases (issue 48): a job routed to the ``shard``
alias opens as one in the jobs database does, its trace read through the operator API."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from tests import jobs
from tests.support.admin import BOTH, ROUTED, listed, routed


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


# --- SHARD-22..25: the lists and the overview, one database at a time or each apart ----------

QUEUES = "/admin/django_xjobs/job/queues/"
OVERVIEW = "/admin/django_xjobs/job/overview/"
LIST = "/admin/django_xjobs/job/"


@pytest.mark.django_db(databases=BOTH)
def test_shard_22_23_the_queues_page_and_overview_show_each_queue_under_its_database(
    superuser_client,
):
    with routed():
        jobs.ok.using(queue="reports").enqueue(n=1)
        jobs.ok.using(queue="reports").enqueue(n=2)
        jobs.ok.enqueue(n=3)
        page = superuser_client.get(QUEUES)
        overview = superuser_client.get(OVERVIEW + "?refresh=off")
    assert page.status_code == 200 and overview.status_code == 200
    rows = {(r["alias"], r["queue"]): r["ready"] for r in page.context["rows"]}
    assert rows == {("shard", "reports"): 2, ("default", "default"): 1}
    assert page.context["totals"]["ready"] == 3 and page.context["down"] == []
    body = page.content.decode()
    assert '<td class="xjobs-alias">shard</td>' in body
    # each number links to the list of the database the queue lives in
    assert "?database=shard&amp;queue__exact=reports&amp;state__exact=ready" in body
    shown = {(r["alias"], r["queue"]): r["depth"]["ready"] for r in overview.context["rows"]}
    assert shown == {("shard", "reports"): 2, ("default", "default"): 1}
    assert 'data-queue="reports" data-alias="shard"' in overview.content.decode()


@pytest.mark.django_db
def test_shard_22_without_routing_the_pages_show_no_database(superuser_client):
    jobs.ok.enqueue(n=3)
    page = superuser_client.get(QUEUES)
    listing = superuser_client.get(LIST)
    overview = superuser_client.get(OVERVIEW + "?refresh=off")
    assert "xjobs-alias" not in page.content.decode()
    assert (
        "?queue__exact=default" in page.content.decode()
        and "database=" not in page.content.decode()
    )
    assert "data-alias" not in overview.content.decode()
    assert (
        "By database" not in listing.content.decode()
        and "xjobs-database" not in listing.content.decode()
    )


@pytest.mark.django_db(databases=BOTH)
def test_shard_24_the_job_list_reads_the_database_picked_the_jobs_database_first(
    superuser_client, django_user_model
):
    with routed():
        there = str(jobs.ok.using(queue="reports").enqueue(n=1).id)
        here = str(jobs.ok.enqueue(n=2).id)
        first = superuser_client.get(LIST)
        picked = superuser_client.get(LIST + "?database=shard")
        narrowed = superuser_client.get(LIST + "?database=shard&queue__exact=default")
        unknown = superuser_client.get(LIST + "?database=elsewhere")
        # permissions as ever: the filter reads nothing for who may not view jobs
        staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
        superuser_client.force_login(staff)
        refused = superuser_client.get(LIST + "?database=shard")
    assert listed(first) == {here}
    assert "this list shows those in <strong>default</strong>" in first.content.decode()
    assert listed(picked) == {there}
    assert "this list shows those in <strong>shard</strong>" in picked.content.decode()
    assert listed(narrowed) == set()
    assert listed(unknown) == set()
    assert refused.status_code == 403


@pytest.mark.django_db(databases=BOTH, transaction=True)
def test_shard_25_a_database_that_is_down_is_said_never_empty_never_a_500(superuser_client):
    from django_xjobs.limits.operator import pause_jobs
    from tests.support.reads import unreachable

    with routed():
        jobs.ok.enqueue(n=3)
        jobs.ok.using(queue="reports").enqueue(n=1)
        pause_jobs(name="tests.jobs.fails")  # a fleet control, in the jobs database
        with unreachable("shard"):
            page = superuser_client.get(QUEUES)
            overview = superuser_client.get(OVERVIEW + "?refresh=off")
            listing = superuser_client.get(LIST)
            picked = superuser_client.get(LIST + "?database=shard&state__exact=ready")
    assert page.status_code == 200 and overview.status_code == 200
    assert [d["alias"] for d in page.context["down"]] == ["shard"]
    assert {(r["alias"], r["queue"]) for r in page.context["rows"]} == {("default", "default")}
    assert "Database <strong>shard</strong> is down" in page.content.decode()
    assert [p["job"] for p in page.context["job_pauses"]] == ["tests.jobs.fails"]
    assert "Database <strong>shard</strong> is down" in overview.content.decode()
    assert {(r["alias"], r["queue"]) for r in overview.context["rows"]} == {("default", "default")}
    assert listing.status_code == 200 and len(listing.context["cl"].result_list) == 1
    # the list of the database that is down says so and lists the jobs database instead
    assert picked.status_code == 302
    assert picked.url.endswith("?database=default&state__exact=ready")
