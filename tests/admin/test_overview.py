"""Issue 30: the admin's fleet overview reads the rollup (never x_jobs per view) and shows, per
queue and job name, what ended, failure rate and p50 / p95, each number linking to the list
behind it; inline SVG, a meta refresh that can be turned off, the view permission required."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_xjobs.drivers import get_driver
from django_xjobs.drivers.contract import Complete, Finish, Presence
from django_xjobs.metrics.overview import overview
from tests.drivers.contract.support import claim, request

URL = "/admin/django_xjobs/job/overview/"


@pytest.fixture
def admin_client(client, db):
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


def fleet() -> None:
    """default: 2 done; mail: 1 dead with an error; a live worker on default."""
    driver = get_driver()
    driver.jobs().enqueue(request(key="a"))
    driver.jobs().enqueue(request(key="b"))
    driver.jobs().enqueue(request(name="tests.jobs.terminal", key="c", queue="mail"))
    held = claim(driver, queues=("default", "mail"))
    driver.runs().complete([Complete(h.id, h.lease_token) for h in held if h.queue == "default"])
    [dead] = [h for h in held if h.queue == "mail"]
    driver.runs().finish(
        Finish(dead.id, dead.lease_token, state="dead", error="X_TERMINAL: declined")
    )
    driver.runs().renew_presence(Presence("w-1", "host", 1, ("default",), 2), ttl=60)


def test_the_overview_shows_the_rollup_figures_with_links(admin_client):
    fleet()
    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get(URL)
    assert page.status_code == 200
    # the history is the rollup's; x_jobs is only counted for the live depth, as on the queues page
    grouped = [q["sql"] for q in queries if "FROM x_jobs" in q["sql"] and "GROUP BY" in q["sql"]]
    assert len(grouped) == 1 and "AS oldest" in grouped[0]
    assert any("FROM x_job_rollup" in q["sql"] for q in queries)
    rows = {r["queue"]: r for r in page.context["rows"]}
    assert (rows["default"]["done"], rows["default"]["dead"]) == (2, 0)
    assert (rows["mail"]["dead"], rows["mail"]["rate"]) == (1, "100%")
    assert rows["default"]["run_p50"].startswith("≤ ")
    dead = parse_qs(urlsplit(rows["mail"]["links"]["dead"]).query)
    assert dead == {"queue__exact": ["mail"], "state__exact": ["dead"]}
    [top] = page.context["top"]
    assert (top["name"], top["latest_error"]) == ("tests.jobs.terminal", "X_TERMINAL: declined")
    html = page.content.decode()
    assert "<svg" in html and 'http-equiv="refresh"' in html
    assert "1 alive" in html and "2 runs in flight" in html
    # the linked list shows the very rows counted
    listed = admin_client.get(rows["mail"]["links"]["dead"])
    assert [j.name for j in listed.context["cl"].result_list] == ["tests.jobs.terminal"]


def test_auto_refresh_can_be_turned_off_and_the_day_window_chosen(admin_client):
    fleet()
    page = admin_client.get(URL, {"refresh": "off", "window": "1d"})
    assert 'http-equiv="refresh"' not in page.content.decode()
    assert page.context["window"] == "1d"
    assert len(overview("1d", page.context["since"]).slot_starts) == 96


def test_the_overview_needs_a_staff_login_and_the_view_permission(client, db):
    anonymous = client.get(URL)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")
    client.force_login(User.objects.create_user("clerk", password="pw", is_staff=True))
    assert client.get(URL).status_code == 403


def test_the_overview_draws_each_queues_depth_over_time(admin_client):
    """The depth series comes from the samples the workers take (x_queue_depth), not from a
    count of x_jobs per page view; each figure links to the list behind it."""
    fleet()
    driver = get_driver()
    driver.jobs().enqueue(request(key="waiting"))
    driver.jobs().enqueue(request(key="later", delay=600))
    empty = admin_client.get(URL).content.decode()
    assert "No depth sampled in this window" in empty
    assert driver.history().sample_depth() == 1
    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get(URL)
    assert any("FROM x_queue_depth" in q["sql"] for q in queries)
    assert not any("x_queue_depth" in q["sql"] and "x_jobs" in q["sql"] for q in queries)
    [row] = page.context["depth_rows"]
    assert (row["queue"], row["latest"].ready, row["latest"].delayed) == ("default", 1, 1)
    html = page.content.decode()
    assert 'id="xjobs-overview-depth"' in html
    assert re.search(
        r"<title>\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC: 1 ready, 1 delayed, 0 running</title>", html
    )
    ready = parse_qs(urlsplit(row["links"]["ready"]).query)
    assert ready == {"queue__exact": ["default"], "state__exact": ["ready"]}
    listed = admin_client.get(row["links"]["delayed"])
    assert [j.idempotency_key for j in listed.context["cl"].result_list] == ["later"]


def test_every_chart_has_a_time_axis_and_each_slot_names_its_minute(admin_client):
    """Issue 42: bars with no time under them, and tooltips with counts but no time."""
    fleet()
    get_driver().history().sample_depth()
    html = admin_client.get(URL, {"refresh": "off"}).content.decode()
    charts = re.findall(r'<svg [^>]*class="xjobs-chart".*?</svg>', html, flags=re.S)
    assert len(charts) >= 3  # what ended per queue and per job, and the depth
    for svg in charts:
        axis = re.findall(r"<text [^>]*>(\d{2}:\d{2})</text>", svg)
        assert len(axis) == 3, svg[:200]  # the window's start, middle and end
        slots = re.findall(r'<rect class="xjobs-slot"[^>]*><title>([^<]*)</title>', svg)
        assert len(slots) == 60  # the hour, a slot a minute, an empty one too
        assert all(re.match(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC: ", t) for t in slots)
    day = admin_client.get(URL, {"refresh": "off", "window": "1d"}).content.decode()
    assert re.search(r"<title>\d{4}-\d{2}-\d{2} \d{2}:\d{2} to \d{2}:\d{2} UTC: ", day)


def test_the_admin_index_links_to_the_overview(admin_client, client, db):
    """Issue 42: the overview had no entry on the admin index."""
    index = admin_client.get("/admin/").content.decode()
    assert 'href="/admin/django_xjobs/overview/"' in index and ">Overview<" in index
    gone = admin_client.get("/admin/django_xjobs/overview/")
    assert gone.status_code == 302 and gone["Location"] == URL.split("?")[0]
    clerk = User.objects.create_user("clerk2", password="pw", is_staff=True)
    client.force_login(clerk)
    assert 'href="/admin/django_xjobs/overview/"' not in client.get("/admin/").content.decode()
    assert client.get("/admin/django_xjobs/overview/").status_code == 403
