"""The admin and ``XJOBS["READ_DATABASE"]`` (issue 46 item 2): the lists (the batches' and the
audit trail's too) and the overview read the alias, and the nav bar's dead count on every page; a job's page, its buttons and what an action selects read the jobs database; a read
database that is down is said on the page, which reads the jobs database instead, never a 500.
The ``replica`` alias holds rows the jobs database does not (tests/support/reads.py)."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.contrib.messages.storage.cookie import CookieStorage
from django.test import RequestFactory

from django_xjobs.admin.rows import LAG_WORTH_SAYING, said
from django_xjobs.drivers.reading import ReadSource, figures_database
from django_xjobs.models import Job, JobBatch, OperatorAction
from tests import jobs
from tests.support.reads import BOTH, MIRRORED, REPLICA, gone_alias, reading_from, seed_replica

LIST = "/admin/django_xjobs/job/"
OVERVIEW = "/admin/django_xjobs/job/overview/"


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


def listed(page) -> set[str]:
    return {str(job.pk) for job in page.context["cl"].result_list}


@pytest.mark.django_db(databases=BOTH)
def test_read_01_the_lists_and_the_overview_read_the_alias(admin_client):
    """SPEC READ-02: the overview says where its figures come from and how old they are."""
    on_replica, dead_there = seed_replica()
    here = jobs.ok.enqueue(n=1).id
    with reading_from():
        page = admin_client.get(LIST)
        assert page.status_code == 200
        there = {str(pk) for pk in Job.objects.using(REPLICA).values_list("pk", flat=True)}
        assert listed(page) == there and {str(on_replica), str(dead_there)} <= there
        assert str(here) not in listed(page)
        # filtered as ever, on the alias
        dead = admin_client.get(LIST, {"state__exact": "dead"})
        assert listed(dead) == {str(dead_there)}
        overview = admin_client.get(OVERVIEW)
        assert overview.status_code == 200
        assert [r["queue"] for r in overview.context["rows"]] == [MIRRORED]
        assert overview.context["read_note"] == (
            f"read from {REPLICA!r}, 0.0 s behind the jobs database"
        )
        assert 'id="xjobs-read-from"' in overview.content.decode()
    # without READ_DATABASE: the jobs database, and the overview says its figures are current
    assert listed(admin_client.get(LIST)) == {str(here)}
    current = admin_client.get(OVERVIEW).context["read_note"]
    assert current == "Figures current: read from the jobs database 'default'."


@pytest.mark.django_db(databases=BOTH)
def test_read_01_a_job_page_and_an_action_read_the_jobs_database(admin_client):
    on_replica, _ = seed_replica()
    here = jobs.ok.using(delay=3600).enqueue(n=1).id
    with reading_from():
        # the page an operator acts from: the jobs database's row, buttons and all
        page = admin_client.get(f"{LIST}{here}/change/")
        assert page.status_code == 200 and "Cancel" in page.content.decode()
        # a row only the alias holds has no page: the page does not read the alias
        missing = admin_client.get(f"{LIST}{on_replica}/change/")
        assert missing.status_code == 302
        # an action selects on the jobs database, where it acts
        done = admin_client.post(
            LIST, {"action": "cancel_selected", "_selected_action": [str(here)]}
        )
        assert done.status_code == 302
    assert Job.objects.using("default").get(pk=here).state == "cancelled"
    assert Job.objects.using(REPLICA).get(pk=on_replica).state == "ready"


def test_read_04_a_read_database_that_is_down_is_said_on_the_page(
    django_db_setup, django_db_blocker
):
    """Outside a test transaction (Django's test case refuses an alias it was not set up with):
    the views are called with an operator that is not stored, so nothing is written."""
    site = admin.site._registry[Job]
    operator = User(username="ops", is_staff=True, is_superuser=True, is_active=True)

    def get(url: str):
        request = RequestFactory().get(url)
        request.user = operator
        request._messages = CookieStorage(request)
        return request

    with django_db_blocker.unblock(), gone_alias() as gone, reading_from(gone):
        request = get(LIST)
        page = site.changelist_view(request)
        assert page.status_code == 200
        [said] = [str(m) for m in get_messages(request)]
        assert said.startswith("X_READ_DATABASE_UNAVAILABLE: ")
        assert gone in said and "read from the jobs database 'default' instead" in said
        overview = site.overview_view(get(OVERVIEW))
        assert overview.status_code == 200
        assert overview.context_data["read_problem"] is True
        assert "X_READ_DATABASE_UNAVAILABLE" in overview.context_data["read_note"]
        overview.render()
        assert 'class="errornote"' in overview.content.decode()


def test_read_02_a_list_says_a_lag_worth_saying():
    def told(source: ReadSource) -> list[str]:
        request = RequestFactory().get(LIST)
        request._messages = CookieStorage(request)
        said(request, source)
        return [str(m) for m in get_messages(request)]

    behind = LAG_WORTH_SAYING + 2
    assert told(ReadSource(REPLICA, replica=True, standby=True, lag_seconds=behind)) == [
        f"read from {REPLICA!r}, {behind:.1f} s behind the jobs database"
    ]
    assert told(ReadSource(REPLICA, replica=True, standby=True, lag_seconds=None)) == [
        f"read from {REPLICA!r}, a standby that has replayed nothing yet"
    ]
    # a standby close behind, or the jobs database itself: nothing to say
    assert told(ReadSource(REPLICA, replica=True, standby=True, lag_seconds=0.4)) == []
    assert told(ReadSource("default")) == []


# --- READ-09, READ-10: the batches, the audit trail and the nav bar's dead count ---------------

AUDIT = "/admin/django_xjobs/operatoraction/"
BATCHES = "/admin/django_xjobs/jobbatch/"


@pytest.mark.django_db(databases=BOTH)
def test_read_09_10_the_batch_and_audit_lists_and_the_nav_count_read_the_alias(admin_client):
    seed_replica()  # one dead job, on the replica only
    there = OperatorAction.objects.using(REPLICA).create(actor="ops:there", verb="cancel")
    batch = JobBatch.objects.using(REPLICA).create(input={})
    JobBatch.objects.using("default").create(input={})
    here = jobs.ok.enqueue(n=1).id
    with reading_from():
        page = admin_client.get(AUDIT)
        assert page.status_code == 200 and listed(page) == {str(there.id)}
        assert "Dead letters (1)" in page.content.decode()
        assert listed(admin_client.get(BATCHES)) == {str(batch.id)}
        # a job's page reads the jobs database; its nav bar's count is a figure, read there too
        job_page = admin_client.get(f"/admin/django_xjobs/job/{here}/change/")
        assert job_page.status_code == 200 and "Dead letters (1)" in job_page.content.decode()
    page = admin_client.get(AUDIT)
    assert listed(page) == set() and "Dead letters (0)" in page.content.decode()


def test_read_10_the_nav_count_reads_the_jobs_database_when_the_alias_is_down(
    django_db_setup, django_db_blocker
):
    operator = User(username="ops", is_staff=True, is_superuser=True, is_active=True)
    with django_db_blocker.unblock(), gone_alias() as gone, reading_from(gone):
        assert figures_database() == "default"
        request = RequestFactory().get(AUDIT)
        request.user = operator
        request._messages = CookieStorage(request)
        page = admin.site._registry[OperatorAction].changelist_view(request)
        assert page.status_code == 200
        [said] = [str(m) for m in get_messages(request)]
        assert said.startswith("X_READ_DATABASE_UNAVAILABLE: ") and gone in said
