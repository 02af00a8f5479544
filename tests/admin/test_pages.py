"""The admin's own pages (``admin/pages.py``, ``admin/overview.py``) through the real admin, by
real users holding real permission rows (issue 40): each page checks ``view_job`` before it
reads anything, and a name the pages link to may hold a ``/``."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from django_xjobs import cron, inspect_crons
from django_xjobs.declarations.cron import unregister
from django_xjobs.models import Job
from tests import jobs
from tests.support.admin import TOKEN, staff_client

PAGES = ("/admin/django_xjobs/job/queues/", "/admin/django_xjobs/job/crons/")
OVERVIEW = "/admin/django_xjobs/job/overview/"
SLASHED_CRON = "reports/daily"


def daily_report(occurrence):
    return []


@pytest.fixture
def slashed_cron():
    cron("0 3 * * *", tz="UTC", name=SLASHED_CRON)(daily_report)
    yield SLASHED_CRON
    unregister(SLASHED_CRON)


def _client(name: str, perms: tuple[str, ...], *, superuser: bool = False) -> Client:
    if superuser:
        user = User.objects.create_superuser(name, f"{name}@example.com", "pw")
    else:
        user = User.objects.create_user(name, password="pw", is_staff=True)
        user.user_permissions.set(
            Permission.objects.filter(content_type__app_label="django_xjobs", codename__in=perms)
        )
    client = Client()
    client.force_login(user)
    return client


def test_ctrl_07_a_slash_in_a_queue_or_cron_name_breaks_no_page(db, slashed_cron):
    """A live row whose queue holds a ``/`` (written by another version, or SQL) and a cron
    named with one made the Queues and Crons pages answer 500 for everyone: no link could be
    made to their controls. The links are made, and the controls they post to work."""
    row = jobs.ok.enqueue(n=1).id
    Job.objects.filter(id=row).update(queue="imports/eu")  # past the name check, as SQL writes
    admin = _client("root", (), superuser=True)
    for page in PAGES:
        answer = admin.get(page)
        assert answer.status_code == 200, page
    queues = admin.get(PAGES[0]).content.decode()
    assert "/admin/django_xjobs/job/queues/imports/eu/pause/" in queues
    crons = admin.get(PAGES[1]).content.decode()
    assert f"/admin/django_xjobs/job/crons/{SLASHED_CRON}/pause/" in crons
    done = admin.post(f"/admin/django_xjobs/job/crons/{SLASHED_CRON}/pause/")
    assert done.status_code == 302
    assert {c["name"]: c["paused"] for c in inspect_crons()}[SLASHED_CRON] is True
    # the queue's name is refused by the call, with its message, not a 500
    refused = admin.post("/admin/django_xjobs/job/queues/imports/eu/pause/", follow=True)
    assert refused.status_code == 200 and "is not valid" in refused.content.decode()


def test_ctrl_07_each_page_refuses_a_user_without_view_job_before_it_reads(db, slashed_cron):
    """Those pages did their work before checking the permission: whatever the work raised
    (the 500 above) answered users who may not see them. A user without ``view_job`` gets 403
    whatever the rows hold; one with it sees the pages."""
    row = jobs.ok.enqueue(n=1).id
    Job.objects.filter(id=row).update(queue="imports/eu")
    outsider = _client("outsider", ("view_outboxentry",))
    for page in (*PAGES, OVERVIEW):
        assert outsider.get(page).status_code == 403, page
    viewer = _client("viewer", ("view_job",))
    for page in (*PAGES, OVERVIEW):
        assert viewer.get(page).status_code == 200, page


# --- the queues page's paused jobs (PAUSE-08) ---------------------------------------------------


def _pause_job(client, action: str, **form: str):
    page = client.get("/admin/django_xjobs/job/queues/").content.decode()
    token = TOKEN.search(page)
    data = {"csrfmiddlewaretoken": token.group(1) if token else client.cookies["csrftoken"].value}
    return client.post(f"/admin/django_xjobs/job/paused-jobs/{action}/", {**data, **form})


def test_pause_08_change_job_pauses_and_resumes_a_job_from_the_queues_page(db):
    """SPEC PAUSE-08: the queues page lists the paused jobs and keys and, to a user holding
    change_job, pauses a job (until resumed, or for a duration) and resumes it, by a
    CSRF-protected POST; a refused one pauses nothing. The xjobs_job_paused gauge counts it."""
    from django_xjobs import inspect_job_pauses, inspect_limits, metrics
    from tests.metrics.test_metrics import sample, scrape

    viewer = staff_client("viewer", "view_job")
    assert ">Pause</button>" not in viewer.get("/admin/django_xjobs/job/queues/").content.decode()
    assert _pause_job(viewer, "pause", name="tests.jobs.ok").status_code == 403
    assert inspect_job_pauses() == []
    client = staff_client("operator", "view_job", "change_job")
    refused = client.post("/admin/django_xjobs/job/paused-jobs/pause/", {"name": "tests.jobs.ok"})
    assert refused.status_code == 403 and inspect_job_pauses() == []
    assert (
        _pause_job(client, "pause", name="tests.jobs.ok", key="", **{"for": ""}).status_code == 302
    )
    [pause] = inspect_job_pauses()
    assert (pause.job, pause.key, pause.paused_by, pause.paused_until) == (
        "tests.jobs.ok",
        None,
        "admin:operator",
        None,
    )
    metrics.clear_cache()
    assert sample(scrape()[1], "xjobs_job_paused", job="tests.jobs.ok") == 1.0
    page = client.get("/admin/django_xjobs/job/queues/").content.decode()
    assert 'id="xjobs-job-pauses"' in page and "(the whole job)" in page
    assert _pause_job(client, "resume", name="tests.jobs.ok").status_code == 302
    assert inspect_job_pauses() == []
    metrics.clear_cache()  # a scrape reads the database at most every 15 s
    assert sample(scrape()[1], "xjobs_job_paused", job="tests.jobs.ok") is None
    _pause_job(client, "pause", name="tests.jobs.backs_off", key="acme", **{"for": "2h"})
    assert inspect_job_pauses() == []  # a key's pause with an end is in the key's own row
    [key] = [k for k in inspect_limits() if k.job == "tests.jobs.backs_off"]
    assert key.paused_until is not None
    page = client.get("/admin/django_xjobs/job/queues/").content.decode()
    assert "No job is paused." in page
