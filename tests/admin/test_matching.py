"""The job list's "retry / cancel / delete / requeue all N matching" (issue 45, SPEC BULK-14,
BULK-16): the list's filter read as one ``JobFilter``, a confirmation page with the dry run's
count and sample, a CSRF-protected POST by a user holding the verb's permission, done at once
on a batch or less and by the library's background job past it, landing on the audit record
that shows its progress. Driven through the real admin with the CSRF checks on, by real users
holding real permission rows."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from django.http import QueryDict
from django.test import Client
from django.utils import timezone

from django_xjobs.admin.matching import list_filter
from django_xjobs.errors import JobFilterError
from django_xjobs.models import Job, OperatorAction
from django_xjobs.operations import background, bulk
from django_xjobs.testing import run_until_idle
from django_xjobs.testing.factories import DeadJobFactory
from tests.support.admin import staff_client

LIST = "/admin/django_xjobs/job/"
MATCHING = "/admin/django_xjobs/job/matching/"


def _token(client: Client) -> str:
    client.get(LIST)
    return client.cookies["csrftoken"].value


def _dead(n: int, **fields) -> list[Job]:
    return [DeadJobFactory(**fields) for _ in range(n)]


def test_bulk_16_the_list_offers_all_matching_only_with_a_filter_and_the_permission(db):
    _dead(2, queue="emails")
    alice = staff_client("alice", "view_job", "change_job")
    text = alice.get(f"{LIST}?state__exact=dead&queue=emails").content.decode()
    assert "Act on all 2 matching this filter" in text
    assert f"{MATCHING}retry/?state__exact=dead&amp;queue=emails" in text
    assert f"{MATCHING}delete/" not in text  # alice may not delete jobs
    assert "matching this filter" not in alice.get(LIST).content.decode()  # no filter: no offer
    searched = alice.get(f"{LIST}?state__exact=dead&q=emails").content.decode()
    assert "matching this filter" not in searched  # a free-text search maps onto no field
    viewer = staff_client("vera", "view_job")
    assert "matching this filter" not in viewer.get(f"{LIST}?state__exact=dead").content.decode()


def test_bulk_14_the_confirmation_shows_the_verbs_count_and_a_sample(db):
    dead = _dead(3, queue="emails")
    DeadJobFactory(queue="other")
    alice = staff_client("alice", "view_job", "change_job")
    page = alice.get(f"{MATCHING}retry/?queue=emails")
    text = page.content.decode()
    assert page.status_code == 200
    assert "Retry all 3 matching jobs" in text
    assert all(str(job.id) in text for job in dead)
    assert 'name="csrfmiddlewaretoken"' in text and 'name="query" value="queue=emails"' in text
    assert {j.state for j in Job.objects.all()} == {"dead"}  # a dry run changes nothing
    assert not OperatorAction.objects.exists()
    assert staff_client("vera", "view_job").get(f"{MATCHING}retry/?queue=emails").status_code == 403
    assert alice.get(f"{MATCHING}delete/?state__exact=dead").status_code == 403
    assert alice.get(f"{MATCHING}explode/?queue=emails").status_code == 404


def test_bulk_16_acting_needs_the_csrf_token_and_the_verbs_permission(db):
    dead = _dead(2)
    alice = staff_client("alice", "view_job", "change_job", "view_operatoraction")
    form = {"query": "state__exact=dead"}
    assert alice.post(f"{MATCHING}retry/", form).status_code == 403  # no CSRF token
    vera = staff_client("vera", "view_job")
    assert (
        vera.post(f"{MATCHING}retry/", {**form, "csrfmiddlewaretoken": _token(vera)}).status_code
        == 403
    )
    deleting = alice.post(f"{MATCHING}delete/", {**form, "csrfmiddlewaretoken": _token(alice)})
    assert deleting.status_code == 403  # delete needs delete_job
    assert {j.state for j in Job.objects.all()} == {"dead"} and not OperatorAction.objects.exists()
    done = alice.post(f"{MATCHING}retry/", {**form, "csrfmiddlewaretoken": _token(alice)})
    [record] = OperatorAction.objects.all()
    assert done.status_code == 302
    assert done["Location"] == f"/admin/django_xjobs/operatoraction/{record.id}/change/"
    assert (record.actor, record.verb, record.filter, record.changed, record.status) == (
        "admin:alice",
        "retry_jobs",
        {"state": ["dead"]},
        2,
        None,
    )
    assert {Job.objects.get(pk=j.pk).state for j in dead} == {"ready"}


def test_bulk_15_more_than_a_batch_is_done_in_the_background_with_its_progress_shown(
    db, monkeypatch
):
    dead = _dead(5, queue="emails")
    DeadJobFactory(queue="other")
    monkeypatch.setattr(bulk, "BATCH", 2)
    alice = staff_client("alice", "view_job", "change_job", "view_operatoraction")
    form = {"query": "queue=emails"}
    asked = alice.get(f"{MATCHING}retry/?queue=emails")
    assert "Retry all 5 matching jobs" in asked.content.decode()
    assert "a background job on queue <code>xjobs</code>" in asked.content.decode()
    assert "No live worker works queue xjobs now" in asked.content.decode()
    response = alice.post(
        f"{MATCHING}retry/", {**form, "csrfmiddlewaretoken": _token(alice)}, follow=True
    )
    [record] = OperatorAction.objects.all()
    assert (
        response.redirect_chain[-1][0] == f"/admin/django_xjobs/operatoraction/{record.id}/change/"
    )
    text = response.content.decode()
    assert "goes on in the background" in text and "queued" in text
    assert {Job.objects.get(pk=j.pk).state for j in dead} == {"dead"}  # returned at once
    assert (record.status, record.expected, record.by_job) == ("queued", 5, record.by_job)
    assert Job.objects.get(pk=record.by_job).queue == background.QUEUE
    run_until_idle(queues=[background.QUEUE])
    record.refresh_from_db()
    assert (record.status, record.matched, record.changed, record.skipped) == ("done", 5, 5, 0)
    assert record.started_at is not None and record.finished_at is not None
    listed = alice.get("/admin/django_xjobs/operatoraction/").content.decode()
    assert "done: 5 of 5 matched, 5 changed, 0 skipped" in listed
    assert {Job.objects.get(pk=j.pk).state for j in dead} == {"ready"}
    assert Job.objects.get(queue="other").state == "dead"


def test_bulk_16_the_lists_filters_map_onto_a_job_filter():
    query = QueryDict(
        "state__exact=dead&queue=emails&name__exact=shop.jobs.sync&stop_reason=terminal"
        '&error_code=X_TERMINAL&input={"order_id":4711}&o=-1&p=2'
        "&created_at__year=2026&created_at__month=2"
    )
    given = list_filter(query)
    zone = timezone.get_current_timezone()
    assert given == {
        "state": "dead",
        "queue": "emails",
        "name": "shop.jobs.sync",
        "stop_reason": "terminal",
        "error_code": "X_TERMINAL",
        "input": '{"order_id":4711}',
        "created_after": datetime(2026, 2, 1, tzinfo=zone),
        "created_before": datetime(2026, 2, 1, tzinfo=zone) + timedelta(days=28),
    }
    assert list_filter(QueryDict("q=input:{}")) == {"input": "{}"}
    for refused in ("unknown=parked", "q=emails", "created_at__year=x"):
        with pytest.raises(JobFilterError):
            list_filter(QueryDict(refused))


def test_bulk_13_the_selected_rows_are_one_bulk_call_over_their_ids(db):
    dead = _dead(3)
    alice = staff_client("alice", "view_job", "change_job")
    alice.post(
        LIST,
        {
            "action": "retry_selected",
            "_selected_action": [str(j.pk) for j in dead[:2]],
            "csrfmiddlewaretoken": _token(alice),
        },
    )
    [record] = OperatorAction.objects.all()
    assert (record.verb, record.changed, sorted(record.filter["ids"])) == (
        "retry_jobs",
        2,
        sorted(str(j.pk) for j in dead[:2]),
    )
    assert [Job.objects.get(pk=j.pk).state for j in dead] == ["ready", "ready", "dead"]


def test_redact_05_the_admin_shows_a_background_actions_secret_filter_masked(
    db, monkeypatch, settings
):
    """SPEC REDACT-05: acting on all jobs matching ``?input=`` with a secret key, the
    confirmation shows the filter masked, the action's audit page and the background job's
    page show it masked (to a user holding ``view_job_payload`` too), and the job still matches
    the real value."""
    settings.XJOBS = {**settings.XJOBS, "REDACT_KEYS": ["card"]}
    secret = "4242-0000"
    dead = _dead(3, input={"card": secret, "order_id": 1})
    DeadJobFactory(input={"card": "other-card", "order_id": 1})
    monkeypatch.setattr(bulk, "BATCH", 2)
    alice = staff_client(
        "alice", "view_job", "view_job_payload", "change_job", "view_operatoraction"
    )
    query = QueryDict(mutable=True)
    query["input"] = json.dumps({"card": secret})
    asked = alice.get(f"{MATCHING}retry/?{query.urlencode()}").content.decode()
    shown = asked.split('name="query"')[0]  # the form posts the query as the user gave it
    assert "Retry all 3 matching jobs" in asked and "[redacted]" in shown
    assert secret not in shown
    response = alice.post(
        f"{MATCHING}retry/",
        {"query": query.urlencode(), "csrfmiddlewaretoken": _token(alice)},
        follow=True,
    )
    [record] = OperatorAction.objects.all()
    assert secret not in response.content.decode() and record.status == "queued"
    page = alice.get(f"{LIST}{record.by_job}/change/").content.decode()
    assert "[redacted]" in page and secret not in page
    run_until_idle(queues=[background.QUEUE])
    assert {Job.objects.get(pk=j.pk).state for j in dead} == {"ready"}
    assert Job.objects.get(input__card="other-card").state == "dead"
