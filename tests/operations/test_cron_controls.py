"""Pause, resume and run a cron now (issue 29, SPEC CRONCTL-01..06), on both drivers.

The pause lives in the scheduler's store; the leader skips a paused cron and leaves its
watermark where it was, so resume hands the missed occurrences to the cron's catch-up rule.
The scheduler's time is a ``FrozenClock``: nothing waits on the wall clock.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from uuid import UUID

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.test import Client

import django_xjobs
from django_xjobs import (
    CronUnknownError,
    inspect_crons,
    pause_cron,
    resume_cron,
    run_cron_now,
)
from django_xjobs.clock import FrozenClock
from django_xjobs.errors import InvariantError
from django_xjobs.operations.cron_controls import next_fires
from django_xjobs.scheduler.role import Scheduler
from tests import crons as fixtures  # noqa: F401 - registers the tests.* crons

START = datetime(2026, 7, 26, tzinfo=UTC)
OK = "tests.jobs.ok"


def scheduler(harness, name: str) -> tuple[Scheduler, FrozenClock]:
    clock = FrozenClock(START)
    sched = Scheduler(
        driver=harness.driver,
        store=harness.driver.scheduler(),
        cron_names=[name],
        clock=clock,
    )
    return sched, clock


def run_ats(harness) -> list[datetime]:
    return sorted(r.run_at for r in harness.driver.reads().list_jobs(name=OK, limit=1000))


# --- the API, on both drivers -------------------------------------------------------------------


def test_cronctl_01_a_pause_is_stored_and_the_first_one_wins(harness):
    state = pause_cron("tests.daily", by="ops:alice")
    assert (state.cron, state.paused, state.paused_by) == ("tests.daily", True, "ops:alice")
    assert state.paused_at is not None
    again = pause_cron("tests.daily", by="ops:bob")
    assert (again.paused_at, again.paused_by) == (state.paused_at, "ops:alice")
    # a fresh store object reads it back, as a restarted process would
    assert harness.driver.scheduler().paused_crons() == {"tests.daily"}
    assert resume_cron("tests.daily") == django_xjobs.CronState("tests.daily", False)
    assert harness.driver.scheduler().paused_crons() == frozenset()


@pytest.mark.parametrize("call", [pause_cron, resume_cron, run_cron_now])
def test_cronctl_01_an_undeclared_cron_is_one_clear_error(harness, call):
    with pytest.raises(CronUnknownError) as caught:
        call("tests.no_such_cron")
    assert "tests.daily" in caught.value.hint
    assert harness.driver.scheduler().cron_controls() == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # skip: only the latest missed occurrence (SPEC SCHED-03)
        ("tests.daily", [START + timedelta(days=3, hours=3)]),
        # run-all: every missed occurrence (SPEC SCHED-05)
        ("tests.daily_all", [START + timedelta(days=d, hours=3) for d in range(4)]),
        # run-once: the earliest missed, once (SPEC SCHED-04)
        ("tests.hourly_once", [START + timedelta(hours=1)]),
    ],
)
def test_cronctl_02_03_a_paused_cron_fires_nothing_and_resume_follows_its_catch_up_rule(
    harness, name, expected
):
    sched, clock = scheduler(harness, name)
    assert sched.tick() == []  # the first round arms the watermark (SPEC SCHED-01)
    pause_cron(name)
    clock.advance(timedelta(days=3, hours=12).total_seconds())
    assert sched.tick() == []
    assert sched.paused == {name}
    assert run_ats(harness) == []
    resume_cron(name)
    fired = sched.tick()
    assert [d.occurrence for d in fired] == expected
    assert run_ats(harness) == expected
    assert sched.paused == frozenset()


def test_cronctl_02_pausing_one_cron_leaves_the_others_firing(harness):
    clock = FrozenClock(START)
    sched = Scheduler(
        driver=harness.driver,
        store=harness.driver.scheduler(),
        cron_names=["tests.daily", "tests.daily_all"],
        clock=clock,
    )
    sched.tick()
    pause_cron("tests.daily")
    clock.advance(timedelta(hours=4).total_seconds())
    assert [d.cron for d in sched.tick()] == ["tests.daily_all"]


def test_cronctl_02_a_failed_read_of_the_paused_set_keeps_the_last_one(harness, monkeypatch):
    sched, clock = scheduler(harness, "tests.daily_all")
    sched.tick()
    pause_cron("tests.daily_all")
    sched.tick()

    def unreachable() -> frozenset[str]:
        raise ConnectionError("the database went away")

    monkeypatch.setattr(sched.store, "paused_crons", unreachable)
    clock.advance(timedelta(days=1).total_seconds())
    assert sched.tick() == []  # still paused: an outage never resumes a cron
    assert sched.paused == {"tests.daily_all"}


def test_cronctl_04_run_now_fires_one_extra_occurrence_once_per_key(harness):
    pause_cron("tests.daily")  # paused or not: run now is the operator's explicit call
    first = run_cron_now("tests.daily", key="click-1", by="ops:alice")
    assert not first.deduped and len(first.job_ids) == 1 and first.occurrence is not None
    row = harness.driver.reads().get_job(UUID(first.job_ids[0]))
    assert row.name == OK and row.idempotency_key.startswith("tests.daily:now-click-1:")
    # the double click: the same key enqueues nothing, even once the first run finished
    again = run_cron_now("tests.daily", key="click-1")
    assert (again.deduped, again.job_ids) == (True, ())
    assert len(harness.driver.reads().list_jobs(name=OK, limit=100)) == 1
    # a new key (or none) is a new run
    assert not run_cron_now("tests.daily", key="click-2").deduped
    assert not run_cron_now("tests.daily").deduped
    assert len(harness.driver.reads().list_jobs(name=OK, limit=100)) == 3
    # a run now is not an occurrence: the pause and the watermark are untouched
    assert harness.driver.scheduler().paused_crons() == {"tests.daily"}
    assert harness.driver.scheduler().watermark("tests.daily") is None


@pytest.mark.parametrize("bad", ["", 5, "x" * 201])
def test_cronctl_04_a_bad_key_is_one_clear_error(harness, bad):
    with pytest.raises(InvariantError) as caught:
        run_cron_now("tests.daily", key=bad)
    assert caught.value.hint


def test_cronctl_05_inspect_crons_lists_paused_and_the_next_five_fire_times(harness):
    pause_cron("tests.daily", by="ops:alice")
    listed = {c["name"]: c for c in inspect_crons(now=START)}
    daily = listed["tests.daily"]
    assert (daily["paused"], daily["paused_by"], daily["catch_up"]) == (True, "ops:alice", "skip")
    assert daily["next_fires"] == [
        (START + timedelta(days=d, hours=3)).isoformat() for d in range(5)
    ]
    assert listed["tests.hourly_once"]["paused"] is False
    assert listed["tests.hourly_once"]["next_fires"][-1] == (START + timedelta(hours=5)).isoformat()


def test_next_fires_walks_a_time_zone_in_utc():
    berlin = {c.name: c for c in django_xjobs.registered_crons()}["tests.berlin_2am"]
    fires = next_fires(berlin, START, 2)
    # 02:00 in Berlin's summer is 00:00 UTC; strictly after START, so the 26th's is not listed
    assert fires == [datetime(2026, 7, 27, 0, tzinfo=UTC), datetime(2026, 7, 28, 0, tzinfo=UTC)]


# --- manage.py xjobs crons / cron pause|resume|run --------------------------------------------


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


def test_cronctl_05_the_cli_pauses_resumes_runs_and_lists(db):
    paused = json.loads(xjobs("cron", "pause", "tests.daily", "--json"))
    assert paused["cron"] == "tests.daily" and paused["paused"] is True
    assert paused["paused_by"].startswith("cli")
    listed = {c["name"]: c for c in json.loads(xjobs("crons", "--json"))}
    assert listed["tests.daily"]["paused"] is True and len(listed["tests.daily"]["next_fires"]) == 5
    assert "paused by cli" in xjobs("crons")
    ran = json.loads(xjobs("cron", "run", "tests.daily", "--key", "k1", "--json"))
    assert ran["deduped"] is False and len(ran["job_ids"]) == 1
    assert "nothing enqueued" in xjobs("cron", "run", "tests.daily", "--key", "k1")
    resumed = json.loads(xjobs("cron", "resume", "tests.daily", "--json"))
    assert resumed == {"cron": "tests.daily", "paused": False, "paused_at": None, "paused_by": None}
    assert "catch_up rule" in xjobs("cron", "resume", "tests.daily")


def test_the_cli_refuses_an_undeclared_cron_in_one_line(db):
    with pytest.raises(CommandError) as caught:
        xjobs("cron", "pause", "tests.nope")
    assert "X_CRON_UNKNOWN" in str(caught.value) and "\n" not in str(caught.value)


def test_cronctl_05_the_paused_gauge_follows_pause_and_resume(db):
    from django_xjobs import metrics
    from tests.metrics.test_metrics import sample, scrape

    pause_cron("tests.daily")
    metrics.clear_cache()  # a scrape reads the database at most once per STATS_INTERVAL
    _, series = scrape()
    assert sample(series, "xjobs_cron_paused", cron="tests.daily") == 1
    assert sample(series, "xjobs_cron_paused", cron="tests.daily_all") == 0
    resume_cron("tests.daily")
    metrics.clear_cache()
    _, series = scrape()
    assert sample(series, "xjobs_cron_paused", cron="tests.daily") == 0


# --- the admin's crons page (CRONCTL-06) --------------------------------------------------------

CRONS_PAGE = "/admin/django_xjobs/job/crons/"


def _admin(perms: tuple[str, ...]) -> Client:
    user = User.objects.create_user("operator", password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="django_xjobs", codename__in=perms)
    )
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def _press(client: Client, cron: str, action: str, **data: str):
    client.get(CRONS_PAGE)  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    return client.post(f"{CRONS_PAGE}{cron}/{action}/", {"csrfmiddlewaretoken": token, **data})


def paused_now() -> set[str]:
    return {c["name"] for c in inspect_crons() if c["paused"]}


def test_cronctl_06_view_only_staff_see_no_button_and_cannot_act(db):
    client = _admin(("view_job",))
    page = client.get(CRONS_PAGE)
    assert ">Pause</button>" not in page.content.decode()
    assert len({c["name"]: c for c in page.context["crons"]}["tests.daily"]["next_fires"]) == 5
    for action in ("pause", "resume", "run"):
        assert _press(client, "tests.daily", action).status_code == 403
    assert paused_now() == set()
    assert django_xjobs.inspect_queues()["totals"]["ready"] == 0


def test_cronctl_06_the_buttons_need_the_csrf_token(db):
    client = _admin(("view_job", "change_job"))
    assert client.post(f"{CRONS_PAGE}tests.daily/pause/").status_code == 403
    assert paused_now() == set()


def test_cronctl_06_change_job_pauses_resumes_and_runs_once_per_click(db):
    client = _admin(("view_job", "change_job"))
    page = client.get(CRONS_PAGE)
    html = page.content.decode()
    assert ">Pause</button>" in html and ">Run now</button>" in html
    assert _press(client, "tests.daily", "pause").status_code == 302
    assert paused_now() == {"tests.daily"}
    html = client.get(CRONS_PAGE).content.decode()
    assert "<strong>paused</strong> by admin:operator" in html and ">Resume</button>" in html
    assert _press(client, "tests.daily", "resume").status_code == 302
    assert paused_now() == set()
    # the page's one key, sent twice (a double click): one run
    key = page.context["run_key"]
    assert _press(client, "tests.daily", "run", key=key).status_code == 302
    assert _press(client, "tests.daily", "run", key=key).status_code == 302
    assert django_xjobs.inspect_queues()["totals"]["ready"] == 1
