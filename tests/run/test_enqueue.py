"""The id ``enqueue()`` returns inside ``atomic()`` is the job's id, on both drivers.

A staged enqueue mints the job id when it stages; the publish inserts the job with exactly that
id, on the on-commit fast path or through the relay. A publish that collapses into a live job
with the same idempotency key still answers for the staged id. (SPEC OUTBOX-01/02/12)
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.test import override_settings

from django_xjobs.drivers.postgres.outbox import STATEMENTS
from django_xjobs.models import Job, OutboxEntry
from django_xjobs.operations import inspect_job
from django_xjobs.outbox.relay import Relay
from django_xjobs.testing import run_to_completion, run_until_idle
from tests import jobs

AUTO = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "auto"}


@pytest.fixture
def live(live_harness):
    with override_settings(XJOBS=AUTO):
        yield live_harness


@pytest.fixture
def in_test_transaction(harness):
    with override_settings(XJOBS=AUTO):
        yield harness


def test_the_id_returned_inside_atomic_is_the_published_jobs_id(live):
    with transaction.atomic():
        result = jobs.ok.enqueue(n=1)
        assert result.staged and result.run_id is None
        assert result.deduped is None  # unknown until the publish
        # nothing in the job store before commit
        assert live.driver.reads().get_job(result.id) is None
    # the on-commit fast path published it under that id
    row = live.driver.reads().get_job(result.id)
    assert row is not None and row.input == {"n": 1}
    trace = inspect_job(result.id)
    assert trace is not None and trace["id"] == str(result.id) and "collapsed_from" not in trace


def test_the_relay_publishes_under_the_same_id_when_the_fast_path_failed(live, monkeypatch):
    real_enqueue = live.driver.jobs().enqueue
    calls = []

    def broken_once(request):
        calls.append(request.id)
        raise ConnectionError("the jobs database blinked")

    if live.driver.name == "postgres":
        # the publish at commit inserts the jobs in its one statement: that is what fails
        monkeypatch.setitem(STATEMENTS, "publish_taken", "SELECT * FROM x_jobs_gone")
        with transaction.atomic():
            result = jobs.ok.enqueue(n=2)
        monkeypatch.undo()
    else:
        monkeypatch.setattr(live.driver, "enqueue", broken_once)
        with transaction.atomic():
            result = jobs.ok.enqueue(n=2)
        assert calls == [result.id]
        calls.clear()
    monkeypatch.setattr(live.driver, "enqueue", real_enqueue_recorded(real_enqueue, calls))
    assert live.driver.reads().get_job(result.id) is None
    relay = Relay(store=live.driver.outbox("default"), driver=live.driver)
    assert relay.tick() == 1
    assert calls == [result.id]
    assert live.driver.reads().get_job(result.id).input == {"n": 2}


def real_enqueue_recorded(real_enqueue, calls):
    def recorded(request):
        calls.append(request.id)
        return real_enqueue(request)

    return recorded


def test_a_staged_enqueue_that_collapses_still_resolves_to_the_live_job(live):
    existing = jobs.ok.enqueue(n=3)  # outside atomic: published at once, live
    with transaction.atomic():
        staged = jobs.ok.enqueue(n=3)  # same idempotency key
    assert staged.id != existing.id and live.driver.reads().get_job(staged.id) is None
    trace = inspect_job(staged.id)
    assert trace is not None
    assert trace["id"] == str(existing.id) and trace["collapsed_from"] == str(staged.id)
    assert inspect_job(str(staged.id))["id"] == str(existing.id)  # a string id too


def test_a_rolled_back_enqueue_id_resolves_to_nothing(live):
    with pytest.raises(RuntimeError), transaction.atomic():
        result = jobs.ok.enqueue(n=4)
        raise RuntimeError("the order could not be saved")
    assert inspect_job(result.id) is None
    assert live.driver.reads().get_job(result.id) is None
    assert live.driver.outbox("default").pending()[0] == 0


def test_a_second_publish_of_one_staged_id_is_a_no_op(live):
    """A relay that inserted the job and died before its mark leaves the row to be published
    again; the job's primary key (the staged id) makes that a no-op (SPEC OUTBOX-12)."""
    store = live.driver.outbox("default")
    staged_id = store.stage(jobs.ok.build_request({"n": 5}))  # committed, left for a relay
    [row] = store.claim(10, "relay-a")
    first = live.driver.jobs().enqueue(row.request())  # inserted; the relay dies before its mark
    assert first.id == staged_id
    assert store.release([staged_id], "relay-a") == 1  # as its lapsed lease would
    [again] = store.claim(10, "relay-b")
    result, marked = store.publish(live.driver, again, "relay-b")
    assert marked and result.id == staged_id and not result.deduped
    assert [r.id for r in live.driver.reads().list_jobs(name="tests.jobs.ok")] == [staged_id]
    assert store.pending()[0] == 0


