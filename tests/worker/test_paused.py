"""Pause and resume a queue fleet-wide (issue 29, SPEC CTRL-01..05), on both drivers.

The pause lives in storage, not in a worker: a worker leaves the paused queues out of the
queues it claims from, so a claim with nothing paused is the claim it always was.
"""

from __future__ import annotations

import json
import threading
from io import StringIO

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.test import Client

import django_xjobs
from django_xjobs import inspect_queues, pause_queue, resume_queue
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.errors import DriverUnavailableError, InvariantError
from django_xjobs.worker.paused import PausedQueues
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.drivers.contract.support import VIS
from tests.support.process import ledger, wait_for


def burst(harness):
    worker = Worker(queues=["default", "emails"], concurrency=2, driver=harness.driver, burst=True)
    return worker.run()


def test_ctrl_01_a_pause_is_stored_and_the_first_one_wins(harness):
    state = pause_queue("emails", by="ops:alice")
    assert (state.queue, state.paused, state.paused_by) == ("emails", True, "ops:alice")
    assert state.paused_at is not None
    again = pause_queue("emails", by="ops:bob")
    assert (again.paused_at, again.paused_by) == (state.paused_at, "ops:alice")
    assert harness.driver.limits().paused_queues() == {"emails"}
    assert [c.queue for c in harness.driver.limits().queue_controls()] == ["emails"]


def test_ctrl_03_resume_unpauses_and_resuming_a_running_queue_changes_nothing(harness):
    assert resume_queue("emails") == django_xjobs.QueueState("emails", False)
    pause_queue("emails")
    assert resume_queue("emails").paused is False
    assert harness.driver.limits().paused_queues() == frozenset()
    # the row stays for the queue's other settings; it reads as not paused
    assert [(c.queue, c.paused) for c in harness.driver.limits().queue_controls()] == [
        ("emails", False)
    ]


def test_ctrl_02_a_paused_queue_is_not_claimed_its_neighbours_are(live_harness):
    pause_queue("emails")
    waiting = jobs.emails_ledger.enqueue(token="mail")  # enqueue into a paused queue works
    other = jobs.ledger.enqueue(token="main")
    burst(live_harness)
    assert live_harness.row(other.id).state == "done"
    assert live_harness.row(waiting.id).state == "ready"
    assert ledger("mail", "start") == []

    resume_queue("emails")
    burst(live_harness)
    assert live_harness.row(waiting.id).state == "done"
    # a worker that ran and stopped paused nothing (CTRL-04)
    assert live_harness.driver.limits().paused_queues() == frozenset()


def test_ctrl_02_an_operator_change_wakes_the_listener(live_harness):
    told = threading.Event()
    notifier = live_harness.driver.runs().notify_on_ready(["default"], lambda: None, told.set)
    try:
        if live_harness.driver.name == "postgres":
            # a listener tells once it listens, for what it missed: wait for that first
            wait_for(told.is_set, timeout=10, what="the listener to start")
            told.clear()
        pause_queue("emails")
        wait_for(told.is_set, timeout=10, what="the control notification")
    finally:
        notifier.stop()


def test_ctrl_05_inspect_queues_shows_paused_even_with_no_jobs(harness):
    jobs.ok.enqueue(n=1)
    pause_queue("emails")
    report = {q["queue"]: q for q in inspect_queues()["queues"]}
    assert report["default"]["paused"] is False
    assert report["emails"]["paused"] is True
    assert report["emails"]["ready"] == 0


@pytest.mark.parametrize("bad", ["", "no spaces", None, 5])
def test_a_bad_queue_name_is_one_clear_error(harness, bad):
    with pytest.raises(InvariantError) as caught:
        pause_queue(bad)
    assert caught.value.hint


# --- the admin's queues page: Pause / Resume buttons (CTRL-06) ----------------------------------

QUEUES_PAGE = "/admin/django_xjobs/job/queues/"


def _admin(perms: tuple[str, ...]) -> Client:
    user = User.objects.create_user("operator", password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="django_xjobs", codename__in=perms)
    )
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def _press(client: Client, queue: str, action: str):
    client.get(QUEUES_PAGE)  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    return client.post(
        f"/admin/django_xjobs/job/queues/{queue}/{action}/", {"csrfmiddlewaretoken": token}
    )


def test_ctrl_06_view_only_staff_see_no_button_and_cannot_pause(db):
    jobs.emails_ledger.enqueue(token="admin-view")
    client = _admin(("view_job",))
    page = client.get(QUEUES_PAGE).content.decode()
    assert "emails" in page and ">Pause</button>" not in page
    assert _press(client, "emails", "pause").status_code == 403
    assert inspect_queues_paused() == set()


