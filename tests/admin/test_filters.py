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