@pytest.fixture
def live_postgres(transactional_db):
    from django_xjobs.drivers import install, uninstall
    from django_xjobs.drivers.postgres import PostgresDriver

    driver = PostgresDriver("default")
    install(driver)
    yield driver
    uninstall(driver)


def test_on_the_jobs_database_insert_and_mark_commit_together(live_postgres, monkeypatch):
    """A publish whose mark fails leaves no job behind on the jobs' own database. (The memory
    store cannot join a transaction; the primary-key no-op above covers it.)"""
    store = live_postgres.outbox("default")
    staged_id = store.stage(jobs.ok.build_request({"n": 6}))
    [row] = store.claim(10, "relay-a")

    def mark_fails(*args, **kwargs):
        raise ConnectionError("lost before the mark")

    monkeypatch.setattr(store, "mark_published", mark_fails)
    with pytest.raises(ConnectionError):
        store.publish(live_postgres, row, "relay-a")
    assert not Job.objects.filter(id=staged_id).exists()
    assert OutboxEntry.objects.get(id=staged_id).published_at is None


# --- the testing helpers with the default OUTBOX="auto", inside a test's transaction ----------


def test_run_to_completion_finds_the_job_by_the_id_enqueue_returned(in_test_transaction):
    from django_xjobs.clock import FrozenClock

    job_id = jobs.ok.enqueue(n=7).id  # staged: the test transaction never commits
    runs = run_to_completion(job_id, clock=FrozenClock())
    assert [r.outcome for r in runs] == ["completed"]
    assert runs[0].job.id == job_id
    assert in_test_transaction.driver.reads().get_job(job_id).state == "done"


def test_run_until_idle_publishes_what_the_test_staged_on_both_drivers(in_test_transaction):
    staged = [jobs.ok.enqueue(n=n).id for n in (8, 9)]
    runs = run_until_idle()
    assert sorted(r.job.id for r in runs) == sorted(staged)
    assert {r.outcome for r in runs} == {"completed"}


# --- the operator's views of a collapsed id ------------------------------------------------------


def test_xjobs_show_answers_for_a_collapsed_id_and_says_so(live):
    existing = jobs.ok.enqueue(n=10)
    with transaction.atomic():
        staged = jobs.ok.enqueue(n=10)
    out = io.StringIO()
    call_command("xjobs", "show", str(staged.id), stdout=out)
    text = out.getvalue()
    assert text.splitlines()[0] == f"tests.jobs.ok  {existing.id}"
    assert f"asked for {staged.id}" in text and "collapsed into this live job" in text
    out = io.StringIO()
    call_command("xjobs", "show", str(staged.id), "--json", stdout=out)
    shown = json.loads(out.getvalue())
    assert (shown["id"], shown["collapsed_from"]) == (str(existing.id), str(staged.id))


def test_xjobs_show_of_a_rolled_back_id_is_one_line_not_found(live):
    with pytest.raises(RuntimeError), transaction.atomic():
        result = jobs.ok.enqueue(n=11)
        raise RuntimeError("rolled back")
    with pytest.raises(CommandError) as caught:
        call_command("xjobs", "show", str(result.id))
    assert str(caught.value).startswith(f"X_JOB_NOT_FOUND: no job {result.id} exists")


def test_the_admin_redirects_a_collapsed_id_to_the_job_it_became(live_postgres, client):
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    with override_settings(XJOBS=AUTO):
        existing = jobs.ok.enqueue(n=12)
        with transaction.atomic():
            staged = jobs.ok.enqueue(n=12)
    page = client.get(f"/admin/django_xjobs/job/{staged.id}/change/", follow=True)
    assert page.redirect_chain == [(f"/admin/django_xjobs/job/{existing.id}/change/", 302)]
    assert "collapsed into this live job" in page.content.decode()
    assert client.get(f"/admin/django_xjobs/job/{existing.id}/change/").status_code == 200
