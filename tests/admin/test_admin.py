"""The admin: list, filters, the detail page with its step timeline, the operator actions, and
the views beside it (queues, dead letters, cron schedules, outbox, fleet slots)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import User
from django.utils import timezone

from django_xjobs.clock import FrozenClock
from django_xjobs.models import (
    Job,
    JobLease,
    OutboxEntry,
    SchedulerLeader,
    SchedulerState,
    Worker,
)
from django_xjobs.testing import run_to_completion, run_until_idle
from django_xjobs.testing.factories import DeadJobFactory, SleepingJobFactory, StagedOutboxFactory
from tests import jobs, tasks

HOUR = timedelta(hours=1)
FIRED = datetime(2026, 1, 2, 3, 0, tzinfo=UTC)


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
    for fragment in ("step timeline", ">a<", ">b<", ">c<", "completed", "[redacted]"):
        assert fragment in body
    # its input is named "token", a secret key: masked in the input and in the key made from it
    assert "admin-detail" not in body


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
    assert "Queued again" in text and "X_JOB_NOT_RETRYABLE" in text
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


# --- the views beside the job list: queues, dead letters, crons, outbox, fleet slots -------------


def test_the_job_list_links_every_view_and_counts_the_dead_letters(admin_client):
    jobs.terminal.enqueue(n=10)
    jobs.terminal.enqueue(n=11)
    jobs.ok.enqueue(n=12)
    run_until_idle()
    text = admin_client.get("/admin/django_xjobs/job/").content.decode()
    for link in (
        'href="/admin/django_xjobs/job/queues/"',
        'href="/admin/django_xjobs/job/?state__exact=dead">Dead letters (2)<',
        'href="/admin/django_xjobs/job/crons/"',
        'href="/admin/django_xjobs/outboxentry/"',
        'href="/admin/django_xjobs/joblease/"',
    ):
        assert link in text
    dead = admin_client.get("/admin/django_xjobs/job/?state__exact=dead")
    assert sorted(j.idempotency_key for j in dead.context["cl"].result_list) == [
        "terminal:10",
        "terminal:11",
    ]


def test_the_queue_overview_shows_each_queues_depth_and_links_to_its_jobs(admin_client):
    jobs.terminal.enqueue(n=20)
    run_until_idle()
    old = jobs.ok.enqueue(n=21).id
    jobs.ok.enqueue(n=22)
    jobs.ok.using(delay="1h").enqueue(n=23)
    jobs.on_other_queue.enqueue(n=24)
    Job.objects.filter(id=old).update(run_at=timezone.now() - timedelta(seconds=7230))
    JobLease.objects.create(
        lease_key="tests.jobs.ledger", slot=0, holder="w1", expires_at=timezone.now() + HOUR
    )
    page = admin_client.get("/admin/django_xjobs/job/queues/")
    assert page.status_code == 200
    rows = {r["queue"]: r for r in page.context["rows"]}
    counts = ("ready", "delayed", "running", "suspended", "dead")
    assert {q: tuple(r[c] for c in counts) for q, r in rows.items()} == {
        "default": (2, 1, 0, 0, 1),
        "other": (1, 0, 0, 0, 0),
    }
    assert rows["default"]["oldest_ready"] == "2h 0m"
    assert page.context["totals"] == {
        "ready": 3,
        "delayed": 1,
        "running": 0,
        "suspended": 0,
        "dead": 1,
    }
    assert page.context["slots_held"] == 1 and page.context["leader"] is None
    text = page.content.decode()
    assert 'href="/admin/django_xjobs/job/?queue__exact=default&amp;state__exact=dead"' in text
    assert 'href="/admin/django_xjobs/job/?queue__exact=other"' in text
    assert "no scheduler is running" in text


def test_the_cron_schedules_page_has_schedule_policy_last_and_next_run_and_leader(
    admin_client,
):
    from tests import crons

    SchedulerState.objects.create(task_name="tests.daily", last_fired_at=FIRED)
    SchedulerState.objects.create(task_name="tests.renamed_long_ago", last_fired_at=FIRED)
    SchedulerLeader.objects.create(
        lock_key="scheduler", holder="host-a:4242", expires_at=timezone.now() + HOUR
    )
    before = timezone.now()
    page = admin_client.get("/admin/django_xjobs/job/crons/")
    assert page.status_code == 200
    listed = {t["name"]: t for t in page.context["crons"]}
    daily = listed["tests.daily"]
    assert (daily["schedule"], daily["tz"], daily["catch_up"]) == ("0 3 * * *", "UTC", "skip")
    assert daily["last_fired"] == FIRED and daily["jobs"] == ["tests.jobs.ok"]
    assert daily["next_run"] == crons.daily.next_occurrence(before)
    assert listed["tests.hourly_once"]["catch_up"] == "run-once"
    assert listed["tests.daily_all"]["last_fired"] is None
    assert " 02:00 Europe/Berlin (" in listed["tests.berlin_2am"]["next_run_text"]
    assert page.context["orphans"] == [("tests.renamed_long_ago", FIRED)]
    text = page.content.decode()
    for fragment in ("<code>0 3 * * *</code>", "2026-01-02 03:00:00 UTC", "host-a:4242", "never"):
        assert fragment in text
    SchedulerLeader.objects.update(expires_at=timezone.now() - HOUR)
    lapsed = admin_client.get("/admin/django_xjobs/job/crons/").content.decode()
    assert "the last leader, host-a:4242, let its lease lapse" in lapsed
    watermarks = admin_client.get("/admin/django_xjobs/schedulerstate/")
    assert [s.task_name for s in watermarks.context["cl"].result_list] == [
        "tests.daily",
        "tests.renamed_long_ago",
    ]


def test_the_outbox_lists_staged_rows_with_their_age_and_filters_by_status(admin_client):
    now = timezone.now()
    staged = {"job": "tests.jobs.ok", "input": {"n": 1}, "now": now - timedelta(seconds=95)}
    waiting = StagedOutboxFactory(idempotency_key="ok:1", **staged)
    StagedOutboxFactory(idempotency_key="ok:2", claimed_by="relay-7", claimed_at=now, **staged)
    StagedOutboxFactory(idempotency_key="ok:3", published_at=now, **staged)
    page = admin_client.get("/admin/django_xjobs/outboxentry/")
    assert page.status_code == 200 and len(page.context["cl"].result_list) == 3
    text = page.content.decode()
    assert re.search(r"<strong>default</strong> 2 \(oldest 1m 3\ds\)", text)
    assert len(re.findall(r'<td class="field-age">1m 3\ds</td>', text)) == 2
    assert "relay-7" in text and "claimed" in text
    pending = admin_client.get("/admin/django_xjobs/outboxentry/?status=pending")
    keys = sorted(e.idempotency_key for e in pending.context["cl"].result_list)
    assert keys == ["ok:1", "ok:2"]
    published = admin_client.get("/admin/django_xjobs/outboxentry/?status=published")
    assert [e.idempotency_key for e in published.context["cl"].result_list] == ["ok:3"]
    # view-only: no add form, and a change page that refuses a POST
    assert admin_client.get("/admin/django_xjobs/outboxentry/add/").status_code == 403
    change = f"/admin/django_xjobs/outboxentry/{waiting.pk}/change/"
    assert admin_client.get(change).status_code == 200
    assert admin_client.post(change, {"job": "tests.jobs.fails"}).status_code == 403
    assert OutboxEntry.objects.get(pk=waiting.pk).job == "tests.jobs.ok"


def test_the_fleet_slots_show_who_holds_each_and_whether_it_is_live(admin_client):
    now = timezone.now()
    JobLease.objects.create(
        lease_key="tests.jobs.ledger", slot=0, holder="w1", expires_at=now + HOUR
    )
    JobLease.objects.create(
        lease_key="tests.jobs.ledger", slot=1, holder="w2", expires_at=now - HOUR
    )
    page = admin_client.get("/admin/django_xjobs/joblease/")
    assert page.status_code == 200
    assert [(s.slot, s.holder, s.is_live) for s in page.context["cl"].result_list] == [
        (0, "w1", True),
        (1, "w2", False),
    ]
    text = page.content.decode()
    assert 'alt="True"' in text and 'alt="False"' in text
    held = admin_client.get("/admin/django_xjobs/joblease/?live=yes")
    assert [s.holder for s in held.context["cl"].result_list] == ["w1"]
    expired = admin_client.get("/admin/django_xjobs/joblease/?live=no")
    assert [s.holder for s in expired.context["cl"].result_list] == ["w2"]


@pytest.mark.parametrize(
    "url", ["/admin/django_xjobs/job/queues/", "/admin/django_xjobs/job/crons/"]
)
def test_the_custom_views_need_a_staff_login_and_the_view_permission(client, db, url):
    anonymous = client.get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")
    client.force_login(User.objects.create_user("visitor", password="pw"))
    not_staff = client.get(url)
    assert not_staff.status_code == 302 and not_staff["Location"].startswith("/admin/login/")
    client.force_login(User.objects.create_user("clerk", password="pw", is_staff=True))
    assert client.get(url).status_code == 403


def test_age_reads_like_an_operator_would_say_it():
    from django_xjobs.durations import format_span as _age

    assert [_age(s) for s in (0.42, 42, 192, 7500, 273600)] == [
        "0.4s",
        "42s",
        "3m 12s",
        "2h 5m",
        "3d 4h",
    ]


def test_retry_from_a_chosen_step_on_the_detail_page(admin_client):
    """The detail page offers 'retry from here' per step of a dead job; it goes through
    retry_job(from_step=...): that step and later ones are dropped, earlier ones replay."""
    from django_xjobs.drivers import get_driver

    job_id = DeadJobFactory(
        name="tests.jobs.fails_at_b", input={"token": "admin-retry-step"}, steps=["a", "b", "c"]
    ).id
    page = admin_client.get(f"/admin/django_xjobs/job/{job_id}/change/").content.decode()
    assert page.count("retry from here") == 3
    response = admin_client.post(
        f"/admin/django_xjobs/job/{job_id}/retry-from-step/", {"step": "b"}, follow=True
    )
    assert "Queued again from step &#x27;b&#x27;" in response.content.decode()
    row = Job.objects.get(id=job_id)
    assert row.state == "ready"
    assert [s.name for s in get_driver().steps().list(row.run_id)] == ["a"]
    refused = admin_client.post(
        f"/admin/django_xjobs/job/{job_id}/retry-from-step/", {"step": "a"}, follow=True
    )
    assert "X_JOB_NOT_RETRYABLE" in refused.content.decode()
    assert admin_client.get(f"/admin/django_xjobs/job/{job_id}/retry-from-step/").status_code == 403


def test_the_detail_page_shows_when_the_job_started_and_was_last_attempted(admin_client):
    job_id = jobs.ok.enqueue(n=31).id
    run_until_idle()
    row = Job.objects.get(id=job_id)
    assert row.started_at is not None and row.last_attempted_at is not None
    page = admin_client.get(f"/admin/django_xjobs/job/{job_id}/change/")
    fields = page.context["adminform"].form.fields
    assert {"started_at", "last_attempted_at"} <= set(page.context["adminform"].readonly_fields)
    assert not {"started_at", "last_attempted_at"} & set(fields)  # shown, never a form input
    body = page.content.decode()
    for label in ("Started at", "Last attempted at", "When the first attempt was claimed"):
        assert label in body, label


# --- operator safety (issue 10, item 6) and unknown job names (item 3) --------------------------


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_the_job_page_is_read_only_without_save_buttons(admin_client):
    job_id = jobs.ok.enqueue(n=30).id
    page = admin_client.get(f"/admin/django_xjobs/job/{job_id}/change/")
    text = page.content.decode()
    assert page.status_code == 200 and "tests.jobs.ok" in text
    for button in ('name="_save"', 'name="_continue"', 'name="_addanother"', "deletelink"):
        assert button not in text, button
    posted = admin_client.post(
        f"/admin/django_xjobs/job/{job_id}/change/", {"state": "done"}, follow=True
    )
    assert any("not edited by hand" in m for m in messages_of(posted))
    assert Job.objects.get(id=job_id).state == "ready"
    assert not LogEntry.objects.exists()


def test_retry_and_cancel_write_the_admin_history_with_the_user(admin_client):
    """Each retry and cancel that acted is a LogEntry by the user; a refused one is not."""
    dead = jobs.terminal.enqueue(n=31).id
    finished = jobs.ok.enqueue(n=33).id
    run_until_idle()
    ready = jobs.ok.enqueue(n=32).id
    for action, ids in (("retry_selected", [dead]), ("cancel_selected", [ready, finished])):
        admin_client.post("/admin/django_xjobs/job/", {"action": action, "_selected_action": ids})
    history = {
        (e.object_id, e.user.username, e.action_flag, e.change_message)
        for e in LogEntry.objects.all()
    }
    assert history == {
        (str(dead), "admin", CHANGE, "Queued again from the admin."),
        (str(ready), "admin", CHANGE, "Cancelled from the admin."),
    }
    assert Job.objects.get(id=finished).state == "done"


def test_messages_keep_job_names_as_written(admin_client):
    dead = jobs.terminal.enqueue(n=34).id
    run_until_idle()
    response = admin_client.post(
        "/admin/django_xjobs/job/",
        {"action": "retry_selected", "_selected_action": [str(dead)]},
        follow=True,
    )
    assert messages_of(response) == [
        f"Queued again 1 of 1 selected job: tests.jobs.terminal {dead}"
    ]
    text = response.content.decode()
    assert f"tests.jobs.terminal {dead}" in text and "Tests.jobs" not in text


def test_a_refused_cancel_says_what_to_do_in_the_admin(admin_client):
    dead = jobs.terminal.enqueue(n=35).id
    run_until_idle()
    response = admin_client.post(
        "/admin/django_xjobs/job/",
        {"action": "cancel_selected", "_selected_action": [str(dead)]},
        follow=True,
    )
    [message] = messages_of(response)
    assert message.startswith(
        "Cancelled 0 of 1 selected job. Could not cancel 1: X_JOB_NOT_CANCELLABLE"
    )
    assert f"(tests.jobs.terminal {dead})" in message
    assert "“Retry selected jobs”" in message
    assert "retry_job(" not in message and "force=True" not in message
    assert Job.objects.get(id=dead).state == "dead" and not LogEntry.objects.exists()


def test_the_last_error_column_is_one_short_line_with_the_full_text_on_hover(admin_client):
    from django_xjobs import operations
    from django_xjobs.admin import SHORT_ERROR

    job_id = jobs.ok.enqueue(n=36).id
    reason = "the customer wrote in to ask that " + "we stop this order please " * 12
    operations.cancel_job(job_id, reason=reason.strip())
    text = admin_client.get("/admin/django_xjobs/job/").content.decode()
    cell = re.search(r'<span class="xjobs-error" title="([^"]*)">([^<]*)</span>', text)
    assert cell is not None
    assert cell.group(1) == reason.strip()
    assert cell.group(2).endswith("…") and len(cell.group(2)) == SHORT_ERROR
    # the browser keeps it on one line however wide a word is
    assert re.search(r"\.xjobs-error \{[^}]*max-width: 18em;[^}]*text-overflow: ellipsis", text)


def park_an_unknown_job(n: int) -> str:
    """A queued job whose name no process registers any more (a rename): a run parks it."""
    job_id = jobs.ok.enqueue(n=n).id
    Job.objects.filter(id=job_id).update(name="tests.jobs.renamed_away")
    run_until_idle()
    row = Job.objects.get(id=job_id)
    assert row.state == "suspended" and row.last_error.startswith("X_JOB_UNKNOWN")
    return str(job_id)


def test_parked_unknown_jobs_have_a_filter_and_a_label(admin_client):
    parked = park_an_unknown_job(40)
    jobs.ok.enqueue(n=41)
    SleepingJobFactory(name="tests.jobs.ok", input={"n": 42})  # suspended otherwise
    filtered = admin_client.get("/admin/django_xjobs/job/?unknown=parked")
    assert [str(j.id) for j in filtered.context["cl"].result_list] == [parked]
    text = filtered.content.decode()
    assert "parked: no process registers the name" in text  # the filter itself
    assert text.count("(unknown job)</span>") == 1
    tasks.add.enqueue(1, 2)  # a django.tasks task's row: known by its module path
    anywhere = admin_client.get("/admin/django_xjobs/job/?unknown=here")
    assert [str(j.id) for j in anywhere.context["cl"].result_list] == [parked]


def test_the_queue_overview_counts_parked_unknown_jobs(admin_client):
    park_an_unknown_job(43)
    park_an_unknown_job(44)
    jobs.on_other_queue.enqueue(n=45)
    page = admin_client.get("/admin/django_xjobs/job/queues/")
    rows = {r["queue"]: r for r in page.context["rows"]}
    assert (rows["default"]["suspended"], rows["default"]["unknown"]) == (2, 2)
    assert rows["other"]["unknown"] == 0 and page.context["unknown_total"] == 2
    text = page.content.decode()
    assert "of them unknown job" in text
    assert 'href="/admin/django_xjobs/job/?queue__exact=default&amp;unknown=parked"' in text


def test_the_workers_page_lists_each_worker_alive_or_lapsed(admin_client):
    now = timezone.now()
    Worker.objects.create(
        id="worker-a",
        host="web-1",
        pid=41,
        queues=["default", "mail"],
        in_flight=3,
        started_at=now - HOUR,
        expires_at=now + HOUR,
    )
    Worker.objects.create(
        id="worker-b",
        host="web-2",
        pid=42,
        queues=["default"],
        expires_at=now - HOUR,
        started_at=now,
    )
    page = admin_client.get("/admin/django_xjobs/worker/?alive=all")
    assert page.status_code == 200
    rows = page.context["cl"].result_list
    assert [(w.id, w.pid, w.in_flight, w.is_alive) for w in rows] == [
        ("worker-a", 41, 3, True),
        ("worker-b", 42, 0, False),
    ]
    text = page.content.decode()
    assert "default, mail" in text and "web-2" in text
    # gone an hour ago: aged out of the page unless every row is asked for (issue 42)
    shown = admin_client.get("/admin/django_xjobs/worker/").context["cl"].result_list
    assert [w.id for w in shown] == ["worker-a"]
    alive = admin_client.get("/admin/django_xjobs/worker/?alive=yes")
    assert [w.id for w in alive.context["cl"].result_list] == ["worker-a"]
    lapsed = admin_client.get("/admin/django_xjobs/worker/?alive=no")
    assert [w.id for w in lapsed.context["cl"].result_list] == ["worker-b"]
    assert admin_client.get("/admin/django_xjobs/worker/add/").status_code == 403
    assert (
        "/admin/django_xjobs/worker/"
        in admin_client.get("/admin/django_xjobs/job/").content.decode()
    )


def test_a_bulk_action_says_what_it_did_in_one_message(admin_client):
    """Issue 42: five selected jobs, three cancelled and two refused — one message, counted, the
    refused named with their code and the fix."""
    ended = [jobs.terminal.enqueue(n=70 + n).id for n in range(2)]
    run_until_idle()
    live = [jobs.ok.using(delay="1h").enqueue(n=80 + n).id for n in range(3)]
    response = admin_client.post(
        "/admin/django_xjobs/job/",
        {"action": "cancel_selected", "_selected_action": [str(i) for i in live + ended]},
        follow=True,
    )
    [message] = messages_of(response)
    assert message.startswith("Cancelled 3 of 5 selected jobs: ")
    assert "Could not cancel 2: X_JOB_NOT_CANCELLABLE (tests.jobs.terminal " in message
    assert all(str(i) in message for i in live + ended)


def test_the_workers_page_says_what_each_worker_runs_now_and_since_when(admin_client):
    """Issue 42: each live worker's runs, linked, with the time each began; a worker that exited
    a moment ago is still listed, one that exited long ago is not."""
    from django_xjobs.drivers import get_driver
    from django_xjobs.drivers.contract import Presence
    from tests.drivers.contract.support import claim

    driver = get_driver()
    driver.runs().renew_presence(Presence("w-busy", "web-1", 7, ("default",), 2), ttl=600)
    driver.runs().renew_presence(Presence("w-idle", "web-2", 8, ("default",), 0), ttl=600)
    first, second = jobs.ok.enqueue(n=90).id, jobs.five_steps.enqueue(token="w-runs").id
    claim(driver, worker="w-busy")
    now = timezone.now()
    Worker.objects.create(
        id="w-exited-long-ago",
        host="web-3",
        pid=9,
        queues=["default"],
        started_at=now - 3 * HOUR,
        expires_at=now - 2 * HOUR,
        stopped_at=now - 2 * HOUR,
    )
    Worker.objects.create(
        id="w-just-exited",
        host="web-4",
        pid=10,
        queues=["default"],
        started_at=now - HOUR,
        expires_at=now,
        stopped_at=now,
    )
    page = admin_client.get("/admin/django_xjobs/worker/")
    shown = [w.id for w in page.context["cl"].result_list]
    assert "w-exited-long-ago" not in shown and {"w-busy", "w-idle", "w-just-exited"} <= set(shown)
    text = page.content.decode()
    busy = text[text.index('href="/admin/django_xjobs/worker/w-busy/change/"') :]
    cell = busy[busy.index('<ul class="xjobs-runs-now"') : busy.index("</ul>")]
    assert f'href="/admin/django_xjobs/job/{first}/change/">tests.jobs.ok</a> since ' in cell
    assert f'href="/admin/django_xjobs/job/{second}/change/">tests.jobs.five_steps</a>' in cell
    assert re.search(r"since \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC \(", cell)
    detail = admin_client.get("/admin/django_xjobs/worker/w-busy/change/").content.decode()
    assert f"/admin/django_xjobs/job/{first}/change/" in detail


#: the links every page of the app opens with (admin/pages.py nav_links)
NAV = (
    "Jobs",
    "Overview",
    "Queues",
    "Dead letters",
    "Cron schedules",
    "Batches",
    "Events",
    "Outbox",
    "Fleet slots",
    "Workers",
    "Backfills",
    "Scheduler states",
)


def test_every_page_of_the_app_opens_with_the_same_one_header(admin_client):
    """Issue 42: one header (the nav pills) on every page — the lists, the library's own pages
    and every row's page, Outbox, Scheduler states and Job batches included."""
    from django_xjobs import Batch, publish_event
    from django_xjobs.drivers import get_driver
    from django_xjobs.drivers.contract import Presence
    from django_xjobs.models import Backfill, JobBatch, JobLease, SchedulerState

    job = jobs.ok.enqueue(n=95).id
    event = publish_event("tests.nav", {"n": 95}).id
    entry = StagedOutboxFactory()
    get_driver().runs().renew_presence(Presence("w-nav", "web", 1, ("default",), 0), ttl=60)
    with Batch():
        jobs.ok.enqueue(n=96)
    batch = JobBatch.objects.get()
    state = SchedulerState.objects.create(task_name="tests.crons.nav", last_fired_at=timezone.now())
    lease = JobLease.objects.create(
        lease_key="job:tests.jobs.exclusive", slot=0, holder="w:x", expires_at=timezone.now()
    )
    backfill = Backfill.objects.create(
        run_id=job, name="nav", checksum="c", app_version="1", status="completed"
    )
    pages = [
        "/admin/django_xjobs/job/",
        f"/admin/django_xjobs/job/{job}/change/",
        "/admin/django_xjobs/job/queues/",
        "/admin/django_xjobs/job/overview/?refresh=off",
        "/admin/django_xjobs/job/crons/",
        "/admin/django_xjobs/outboxentry/",
        f"/admin/django_xjobs/outboxentry/{entry.pk}/change/",
        "/admin/django_xjobs/schedulerstate/",
        f"/admin/django_xjobs/schedulerstate/{state.pk}/change/",
        "/admin/django_xjobs/jobbatch/",
        f"/admin/django_xjobs/jobbatch/{batch.pk}/change/",
        "/admin/django_xjobs/worker/",
        "/admin/django_xjobs/worker/w-nav/change/",
        "/admin/django_xjobs/joblease/",
        f"/admin/django_xjobs/joblease/{lease.pk}/change/",
        "/admin/django_xjobs/backfill/",
        f"/admin/django_xjobs/backfill/{backfill.pk}/change/",
        "/admin/django_xjobs/jobevent/",
        f"/admin/django_xjobs/jobevent/{event}/change/",
    ]
    for url in pages:
        response = admin_client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        tools = re.findall(r'<ul class="object-tools">(.*?)</ul>', html, flags=re.S)
        assert len(tools) == 1, (url, len(tools))
        labels = re.findall(r"<li><a href=\"[^\"]*\">([^<(]+)", tools[0])
        assert tuple(label.strip() for label in labels[: len(NAV)]) == NAV, (url, labels)


def test_the_header_links_only_the_pages_the_user_may_open(client, db):
    from django.contrib.auth.models import Permission

    user = User.objects.create_user("viewer42", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_job"))
    client.force_login(user)
    html = client.get("/admin/django_xjobs/job/").content.decode()
    [tools] = re.findall(r'<ul class="object-tools">(.*?)</ul>', html, flags=re.S)
    labels = [x.strip() for x in re.findall(r"<li><a href=\"[^\"]*\">([^<(]+)", tools)]
    assert labels == ["Jobs", "Overview", "Queues", "Dead letters", "Cron schedules"]
