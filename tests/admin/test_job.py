"""Issue 30: the job page opens with its state as a badge, why it is not running (checked
against the database), its next attempt and the Retry / Cancel buttons; a read-only row is not
titled "Change job"; the list shows the state as a coloured badge."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from django_xjobs import operations
from tests import jobs


@pytest.fixture
def admin_client(client, db):
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


def page(client, job_id) -> str:
    response = client.get(f"/admin/django_xjobs/job/{job_id}/change/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_delayed_job_page_says_why_and_when_its_next_attempt_is(admin_client):
    job = jobs.ok.using(delay="7m").enqueue(n=1)
    operations.pause_queue("default", by="ops:alice")
    html = page(admin_client, job.id)
    assert '<li data-code="scheduled">scheduled for' in html
    assert '<li data-code="queue_paused">queue &#x27;default&#x27; is paused by ops:alice' in html
    assert '<li data-code="no_worker">' in html
    assert "in 7m, at " in html or "in 6m " in html
    assert 'class="xjobs-state xjobs-state-delayed"' in html
    assert 'value="cancel">Cancel</button>' in html
    assert "<h1>Job tests.jobs.ok</h1>" in html and "Change job" not in html


def test_a_dead_job_page_says_it_ended_and_offers_retry(admin_client):
    job = jobs.terminal.enqueue(n=1)
    from django_xjobs.testing import run_until_idle

    run_until_idle()
    html = page(admin_client, job.id)
    assert "it has ended: dead (terminal)" in html
    assert 'value="retry">Retry</button>' in html
    assert 'class="xjobs-state xjobs-state-dead"' in html


def test_the_list_shows_states_as_badges(admin_client):
    jobs.ok.enqueue(n=1)
    html = admin_client.get("/admin/django_xjobs/job/").content.decode()
    assert 'class="xjobs-state xjobs-state-ready"' in html


def test_read_only_pages_are_not_titled_change(admin_client):
    from django_xjobs.drivers import get_driver
    from django_xjobs.drivers.contract import Presence

    get_driver().runs().renew_presence(Presence("w-1", "host", 1, ("default",), 0), ttl=60)
    html = admin_client.get("/admin/django_xjobs/worker/w-1/change/").content.decode()
    assert "Change worker" not in html and "<h1>Worker</h1>" in html


#: every page the library draws itself (django_xjobs/admin/_page.html)
LIBRARY_PAGES = [
    "/admin/django_xjobs/job/queues/",
    "/admin/django_xjobs/job/crons/",
    "/admin/django_xjobs/job/overview/?refresh=off",
]
#: the library's pages on Django's own templates (change lists and a change page)
FRAMED_PAGES = [
    "/admin/django_xjobs/job/",
    "/admin/django_xjobs/outboxentry/",
    "/admin/django_xjobs/worker/",
]


def breadcrumbs(html: str) -> str:
    """The breadcrumb markup: what Django's base template wraps in its breadcrumbs <nav>."""
    start = html.index('<nav aria-label="Breadcrumbs">')
    return html[start : html.index("</nav>", start)]


def opening(markup: str) -> str:
    """The first element inside the breadcrumbs <nav>: ``<ol class="breadcrumbs">`` or 5.2's
    ``<div class="breadcrumbs">``."""
    inner = markup.split(">", 1)[1]
    return inner[inner.index("<") : inner.index(">") + 1]


@pytest.mark.parametrize("url", LIBRARY_PAGES)
def test_the_library_pages_use_django_6_breadcrumb_markup_there(admin_client, monkeypatch, url):
    import django

    monkeypatch.setattr(django, "VERSION", (6, 0, 0, "final", 0))
    markup = breadcrumbs(admin_client.get(url).content.decode())
    assert opening(markup) == '<ol class="breadcrumbs">' and "<div" not in markup
    assert markup.count("<li>") == 3 and '<li aria-current="page">' in markup
    assert 'href="/admin/django_xjobs/job/"' in markup and "&rsaquo;" not in markup
    monkeypatch.setattr(django, "VERSION", (5, 2, 0, "final", 0))
    markup = breadcrumbs(admin_client.get(url).content.decode())
    assert opening(markup) == '<div class="breadcrumbs">'


@pytest.mark.parametrize("url", LIBRARY_PAGES + FRAMED_PAGES)
def test_every_library_page_draws_breadcrumbs_as_djangos_own_pages_do(admin_client, url):
    """On the Django installed, each page of the app opens its breadcrumbs with the element
    Django's own change list uses (issue 30: the queues and crons pages once drew 5.2's
    markup on Django 6, which its stylesheet no longer styles), inside the base template's
    breadcrumbs <nav>, ending on the page itself."""
    own = opening(breadcrumbs(admin_client.get("/admin/auth/user/").content.decode()))
    html = admin_client.get(url).content.decode()
    assert html.count('<nav aria-label="Breadcrumbs">') == 1
    markup = breadcrumbs(html)
    assert opening(markup) == own
    assert 'href="/admin/"' in markup and 'href="/admin/django_xjobs/"' in markup


