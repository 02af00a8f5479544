"""The admin's event list (issue 43 item 4, SPEC EVT-15): each stored event with what its publish
did, filtered by name and tenant, its page showing its data as a payload and each refused
declaration; view-only, behind ``view_jobevent``. Driven through the real admin by real users
holding real permission rows."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from django_xjobs import publish_event
from django_xjobs.drivers import get_driver
from django_xjobs.models import JobEvent
from django_xjobs.testing import age_events
from tests.drivers.contract.test_event_reads import REFUSED, record_outcomes

LIST = "/admin/django_xjobs/jobevent/"
SECRET = "event-secret-43"
TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def _client(name: str, perms: tuple[str, ...], *, staff: bool = True) -> Client:
    user = User.objects.create_user(name, password="pw", is_staff=staff)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="django_xjobs", codename__in=perms)
    )
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def _page(event_id) -> str:
    return f"{LIST}{event_id}/change/"


def _rows(html: str) -> list[str]:
    """The result rows of a change list, each as its cells' text."""
    body = html[html.index('<table id="result_list"') :]
    return [
        " ".join(re.sub(r"<[^>]+>", " ", cell).split())
        for cell in re.findall(r"<tr>(.*?)</tr>", body[body.index("<tbody>") :], flags=re.S)
    ]


@pytest.fixture
def events(db):
    """An older event of tenant acme that started a job and was refused by another declaration,
    and a newer one of no tenant that released two waiting runs."""
    older = publish_event("user.created", {"user_id": 7, "api_token": SECRET}, tenant_id="acme")
    age_events(get_driver(), 60)
    newer = publish_event("order.shipped", {"order_id": 9})
    record_outcomes(get_driver(), older.id, started=1, refused=[REFUSED])
    record_outcomes(get_driver(), newer.id, released=2)
    return older.id, newer.id


def test_evt_15_the_list_shows_each_event_newest_first_with_what_its_publish_did(events):
    older, newer = events
    viewer = _client("viewer", ("view_jobevent",))
    page = viewer.get(LIST)
    assert page.status_code == 200
    html = page.content.decode()
    for column in ("Name", "Tenant id", "Published at", "Released", "Started", "Cancelled"):
        assert f">{column}<" in html or f">{column}</a>" in html, column
    first, second = _rows(html)
    assert first.startswith("order.shipped -") and first.endswith("2 0 0 0")
    assert second.startswith("user.created acme") and second.endswith("0 1 0 1")
    # published to the second, in the format every screen of the app uses
    assert re.search(r"^user\.created acme \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \w+ 0 1", second)
    assert SECRET not in html  # the list shows no data at all
    links = re.findall(r'href="/admin/django_xjobs/jobevent/([0-9a-f-]{36})/change/', html)
    assert links == [str(newer), str(older)]


def test_evt_15_the_list_filters_by_name_and_by_tenant(events):
    viewer = _client("viewer", ("view_jobevent",))
    html = viewer.get(LIST).content.decode()
    assert "By name" in html and "By tenant id" in html
    named = _rows(viewer.get(f"{LIST}?name=order.shipped").content.decode())
    assert [r.split()[0] for r in named] == ["order.shipped"]
    tenant = _rows(viewer.get(f"{LIST}?tenant_id=acme").content.decode())
    assert [r.split()[0] for r in tenant] == ["user.created"]


def test_evt_15_an_events_page_shows_its_data_as_a_payload_and_each_refusal(events):
    older, _ = events
    shape = _client("viewer", ("view_jobevent",)).get(_page(older))
    assert shape.status_code == 200
    html = shape.content.decode()
    assert SECRET not in html and "&quot;api_token&quot;: &quot;str of 15&quot;" in html
    assert f"<code>{REFUSED['job']}</code> {REFUSED['code']}: {REFUSED['message']}" in html
    values = _client("payload", ("view_jobevent", "view_job_payload")).get(_page(older))
    html = values.content.decode()
    assert SECRET not in html and "&quot;api_token&quot;: &quot;[redacted]&quot;" in html
    assert "&quot;user_id&quot;: 7" in html


WHO = {
    "staff without view_jobevent": ({"perms": ("view_job", "change_job")}, 403),
    "non-staff holding view_jobevent": ({"perms": ("view_jobevent",), "staff": False}, 302),
}


@pytest.mark.parametrize(("who", "status"), WHO.values(), ids=WHO.keys())
def test_evt_15_a_user_without_view_jobevent_sees_no_event(events, who, status):
    older, _ = events
    client = _client("clerk", **who)
    for url in (LIST, _page(older)):
        answer = client.get(url)
        assert answer.status_code == status, url
        if status == 302:  # a non-staff user is sent to the login page
            assert "/login/" in answer["Location"]
        assert SECRET not in answer.content.decode()


def test_evt_15_no_one_adds_changes_or_deletes_an_event_not_even_a_superuser(events):
    older, _ = events
    root = Client(enforce_csrf_checks=True)
    root.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = root.get(_page(older))
    token = TOKEN.search(page.content.decode()).group(1)
    assert root.get(f"{LIST}add/").status_code == 403
    posted = root.post(_page(older), {"name": "renamed", "csrfmiddlewaretoken": token})
    assert posted.status_code == 403
    assert root.get(f"{LIST}{older}/delete/").status_code == 403
    root.post(
        LIST,
        {
            "action": "delete_selected",
            "_selected_action": [str(older)],
            "csrfmiddlewaretoken": token,
        },
    )
    assert JobEvent.objects.get(id=older).name == "user.created"
    assert JobEvent.objects.count() == 2
