"""Who may change jobs in the admin (issue 26, item 1): every state-changing path — the list's
actions, the job page's Retry / Cancel buttons, "retry from here" on a step — requires
``change_job``. Driven through the real admin with the CSRF checks on, by real users holding
real permission rows."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from django_xjobs.models import Job, OutboxEntry
from django_xjobs.testing import run_until_idle
from django_xjobs.testing.factories import (
    DeadJobFactory,
    QuarantinedOutboxFactory,
    StagedOutboxFactory,
)
from tests import jobs

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def _user(name: str, *, staff: bool, perms: tuple[str, ...]) -> User:
    user = User.objects.create_user(name, password="pw", is_staff=staff)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="django_xjobs", codename__in=perms)
    )
    return user


#: who asks, and whether they may change jobs
WHO = {
    "view-only staff": {"staff": True, "perms": ("view_job",)},
    "staff without permissions": {"staff": True, "perms": ()},
    "non-staff holding change_job": {"staff": False, "perms": ("view_job", "change_job")},
}
ALLOWED = {"staff": True, "perms": ("view_job", "change_job")}


def _client(db, who: dict) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(_user("operator", **who))
    return client


def _token(client: Client, job_id) -> str:
    """The CSRF token of the job page, or of whatever admin page this user reaches."""
    page = client.get(f"/admin/django_xjobs/job/{job_id}/change/")
    found = TOKEN.search(page.content.decode()) if page.status_code == 200 else None
    if found:
        return found.group(1)
    client.get("/admin/", follow=True)
    return client.cookies["csrftoken"].value


def _dead_job():
    job_id = jobs.terminal.enqueue(n=26).id
    run_until_idle()
    assert Job.objects.get(id=job_id).state == "dead"
    return job_id


def _dead_job_with_steps():
    return DeadJobFactory(
        name="tests.jobs.fails_at_b", input={"token": "perm-steps"}, steps=["a", "b", "c"]
    ).id


def _post_action(client: Client, action: str, job_id):
    return client.post(
        "/admin/django_xjobs/job/",
        {
            "action": action,
            "_selected_action": [str(job_id)],
            "csrfmiddlewaretoken": _token(client, job_id),
        },
    )


#: path name -> (make the job, post it, the state the job must not / must reach)
def _retry_action(client, job_id):
    return _post_action(client, "retry_selected", job_id)


def _cancel_action(client, job_id):
    return _post_action(client, "cancel_selected", job_id)


def _retry_button(client, job_id):
    token = _token(client, job_id)
    return client.post(f"/admin/django_xjobs/job/{job_id}/retry/", {"csrfmiddlewaretoken": token})


def _cancel_button(client, job_id):
    token = _token(client, job_id)
    return client.post(f"/admin/django_xjobs/job/{job_id}/cancel/", {"csrfmiddlewaretoken": token})


def _retry_from_step(client, job_id):
    token = _token(client, job_id)
    return client.post(
        f"/admin/django_xjobs/job/{job_id}/retry-from-step/",
        {"step": "b", "csrfmiddlewaretoken": token},
    )


def _delayed_job():
    job_id = jobs.ok.using(delay="1h").enqueue(n=42).id
    assert Job.objects.get(id=job_id).state == "delayed"
    return job_id


def _run_now_action(client, job_id):
    return _post_action(client, "run_now_selected", job_id)


def _run_now_button(client, job_id):
    token = _token(client, job_id)
    return client.post(f"/admin/django_xjobs/job/{job_id}/run-now/", {"csrfmiddlewaretoken": token})


PATHS = {
    "retry_selected action": (_dead_job, _retry_action, "dead", "ready"),
    "run_now_selected action": (_delayed_job, _run_now_action, "delayed", "ready"),
    "Run now button": (_delayed_job, _run_now_button, "delayed", "ready"),
    "cancel_selected action": (
        lambda: jobs.ok.enqueue(n=27).id,
        _cancel_action,
        "ready",
        "cancelled",
    ),
    "Retry button": (_dead_job, _retry_button, "dead", "ready"),
    "Cancel button": (lambda: jobs.ok.enqueue(n=28).id, _cancel_button, "ready", "cancelled"),
    "retry from step": (_dead_job_with_steps, _retry_from_step, "dead", "ready"),
}


@pytest.mark.parametrize("who", WHO.values(), ids=WHO.keys())
@pytest.mark.parametrize("path", PATHS.values(), ids=PATHS.keys())
def test_a_user_without_change_job_changes_no_job(db, who, path):
    make, post, before, _ = path
    job_id = make()
    client = _client(db, who)
    response = post(client, job_id)
    assert response.status_code in (200, 302, 403)
    if response.status_code == 302:  # a non-staff user is sent to the login page
        assert response["Location"].startswith("/admin/login/") or who["staff"]
    assert Job.objects.get(id=job_id).state == before


@pytest.mark.parametrize("path", PATHS.values(), ids=PATHS.keys())
def test_a_staff_user_with_change_job_changes_the_job(db, path):
    make, post, _, after = path
    job_id = make()
    client = _client(db, ALLOWED)
    post(client, job_id)
    assert Job.objects.get(id=job_id).state == after


def test_the_csrf_check_is_on_for_every_state_changing_path(db):
    job_id = _dead_job()
    client = _client(db, ALLOWED)
    refused = client.post(f"/admin/django_xjobs/job/{job_id}/retry/")
    assert refused.status_code == 403 and b"CSRF" in refused.content
    assert Job.objects.get(id=job_id).state == "dead"
    later = _delayed_job()
    refused = client.post(f"/admin/django_xjobs/job/{later}/run-now/")
    assert refused.status_code == 403 and b"CSRF" in refused.content
    assert client.get(f"/admin/django_xjobs/job/{later}/run-now/").status_code == 403
    assert Job.objects.get(id=later).state == "delayed"


def test_run_now_is_offered_for_a_delayed_job_only_to_who_may_use_it(db):
    """Issue 42: a delayed or scheduled job's page has Run now; a due one, a running one or a
    finished one has none, nor has a viewer."""
    later, due = _delayed_job(), jobs.ok.enqueue(n=43).id
    operator = _client(db, ALLOWED)
    button = 'value="run-now">Run now</button>'
    assert button in operator.get(f"/admin/django_xjobs/job/{later}/change/").content.decode()
    assert button not in operator.get(f"/admin/django_xjobs/job/{due}/change/").content.decode()
    viewer = Client(enforce_csrf_checks=True)
    viewer.force_login(_user("viewer", **WHO["view-only staff"]))
    assert button not in viewer.get(f"/admin/django_xjobs/job/{later}/change/").content.decode()
    response = _run_now_button(operator, later)
    assert response.status_code == 302
    row = Job.objects.get(id=later)
    assert row.state == "ready" and row.run_at <= row.updated_at


def test_the_job_page_shows_retry_and_cancel_only_to_who_may_use_them(db):
    dead, ready = _dead_job(), jobs.ok.enqueue(n=29).id
    operator = _client(db, ALLOWED)
    assert (
        'value="retry">Retry</button>'
        in operator.get(f"/admin/django_xjobs/job/{dead}/change/").content.decode()
    )
    assert (
        'value="cancel">Cancel</button>'
        in operator.get(f"/admin/django_xjobs/job/{ready}/change/").content.decode()
    )
    viewer = Client(enforce_csrf_checks=True)
    viewer.force_login(_user("viewer", **WHO["view-only staff"]))
    for job_id in (dead, ready):
        page = viewer.get(f"/admin/django_xjobs/job/{job_id}/change/").content.decode()
        assert "</button>" not in page.split('id="content-main"')[1].split("submit-row")[0]
        assert "Retry selected" not in viewer.get("/admin/django_xjobs/job/").content.decode()


def test_retry_from_here_is_offered_only_to_who_may_use_it(db):
    job_id = _dead_job_with_steps()
    operator = _client(db, ALLOWED)
    assert (
        operator.get(f"/admin/django_xjobs/job/{job_id}/change/")
        .content.decode()
        .count("retry from here")
        == 3
    )
    viewer = Client(enforce_csrf_checks=True)
    viewer.force_login(_user("viewer", **WHO["view-only staff"]))
    assert (
        "retry from here"
        not in viewer.get(f"/admin/django_xjobs/job/{job_id}/change/").content.decode()
    )


def test_the_library_rows_pages_change_nothing_even_for_a_superuser(db):
    """The outbox, fleet slots, workers and backfills are view-only: a posted change or a
    hand-made delete action is refused, and the staged input is a payload like a job's."""
    entry = StagedOutboxFactory(
        job="tests.jobs.secret_echo",
        idempotency_key="secret-echo:x",
        input={"user": "ada", "password": "outbox-secret-26"},
    )
    root = Client(enforce_csrf_checks=True)
    root.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = root.get(f"/admin/django_xjobs/outboxentry/{entry.pk}/change/")
    token = TOKEN.search(page.content.decode()).group(1)
    assert "[redacted]" in page.content.decode()
    assert "outbox-secret-26" not in page.content.decode()
    posted = root.post(
        f"/admin/django_xjobs/outboxentry/{entry.pk}/change/",
        {"queue": "other", "csrfmiddlewaretoken": token},
    )
    assert posted.status_code == 403
    root.post(
        "/admin/django_xjobs/outboxentry/",
        {
            "action": "delete_selected",
            "_selected_action": [str(entry.pk)],
            "csrfmiddlewaretoken": token,
        },
    )
    assert OutboxEntry.objects.get(pk=entry.pk).queue == "default"
    viewer = Client()
    viewer.force_login(_user("viewer", staff=True, perms=("view_outboxentry",)))
    shape = viewer.get(f"/admin/django_xjobs/outboxentry/{entry.pk}/change/").content.decode()
    assert "ada" not in shape and "&quot;user&quot;: &quot;str of 3&quot;" in shape