def test_the_list_shows_progress_compactly_only_for_jobs_that_report_it(admin_client):
    from django_xjobs.drivers import get_driver
    from tests.drivers.contract.support import claim, request

    driver = get_driver()
    for key in ("counted", "open-ended", "silent"):
        driver.jobs().enqueue(request(key=key))
    held = {h.idempotency_key: h for h in claim(driver)}
    note = "copying invoices " * 20
    counted, open_ended = held["counted"], held["open-ended"]
    assert driver.runs().progress(
        counted.id, counted.lease_token, {"done": 3, "total": 10, "note": note}
    )
    assert driver.runs().progress(open_ended.id, open_ended.lease_token, {"done": 7, "note": ""})
    response = admin_client.get("/admin/django_xjobs/job/")
    html = response.content.decode()
    assert '<th scope="col" class="column-progress_column">' in html
    cells = {}
    for row in response.context["cl"].result_list:
        cells[row.idempotency_key] = response.context["cl"].model_admin.progress_column(row)
    assert cells["silent"] == ""
    assert cells["open-ended"] == '<span title="7">7</span>'
    assert '<progress value="30" max="100"' in cells["counted"]
    assert cells["counted"].endswith("</progress> 3/10</span>")
    # the note is on hover only: the cell's text is "3/10", never the long note
    assert f'title="3/10 (30%) {note.strip()}"' in cells["counted"]
    assert f"</progress> 3/10 {note.strip()}" not in html and cells["counted"] in html


# --- issue 42: the header block, one state word, one time format ------------------------------


def header(html: str) -> str:
    start = html.index('<div id="xjobs-job-header"')
    return html[start : html.index("</dl></div>", start)]


def test_the_page_opens_with_state_stop_reason_last_error_attempt_why_and_next_attempt(
    admin_client,
):
    job = jobs.terminal.enqueue(n=2)
    from django_xjobs.testing import run_until_idle

    run_until_idle()
    html = page(admin_client, job.id)
    block = header(html)
    for label in ("State", "Attempt", "Stop reason", "Next attempt", "Last error"):
        assert f"<dt>{label}</dt>" in block, label
    assert "xjobs-state-dead" in block and "<dd>terminal</dd>" in block
    assert "X_TERMINAL: the card was declined" in block and "<dd>1 of 5</dd>" in block
    assert 'data-code="finished"' in block
    # the header comes before every fieldset, and nothing repeats it below
    assert html.index('id="xjobs-job-header"') < html.index("<fieldset")
    assert "Why it stopped" not in html


def test_a_running_job_has_no_why_it_stopped(admin_client):
    from django_xjobs.drivers import get_driver
    from tests.drivers.contract.support import claim

    job = jobs.ok.enqueue(n=3)
    claim(get_driver())
    html = page(admin_client, job.id)
    assert "Why it stopped" not in html
    assert 'data-code="running"' in header(html) and "<dt>Where it runs</dt>" in header(html)


def test_times_are_to_the_second_in_one_format(admin_client):
    import re

    job = jobs.ok.using(delay="7m").enqueue(n=4)
    html = page(admin_client, job.id)
    body = html[html.index('id="content-main"') :]
    stamps = re.findall(r"\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC\b", body)
    assert len(stamps) >= 3  # the next attempt, the why line, run at and created at
    # Django's own format (minutes, "a.m.") appears nowhere in the row's times
    assert not re.search(r"\b\d{1,2}:\d{2} [ap]\.m\.", body)


def test_a_job_that_never_ran_is_at_attempt_0_and_runs_after_its_dependencies(admin_client):
    first = jobs.ok.enqueue(n=5)
    waits = jobs.ok.using(after=[first.id]).enqueue(n=6)
    html = page(admin_client, waits.id)
    assert "<dd>0 of 3</dd>" in header(html) and "9999" not in html
    assert "runs after its dependencies" in header(html)
    listing = admin_client.get("/admin/django_xjobs/job/").content.decode()
    assert "9999" not in listing and "runs after its dependencies" in listing
    assert '<td class="field-attempt_of">0 of 3</td>' in listing


def test_snoozes_are_listed_as_snoozes_with_no_empty_traceback_heading(admin_client):
    from django_xjobs.testing import run_until_idle

    job = jobs.snoozer.enqueue(token="page-snooze", times=1, seconds=60)
    run_until_idle()
    html = page(admin_client, job.id)
    assert "no failed attempts" in html and "Snoozes (its handler called" in html
    assert "snoozed for 1m" in html
    assert "<summary>traceback</summary>" not in html


def test_the_title_says_the_state_the_badge_says(admin_client):
    """A retry backing off is stored ``ready`` with a later run_at: the badge said delayed, the
    page title ready."""
    from django_xjobs.drivers import get_driver
    from django_xjobs.drivers.contract import RetryAt
    from tests.drivers.contract.support import claim

    job = jobs.ok.enqueue(n=7)
    [held] = claim(get_driver())
    get_driver().runs().retry(RetryAt(held.id, held.lease_token, delay=3600, error="boom"))
    html = page(admin_client, job.id)
    assert f"tests.jobs.ok [delayed] {job.id}" in html and "[ready]" not in html
    assert "xjobs-state-delayed" in header(html)
