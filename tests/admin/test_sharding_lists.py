"""The admin's other lists with jobs in several databases (issue 48 item 4): the batches, the
history and the events live with their jobs and are listed one database at a time, as the job
list is; a row's page opens in the database that holds it; the workers page names the runs of
every database; the dead letters' link opens the list of the database they are in; a database
that is down sends its list back to the jobs database's, never a 500. ``shard`` is the suite's
second database (tests/settings.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_xjobs import Batch
from django_xjobs.drivers import get_driver
from django_xjobs.ids import uuid7
from django_xjobs.models import Job, JobHistory, Worker
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.support.admin import BOTH, TOKEN, listed, routed

ADMIN = "/admin/django_xjobs"


def _moved_in_shard() -> Job:
    """A job of ``reports`` (in shard) that dead-lettered and moved to shard's history."""
    job_id = jobs.terminal.using(queue="reports").enqueue(n=1).id
    run_until_idle(queues=["reports"])
    get_driver().jobs().age(2 * 3600, only={"jobs"})
    assert get_driver().history().move_finished(grace=3600) == 1
    return JobHistory.objects.using("shard").get(id=job_id)


# --- SHARD-50, SHARD-51: batches and history, one database at a time; a row in its own -------


@pytest.mark.django_db(databases=BOTH)
def test_shard_50_51_the_batch_list_reads_one_database_and_a_members_batch_opens_in_its_own(
    superuser_client,
):
    with routed():
        with Batch() as there:
            member = there.add(jobs.ok.using(queue="reports"), n=1).id
        with Batch() as here:
            here.add(jobs.ok, n=2)
        first = superuser_client.get(f"{ADMIN}/jobbatch/")
        picked = superuser_client.get(f"{ADMIN}/jobbatch/?database=shard")
        job_page = superuser_client.get(f"{ADMIN}/job/{member}/change/").content.decode()
        batch_page = superuser_client.get(f"{ADMIN}/jobbatch/{there.id}/change/")
    assert listed(first) == {str(here.id)} and listed(picked) == {str(there.id)}
    assert "those in <strong>default</strong>" in first.content.decode()
    assert "those in <strong>shard</strong>" in picked.content.decode()
    assert 'href="?database=shard"' in first.content.decode()  # the "By database" filter
    # the member's page links its batch, whose page opens in shard with its members read there
    assert f"{ADMIN}/jobbatch/{there.id}/change/" in job_page
    assert batch_page.status_code == 200
    assert f"{ADMIN}/job/{member}/change/" in batch_page.content.decode()


@pytest.mark.django_db(databases=BOTH, transaction=True)
def test_shard_50_51_the_history_list_reads_one_database_and_a_moved_job_opens_in_its_own(
    superuser_client,
):
    with routed():
        moved = _moved_in_shard()
        first = superuser_client.get(f"{ADMIN}/jobhistory/")
        picked = superuser_client.get(f"{ADMIN}/jobhistory/?database=shard")
        old_address = superuser_client.get(f"{ADMIN}/job/{moved.id}/change/")
        page = superuser_client.get(f"{ADMIN}/jobhistory/{moved.id}/change/")
        # the job list of shard counts the moved job and links shard's history
        dead = superuser_client.get(f"{ADMIN}/job/?database=shard&state__exact=dead")
        # "Retry selected" brings it back to shard's live jobs
        token = TOKEN.search(picked.content.decode()).group(1)
        retried = superuser_client.post(
            f"{ADMIN}/jobhistory/?database=shard",
            {
                "action": "retry_selected",
                "_selected_action": [str(moved.id)],
                "csrfmiddlewaretoken": token,
            },
        )
    assert listed(first) == set() and listed(picked) == {str(moved.id)}
    assert "those in <strong>shard</strong>" in picked.content.decode()
    assert old_address.status_code == 302
    assert old_address["Location"] == f"{ADMIN}/jobhistory/{moved.id}/change/"
    assert page.status_code == 200 and "tests.jobs.terminal" in page.content.decode()
    assert dead.context["xjobs_moved"]["count"] == "1"
    assert "database=shard" in dead.context["xjobs_moved"]["url"]
    assert retried.status_code == 302
    assert Job.objects.using("shard").get(id=moved.id).state == "ready"