#: who asks for an outbox action, holding everything but the permission the action needs
OUTBOX_WHO = {
    "view-only staff": {"staff": True, "perms": ("view_outboxentry",)},
    "staff without permissions": {"staff": True, "perms": ()},
    "non-staff holding every outbox permission": {
        "staff": False,
        "perms": ("view_outboxentry", "change_outboxentry", "delete_outboxentry"),
    },
}


def _post_outbox_action(client: Client, action: str, entry_id) -> None:
    client.get("/admin/", follow=True)  # any admin page sets the CSRF cookie
    client.post(
        "/admin/django_xjobs/outboxentry/",
        {
            "action": action,
            "_selected_action": [str(entry_id)],
            "csrfmiddlewaretoken": client.cookies["csrftoken"].value,
        },
    )


@pytest.mark.parametrize("who", OUTBOX_WHO.values(), ids=OUTBOX_WHO.keys())
def test_a_user_without_the_outbox_permission_neither_retries_nor_discards(db, who):
    """Issue 26 item 1 for the quarantine actions (issue 24): retry needs change_outboxentry,
    discard delete_outboxentry, through a real POST with the CSRF checks on."""
    entry = QuarantinedOutboxFactory()
    client = Client(enforce_csrf_checks=True)
    client.force_login(_user("clerk", **who))
    _post_outbox_action(client, "retry_quarantined", entry.pk)
    _post_outbox_action(client, "discard_quarantined", entry.pk)
    assert OutboxEntry.objects.get(pk=entry.pk).quarantined_at is not None


def test_a_staff_user_with_the_outbox_permissions_retries_and_discards(db):
    retried, discarded = QuarantinedOutboxFactory(), QuarantinedOutboxFactory()
    client = Client(enforce_csrf_checks=True)
    perms = ("view_outboxentry", "change_outboxentry", "delete_outboxentry")
    client.force_login(_user("clerk", staff=True, perms=perms))
    _post_outbox_action(client, "retry_quarantined", retried.pk)
    _post_outbox_action(client, "discard_quarantined", discarded.pk)
    assert OutboxEntry.objects.get(pk=retried.pk).quarantined_at is None
    assert not OutboxEntry.objects.filter(pk=discarded.pk).exists()
