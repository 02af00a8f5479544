"""A batch's operator surfaces (issue 32): ``xjobs batch`` (text and --json), the admin page and
who may see it, the open-batches metric."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.test import Client

from django_xjobs import Batch
from django_xjobs.testing import run_until_idle
from tests import jobs


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


def _batch(n: int = 2) -> Batch:
    with Batch(on_complete=jobs.batch_report, input={"tag": "secret-tag"}) as batch:
        for i in range(n):
            jobs.ok.enqueue(n=i)
    return batch


def test_xjobs_batch_shows_counts_callbacks_and_members(db):
    """SPEC BATCH-09."""
    batch = _batch()
    text = xjobs("batch", str(batch.id))
    assert f"batch {batch.id}  closed" in text and "2: 2 pending" in text
    assert "on complete  tests.jobs.batch_report" in text
    run_until_idle(queues=["default"])
    shown = json.loads(xjobs("batch", str(batch.id), "--json"))
    assert shown["state"] == "completed" and shown["done"] == 2
    assert [c["job_id"] for c in shown["callbacks"]] == [str(batch.callbacks[0].id)]
    assert {m["state"] for m in shown["members"]} == {"done"}
    listed = json.loads(xjobs("batch", "--json"))
    assert [r["id"] for r in listed] == [str(batch.id)]
    assert str(batch.id) in xjobs("batch")


def test_xjobs_batch_refuses_an_unknown_id_in_one_line(db):
    """SPEC BATCH-09."""
    with pytest.raises(CommandError) as caught:
        xjobs("batch", "0197a3c2-5b1e-7c4d-9f00-1a2b3c4d5e6f")
    assert str(caught.value).startswith("X_BATCH_NOT_FOUND")


def _client(perms: tuple[str, ...], staff: bool = True) -> Client:
    name = f"operator-{User.objects.count()}"
    user = User.objects.create_user(name, password="pw", is_staff=staff)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="django_xjobs", codename__in=perms)
    )
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def test_the_batch_page_lists_members_and_callbacks_to_who_may_view_batches(db):
    """SPEC BATCH-09."""
    batch = _batch()
    client = _client(("view_jobbatch", "view_job"))
    listing = client.get("/admin/django_xjobs/jobbatch/")
    assert listing.status_code == 200 and str(batch.id) in listing.content.decode()
    page = client.get(f"/admin/django_xjobs/jobbatch/{batch.id}/change/")
    body = page.content.decode()
    assert page.status_code == 200
    assert "tests.jobs.batch_report" in body and "not queued yet" in body
    assert body.count("/admin/django_xjobs/job/") >= 2  # the members, linked
    assert "secret-tag" not in body  # its input's values need the payload permission
    run_until_idle(queues=["default"])
    body = client.get(f"/admin/django_xjobs/jobbatch/{batch.id}/change/").content.decode()
    assert "not queued yet" not in body and "completed" in body


def test_the_batch_input_shows_its_values_with_the_payload_permission(db):
    """SPEC BATCH-09."""
    batch = _batch()
    client = _client(("view_jobbatch", "view_job", "view_job_payload"))
    body = client.get(f"/admin/django_xjobs/jobbatch/{batch.id}/change/").content.decode()
    assert "secret-tag" in body


@pytest.mark.parametrize(
    ("perms", "staff"), [((), True), (("view_job",), True), (("view_jobbatch",), False)]
)
def test_the_batch_pages_refuse_who_may_not_view_batches(db, perms, staff):
    """SPEC BATCH-09."""
    batch = _batch()
    client = _client(perms, staff)
    for url in (
        "/admin/django_xjobs/jobbatch/",
        f"/admin/django_xjobs/jobbatch/{batch.id}/change/",
    ):
        assert client.get(url).status_code in (302, 403)
    # nor may anyone change one: its counts move only with its members' settles
    admin_client = _client(("view_jobbatch", "change_jobbatch", "delete_jobbatch"))
    page = admin_client.post(f"/admin/django_xjobs/jobbatch/{batch.id}/delete/")
    assert page.status_code == 403


def test_the_open_batches_gauge_counts_batches_until_their_callbacks_are_queued(db):
    """SPEC BATCH-09."""
    from django_xjobs import metrics
    from tests.metrics.test_metrics import sample, scrape

    metrics.clear_cache()
    batch = _batch()
    open_batch = Batch(on_complete=jobs.batch_report)
    open_batch.add(jobs.ok, n=9)
    assert sample(scrape()[1], "xjobs_batches_open") == 2
    run_until_idle(queues=["default"])
    metrics.clear_cache()
    assert sample(scrape()[1], "xjobs_batches_open") == 1  # the open one: it may still grow
    open_batch.close()
    metrics.clear_cache()
    assert sample(scrape()[1], "xjobs_batches_open") == 0
    assert batch.id != open_batch.id


def test_xjobs_batch_cancel_cancels_the_live_members(db):
    """SPEC BATCH-08."""
    batch = _batch(3)
    assert "cancelled 3 member(s)" in xjobs("batch", str(batch.id), "--cancel", "--reason", "stop")
    shown = json.loads(xjobs("batch", str(batch.id), "--json"))
    assert (shown["state"], shown["cancelled"]) == ("completed", 3)
    assert {m["state"] for m in shown["members"]} == {"cancelled"}


def test_a_member_job_page_links_its_batch_for_who_may_view_batches(db):
    """SPEC BATCH-09."""
    batch = _batch(1)
    from django_xjobs.models import Job

    member = Job.objects.get(batch_id=batch.id)
    url = f"/admin/django_xjobs/job/{member.id}/change/"
    both = _client(("view_job", "view_jobbatch")).get(url).content.decode()
    assert f"/admin/django_xjobs/jobbatch/{batch.id}/change/" in both
    jobs_only = _client(("view_job",)).get(url).content.decode()
    assert str(batch.id) in jobs_only and "/jobbatch/" not in jobs_only


def test_a_batch_input_is_checked_as_a_jobs_input_is(harness):
    """Issue 40: a Batch's input was checked only through its callbacks' signatures, so a
    batch without one stored anything: 10 MB, or nesting no decoder reads back."""
    from django_xjobs.errors import InputInvalidError, PayloadTooLargeError

    deep: dict = {}
    for _ in range(1000):
        deep = {"d": deep}
    with pytest.raises(InputInvalidError, match="Batch input"):
        Batch(input={"nested": deep})
    with pytest.raises(PayloadTooLargeError, match="Batch input"):
        Batch(input={"blob": "x" * (300 * 1024)})
    with pytest.raises(InputInvalidError, match="not a JSON number"):
        Batch(input={"n": float("nan")})
    assert harness.driver.batches().recent(limit=10) == []


def test_a_batch_input_is_masked_like_a_jobs_and_a_cancel_reason_made_storable(db):
    """Issue 40: ``inspect_batch`` and ``xjobs batch --json`` showed a batch's input as stored,
    secrets included; ``cancel_batch(reason=)`` was stored raw on every member (a NUL failed the
    write; 100 KB was copied into each member's row)."""
    from django_xjobs import cancel_batch, inspect_batch
    from django_xjobs.text import MESSAGE_LIMIT

    with Batch(input={"api_token": "tok-SECRET-5150", "tag": "plain"}) as batch:
        member = jobs.ok.enqueue(n=1).id
    shown = json.loads(xjobs("batch", str(batch.id), "--json"))
    assert shown["input"] == {"api_token": "[redacted]", "tag": "plain"}
    assert inspect_batch(batch.id)["input"] == shown["input"]
    assert "tok-SECRET-5150" not in xjobs("batch", "--json")
    cancel_batch(batch.id, reason="stop \x00 " + "r" * 100_000)
    from django_xjobs.models import Job

    reason = Job.objects.get(id=member).last_error
    assert "\x00" not in reason and "\\x00" in reason
    assert len(reason.encode()) <= MESSAGE_LIMIT + 200