# --- SHARD-52: events, one database at a time -------------------------------------------------


@pytest.mark.django_db(databases=BOTH)
def test_shard_52_the_event_list_reads_one_database_and_an_event_opens_in_its_own(
    superuser_client,
):
    with routed():
        only_there = uuid7()  # a copy not written yet: the event is where it was published
        get_driver().place.drivers["shard"].events().publish(
            id=only_there, name="only.there", payload={}, correlation_key=None, ttl=3600
        )
        first = superuser_client.get(f"{ADMIN}/jobevent/")
        picked = superuser_client.get(f"{ADMIN}/jobevent/?database=shard")
        page = superuser_client.get(f"{ADMIN}/jobevent/{only_there}/change/")
    assert listed(first) == set() and listed(picked) == {str(only_there)}
    assert page.status_code == 200 and "only.there" in page.content.decode()


# --- SHARD-53: the workers page names the runs of every database ------------------------------


@pytest.mark.django_db(databases=BOTH)
def test_shard_53_a_workers_runs_now_are_read_from_every_database(superuser_client):
    with routed():
        job_id = jobs.ok.using(queue="reports").enqueue(n=1).id
        expires = timezone.now() + timedelta(minutes=5)
        Worker.objects.using("default").create(
            id="w-routed", host="h", pid=1, queues=["reports"], expires_at=expires
        )
        [claimed] = (
            get_driver()
            .runs()
            .claim(queues=["reports"], limit=1, visibility_timeout=30, worker_id="w-routed")
        )
        page = superuser_client.get(f"{ADMIN}/worker/")
    assert claimed.id == job_id
    assert f"{ADMIN}/job/{job_id}/change/" in page.content.decode()


# --- SHARD-54: the dead letters' link opens the list of the database they are in --------------


@pytest.mark.django_db(databases=BOTH)
def test_shard_54_the_dead_letters_link_opens_the_database_its_count_is_from(superuser_client):
    with routed():
        jobs.terminal.using(queue="reports").enqueue(n=1)
        run_until_idle(queues=["reports"])
        one = superuser_client.get(f"{ADMIN}/job/queues/").context["xjobs_nav"]
        jobs.terminal.enqueue(n=2)
        run_until_idle(queues=["default"])
        both = superuser_client.get(f"{ADMIN}/job/queues/").context["xjobs_nav"]
    dead = [(label, url) for label, url in one if label.startswith("Dead letters")]
    assert dead == [("Dead letters (1)", f"{ADMIN}/job/?database=shard&state__exact=dead")]
    dead = [(label, url) for label, url in both if label.startswith("Dead letters")]
    assert dead == [
        ("Dead letters in default (1)", f"{ADMIN}/job/?database=default&state__exact=dead"),
        ("Dead letters in shard (1)", f"{ADMIN}/job/?database=shard&state__exact=dead"),
    ]


# --- SHARD-50: a database that is down: its list sends back, never a 500 ----------------------


@pytest.mark.django_db(databases=BOTH, transaction=True)
def test_shard_50_the_list_of_a_database_that_is_down_sends_back_to_the_jobs_database(
    superuser_client,
):
    from tests.support.reads import unreachable

    with routed():
        with Batch() as there:
            there.add(jobs.ok.using(queue="reports"), n=1)
        jobs.ok.enqueue(n=2)
        with unreachable("shard"):
            pages = {
                model: superuser_client.get(f"{ADMIN}/{model}/?database=shard")
                for model in ("jobbatch", "jobhistory", "jobevent")
            }
            home = superuser_client.get(f"{ADMIN}/jobbatch/?database=default")
            batch = superuser_client.get(f"{ADMIN}/jobbatch/{there.id}/change/", follow=True)
            workers = superuser_client.get(f"{ADMIN}/worker/")
    for model, page in pages.items():
        assert page.status_code == 302, model
        assert page.url == f"{ADMIN}/{model}/?database=default"
    assert home.status_code == 200 and listed(home) == set()
    # a page of a row in the database that is down: said, and the admin's "no such row"
    assert batch.status_code == 200
    said = [str(m) for m in batch.context["messages"]]
    assert said[0] == "X_ALIAS_UNAVAILABLE: database 'shard' did not answer"
    assert workers.status_code == 200