def test_ctrl_06_change_job_pauses_and_resumes_from_the_queues_page(db):
    jobs.emails_ledger.enqueue(token="admin-change")
    client = _admin(("view_job", "change_job"))
    assert ">Pause</button>" in client.get(QUEUES_PAGE).content.decode()
    assert _press(client, "emails", "pause").status_code == 302
    assert inspect_queues_paused() == {"emails"}
    page = client.get(QUEUES_PAGE).content.decode()
    assert "<strong>paused</strong>" in page and ">Resume</button>" in page
    assert _press(client, "emails", "resume").status_code == 302
    assert inspect_queues_paused() == set()


def test_ctrl_06_the_buttons_need_the_csrf_token(db):
    client = _admin(("view_job", "change_job"))
    refused = client.post("/admin/django_xjobs/job/queues/emails/pause/")
    assert refused.status_code == 403
    assert inspect_queues_paused() == set()


def inspect_queues_paused() -> set[str]:
    return {q["queue"] for q in inspect_queues()["queues"] if q["paused"]}


# --- manage.py xjobs pause / resume / queues (CTRL-05) ------------------------------------------


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


def test_ctrl_05_the_cli_pauses_resumes_and_lists_paused(db):
    jobs.ok.enqueue(n=1)
    paused = json.loads(xjobs("pause", "emails", "--json"))
    assert paused["queue"] == "emails" and paused["paused"] is True
    assert paused["paused_at"] and paused["paused_by"].startswith("cli")
    assert "xjobs resume emails" in xjobs("pause", "emails")
    report = {q["queue"]: q for q in json.loads(xjobs("queues", "--json"))["queues"]}
    assert report["emails"]["paused"] is True and report["default"]["paused"] is False
    text = {line.split()[0]: line for line in xjobs("queues").splitlines()[1:]}
    assert text["emails"].endswith("paused") and not text["default"].endswith("paused")
    resumed = json.loads(xjobs("resume", "emails", "--json"))
    assert resumed == {
        "queue": "emails",
        "paused": False,
        "paused_at": None,
        "paused_by": None,
        "paused_until": None,
    }
    assert "resumed queue emails" in xjobs("resume", "emails")
    assert not json.loads(xjobs("queues", "--json"))["queues"][0]["paused"]


def test_the_cli_refuses_a_bad_queue_name_in_one_line(db):
    with pytest.raises(CommandError) as caught:
        xjobs("pause", "no/slashes")
    assert "is not valid" in str(caught.value) and "\n" not in str(caught.value)


def test_ctrl_05_the_paused_gauge_follows_pause_and_resume(db):
    from django_xjobs import metrics
    from tests.metrics.test_metrics import sample, scrape

    jobs.ok.enqueue(n=1)
    pause_queue("emails")  # no job in it: listed all the same
    metrics.clear_cache()  # a scrape reads the database at most once per STATS_INTERVAL
    _, series = scrape()
    assert sample(series, "xjobs_queue_paused", queue="emails") == 1
    assert sample(series, "xjobs_queue_paused", queue="default") == 0
    resume_queue("emails")
    metrics.clear_cache()
    _, series = scrape()
    assert sample(series, "xjobs_queue_paused", queue="emails") is None
    assert sample(series, "xjobs_queue_paused", queue="default") == 0


# --- the worker's paused set: read when told and once a poll, never per claim (CTRL-02/04) -----


