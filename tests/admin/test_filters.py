"""The job list filtered by what a job carries (issue 45, SPEC BULK-12): ``?input={...}``,
``?error_code=...`` and the search box's ``input:`` and ``error:``, through the real admin."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.test import Client

from django_xjobs.testing.factories import DeadJobFactory, JobFactory

LIST = "/admin/django_xjobs/job/"


@pytest.fixture
def client(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


def _listed(client: Client, **params: str) -> set[str]:
    page = client.get(f"{LIST}?{urlencode(params)}")
    assert page.status_code == 200
    return set(re.findall(r'name="_selected_action" value="([^"]+)"', page.content.decode()))


def test_bulk_12_the_job_list_filters_by_input_and_error_code(client):
    order = DeadJobFactory(terminal=True, input={"order_id": 4711, "sku": "x"})
    other = DeadJobFactory(input={"order_id": 4711})
    JobFactory(input={"order_id": 5})
    assert _listed(client, input='{"order_id": 4711}') == {str(order.id), str(other.id)}
    assert _listed(client, error_code="X_TERMINAL") == {str(order.id)}
    assert _listed(client, input='{"order_id": 4711}', error_code="ValueError") == {str(other.id)}
    assert _listed(client, q='input:{"sku": "x"}') == {str(order.id)}
    assert _listed(client, q="error:ValueError") == {str(other.id)}
    query = urlencode({"input": '{"order_id": 4711}'})
    page = client.get(f"{LIST}?{query}").content.decode()
    assert "input contains" in page  # the sidebar names the filter in force


def test_bulk_12_a_malformed_filter_lists_nothing_and_says_why(client):
    DeadJobFactory(input={"order_id": 4711})
    response = client.get(f"{LIST}?{urlencode({'input': '[1, 2]'})}", follow=True)
    assert response.status_code == 200
    text = response.content.decode()
    assert "X_FILTER_INVALID" in text
    assert not re.findall(r'name="_selected_action"', text)
    searched = client.get(f"{LIST}?{urlencode({'q': 'input:{oops'})}").content.decode()
    assert "X_FILTER_INVALID" in searched


def _statements(client: Client, url: str) -> list[str]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return [" ".join(q["sql"].split()) for q in captured.captured_queries]


def test_bulk_22_the_filtered_job_list_reads_no_statement_over_every_row(client):
    DeadJobFactory(input={"order_id": 4711})
    JobFactory(queue="other", input={"order_id": 5})
    query = urlencode({"input": '{"order_id": 4711}'})
    sent = _statements(client, f"{LIST}?{query}")
    jobs_read = [s for s in sent if 'FROM "x_jobs"' in s]
    assert jobs_read, sent
    # every read of x_jobs is narrowed by the filter or bounded: no count of the whole table
    # (show_full_result_count) and no SELECT DISTINCT of a column over it (the field filters)
    for statement in jobs_read:
        bounded = "WHERE" in statement and ("@>" in statement or "LIMIT" in statement)
        assert bounded, statement
        if "@>" not in statement:  # a bounded count reads any rows, not the newest sorted
            assert "ORDER BY" not in statement, statement


def test_bulk_22_the_queue_and_name_filters_list_what_is_declared_and_filter_by_it(client):
    mine = JobFactory(queue="other", name="tests.jobs.ok")
    JobFactory(queue="default", name="tests.jobs.ok")
    stray = JobFactory(queue="stray", name="gone.jobs.old")
    page = client.get(LIST).content.decode()
    # XJOBS["QUEUES"] lists "other"; tests.jobs declares tests.jobs.ok; what only the table
    # holds is not read to list it
    assert "queue__exact=other" in page and "name__exact=tests.jobs.ok" in page
    assert "queue__exact=stray" not in page and "name__exact=gone.jobs.old" not in page
    assert _listed(client, queue__exact="other") == {str(mine.id)}
    # a queue nothing declares (a link from the queues page) is listed while it is given
    assert _listed(client, queue__exact="stray") == {str(stray.id)}
    assert "queue__exact=stray" in client.get(f"{LIST}?queue__exact=stray").content.decode()
    assert _listed(client, name__exact="gone.jobs.old") == {str(stray.id)}


def test_bulk_22_the_dead_letters_link_counts_up_to_a_bound(client, monkeypatch):
    from django_xjobs.admin import pages

    monkeypatch.setattr(pages, "DEAD_SHOWN", 2)
    for _ in range(2):
        DeadJobFactory()
    assert "Dead letters (2)<" in client.get(LIST).content.decode()
    DeadJobFactory()
    assert "Dead letters (2+)<" in client.get(LIST).content.decode()