class CountingDriver(MemoryDriver):
    """Counts reads of the paused set, and fails them on demand (a database gone)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads, self.down = 0, False

    def paused_queues(self) -> frozenset[str]:
        self.reads += 1
        if self.down:
            raise DriverUnavailableError("the database is gone")
        return super().paused_queues()


def test_ctrl_02_the_paused_set_is_read_once_a_poll_or_when_told_not_per_claim():
    driver, now = CountingDriver(), [0.0]
    paused = PausedQueues(
        driver, ("default", "emails"), interval=1.0, worker_id="w", clock=lambda: now[0]
    )
    for _ in range(100):  # a busy worker claims many times a poll interval
        assert paused.refresh() == frozenset()
    assert driver.reads == 1
    driver.limits().pause_queue("emails", None)
    driver.limits().pause_queue("elsewhere", None)  # not this worker's queue
    paused.changed()  # the listener was told
    assert paused.refresh() == {"emails"} and driver.reads == 2
    driver.limits().resume_queue("emails")  # no one told: the poll interval is the bound
    assert paused.refresh() == {"emails"}
    now[0] = 1.0
    assert paused.refresh() == frozenset() and driver.reads == 3


def test_ctrl_04_a_failed_read_keeps_the_last_set_and_never_pauses():
    driver, now = CountingDriver(), [0.0]
    paused = PausedQueues(driver, ("emails",), interval=1.0, worker_id="w", clock=lambda: now[0])
    assert paused.refresh() == frozenset()
    driver.down = True
    now[0] = 5.0
    assert paused.refresh() == frozenset()  # an outage pauses nothing
    driver.down = False
    driver.limits().pause_queue("emails", None)
    assert paused.refresh() == {"emails"}  # read again on the next pass, not a poll later
    driver.down = True
    paused.changed()
    assert paused.refresh() == {"emails"}  # nor does it resume what an operator paused


def test_ctrl_02_runs_claimed_ahead_of_a_pause_go_back_unstarted(live_harness):
    busy = jobs.emails_ledger.enqueue(token="busy", hold=1.0).id
    ahead = [jobs.emails_ledger.enqueue(token=f"ahead-{n}").id for n in range(2)]
    worker = Worker(
        queues=["emails"], concurrency=1, prefetch=2, driver=live_harness.driver, poll_interval=5
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: ledger("busy", "start"), timeout=10, what="the first run to start")
        # the others were claimed with it, queued ahead of the only thread
        assert {live_harness.row(i).state for i in ahead} == {"running"}
        pause_queue("emails")
        wait_for(lambda: live_harness.row(busy).state == "done", timeout=10, what="the run")
        wait_for(
            lambda: {live_harness.row(i).state for i in ahead} == {"ready"},
            timeout=10,
            what="the runs queued ahead to go back",
        )
    finally:
        worker.stop()
        thread.join(timeout=10)
    assert [row for n in range(2) for row in ledger(f"ahead-{n}", "start")] == []
    assert {live_harness.row(i).attempt for i in ahead} == {0}  # no attempt spent


def test_pause_04_a_worker_steps_over_a_paused_jobs_runs_until_resumed(live_harness):
    """SPEC PAUSE-04: the worker reads the job pauses with the queues' and hands them to its
    claims: a paused job's runs wait, its queue's other runs go on, and a resume frees them."""
    django_xjobs.pause_jobs(name="tests.jobs.emails_ledger", by="ops:a")
    waiting = jobs.emails_ledger.enqueue(token="held-mail")
    other = jobs.ledger.enqueue(token="main-run")
    burst(live_harness)
    assert live_harness.row(other.id).state == "done"
    assert live_harness.row(waiting.id).state == "ready"
    assert ledger("held-mail", "start") == []
    django_xjobs.resume_jobs(name="tests.jobs.emails_ledger")
    burst(live_harness)
    assert live_harness.row(waiting.id).state == "done"


@pytest.mark.parametrize("paused", ["queue", "job"])
def test_pause_10_a_lapsed_run_of_a_paused_queue_or_job_waits_until_resumed(live_harness, paused):
    """SPEC PAUSE-10: a run whose worker died is not taken again while its queue or its job is
    paused (the worker's sweep leaves the queue out, or is told of the job's pause); once
    resumed, the sweep takes it and it runs."""
    held = jobs.emails_ledger.enqueue(token="lapsed-mail").id
    [dead] = live_harness.driver.runs().claim(
        queues=["emails"], limit=1, visibility_timeout=VIS, worker_id="dead"
    )
    assert dead.id == held
    if paused == "queue":
        pause_queue("emails")
    else:
        django_xjobs.pause_jobs(name="tests.jobs.emails_ledger", by="ops:a")
    live_harness.advance(VIS + 1)  # its worker died: the lease lapses
    burst(live_harness)
    row = live_harness.row(held)
    assert (row.state, row.claimed_by, row.attempt) == ("running", "dead", 1)
    assert ledger("lapsed-mail", "start") == []
    if paused == "queue":
        resume_queue("emails")
    else:
        django_xjobs.resume_jobs(name="tests.jobs.emails_ledger")
    burst(live_harness)
    assert live_harness.row(held).state == "done"


def test_pause_11_run_until_idle_and_tick_leave_a_paused_queue_and_job_alone(harness):
    """SPEC PAUSE-11: a test's pass reads the pauses as a worker's claim loop does and leaves
    a paused queue's and a paused job's runs waiting; a worker that ticked before the pause
    sees it at its next tick (the pause was made in this process); a resume lets them run."""
    from django_xjobs.testing import run_until_idle

    worker = Worker(queues=["default", "emails"], concurrency=1, driver=harness.driver)
    assert worker.tick(bounded=False).executions == []  # its pause set read: nothing paused
    pause_queue("emails")
    django_xjobs.pause_jobs(name="tests.jobs.ok", by="ops:a")
    mail = jobs.emails_ledger.enqueue(token="paused-mail").id
    held = jobs.ok.enqueue(n=1).id
    free = jobs.ledger.enqueue(token="free-run").id
    assert [e.job.id for e in worker.tick(bounded=False).executions] == [free]
    assert run_until_idle() == []
    assert {harness.row(i).state for i in (mail, held)} == {"ready"}
    resume_queue("emails")
    django_xjobs.resume_jobs(name="tests.jobs.ok")
    assert [e.job.id for e in worker.tick(bounded=False).executions] == [mail]
    assert [e.job.id for e in run_until_idle()] == [held]
