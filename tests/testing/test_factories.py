"""django_xjobs.testing.factories (issue 33): each factory's rows pass the same invariants as the
library's own. Every case makes the state through the library's real path (enqueue, a run
under ``run_until_idle`` / ``run_to_completion``, a claim, an operator's cancel, a staged
enqueue, a poisoned publish) and through the factory, and compares what the invariants read:
state, attempt, max_attempts, stop_reason, the shape of ``last_error`` and of each history
entry, the step rows, the lease fields (SPEC STATE-*, DRV-01, STEP-*). Then ``inspect_job``,
``xjobs show`` and the admin render every factory row."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from io import StringIO
from typing import Any
from uuid import UUID

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import transaction
from django.test import override_settings

from django_xjobs.drivers import get_driver
from django_xjobs.models import Job, JobStep, OutboxEntry
from django_xjobs.operations import cancel_job, inspect_job, inspect_outbox, inspect_workers
from django_xjobs.states import shown_state
from django_xjobs.testing import relay_staged, run_to_completion, run_until_idle
from django_xjobs.testing.factories import (
    MISSING,
    CancelledJobFactory,
    DeadJobFactory,
    DoneJobFactory,
    JobFactory,
    QuarantinedOutboxFactory,
    RetryingJobFactory,
    RunningJobFactory,
    SleepingJobFactory,
    StagedOutboxFactory,
    WaitingJobFactory,
)
from tests import jobs
from tests.outbox.test_quarantine import quarantined_row


def _error_shape(text: str | None) -> str | None:
    """``last_error`` as the invariants read it: absent, ``Type: message``, or a code first."""
    if text is None:
        return None
    if re.match(r"^X_[A-Z_]+: |^[A-Za-z_][\w.]*: .+", text):
        return text.split(":", 1)[0] + ": ..."
    return "an operator's reason"


def _entry_shape(entry: dict[str, Any]) -> tuple[Any, ...]:
    assert datetime.fromisoformat(entry["at"]).tzinfo is not None
    assert entry["traceback"].startswith("Traceback (most recent call last):")
    return (
        sorted(entry),
        entry["attempt"],
        entry["outcome"],
        entry["exception"],
        entry["code"],
        entry["traceback"].rstrip().splitlines()[-1].split(":", 1)[0],
    )


def shape(job_id: UUID) -> dict[str, Any]:
    row = Job.objects.get(id=job_id)
    steps = JobStep.objects.filter(run_id=row.run_id).order_by("position")
    return {
        "state": row.state,
        "attempt": row.attempt,
        "max_attempts": row.max_attempts,
        "stop_reason": row.stop_reason,
        "last_error": _error_shape(row.last_error),
        "errors": [_entry_shape(e) for e in row.errors],
        "result": row.result is not None,
        "due_later": row.run_at > row.updated_at,
        "steps": [
            (
                s.position,
                s.status,
                s.wake_at == row.run_at if s.wake_at else None,
                s.event,
                s.completed_at is not None,
                s.attempts,
            )
            for s in steps
        ],
        "lease": (
            row.claimed_by is not None,
            row.lease_token is not None,
            row.visible_at is not None and row.visible_at > row.last_attempted_at,
            row.claimed_by == row.attempted_by if row.claimed_by else None,
        ),
        "claimed": (
            row.started_at is not None,
            row.last_attempted_at is not None,
            row.attempted_by is not None,
        ),
        "lease_expiries": row.lease_expiries,
        "lapsed_holder": row.lapsed_holder,
    }


def published(enqueued) -> UUID:
    relay_staged()
    return enqueued.id


def test_done(db):
    real = published(jobs.ok.enqueue(n=1))
    run_until_idle()
    made = DoneJobFactory(name="tests.jobs.ok", result={"n": 1, "attempt": 1})
    assert shape(made.id) == shape(real)


def test_failed_and_waiting_to_retry(db):
    real = published(jobs.flaky.enqueue(n=1))
    run_until_idle()
    made = RetryingJobFactory(error=ConnectionError("attempt 1 failed"))
    assert shape(made.id) == shape(real)
    assert shape(real)["errors"][0][2] == "retried"


def test_dead_with_attempts_exhausted(db):
    real = published(jobs.fails.enqueue(n=1))
    run_to_completion(real)
    made = DeadJobFactory(error=ValueError("boom 1"))
    assert shape(made.id) == shape(real)
    assert shape(real)["stop_reason"] == "attempts-exhausted"


def test_dead_on_a_terminal_error(db):
    real = published(jobs.terminal.enqueue(n=1))
    run_until_idle()
    made = DeadJobFactory(terminal=True, max_attempts=5)
    assert shape(made.id) == shape(real)
    assert Job.objects.get(id=made.id).last_error == Job.objects.get(id=real).last_error


def test_cancelled(db):
    real = published(jobs.ok.enqueue(n=2))
    cancel_job(real, "no longer needed")
    made = CancelledJobFactory(last_error="no longer needed")
    assert shape(made.id) == shape(real)


def test_suspended_on_a_sleep(db):
    real = published(jobs.sleeper.enqueue(n=1))
    run_until_idle()
    made = SleepingJobFactory(sleep_for=3 * 86400)
    assert shape(made.id) == shape(real)
    assert [s["status"] for s in inspect_job(made.id)["steps"]] == ["completed", "sleeping"]


def test_suspended_on_an_event(db):
    real = published(jobs.waiter.enqueue(order_id=1))
    run_until_idle()
    made = WaitingJobFactory(event="order.shipped")
    assert shape(made.id) == shape(real)


def test_running_with_a_live_lease(db):
    real = published(jobs.ok.enqueue(n=3))
    [claimed] = (
        get_driver()
        .runs()
        .claim(queues=["default"], limit=1, visibility_timeout=30, worker_id="worker-1")
    )
    made = RunningJobFactory()
    assert claimed.id == real
    assert shape(made.id) == shape(real)
    [worker] = inspect_workers()  # the holder is present, as a running worker is
    assert (worker["id"], worker["in_flight"]) == ("worker-1", 1)


OUTBOX_FIELDS = ("published_at", "job_id", "claimed_at", "claimed_by", "quarantined_at", "error")


def outbox_shape(entry_id: UUID) -> dict[str, Any]:
    row = OutboxEntry.objects.get(id=entry_id)
    return {
        **{name: getattr(row, name) is not None for name in OUTBOX_FIELDS},
        "error_code": row.error_code,
        "due": row.run_at <= row.staged_at,
        # sizes, and which values were largest, are the row's own
        "error": re.sub(r"\d[\d,]*|the largest values sent: [^—]*", "N", row.error)
        if row.error
        else None,
    }


def test_a_staged_outbox_row(db):
    with override_settings(XJOBS={"OUTBOX": "auto"}), transaction.atomic():
        real = jobs.ok.enqueue(n=4).id
    made = StagedOutboxFactory(job="tests.jobs.ok")
    assert outbox_shape(made.id) == outbox_shape(real)
    assert inspect_outbox()["pending"] == 2


def test_a_quarantined_outbox_row(db):
    real = quarantined_row(get_driver())
    made = QuarantinedOutboxFactory()
    assert outbox_shape(made.id)["error_code"] == "54000"
    real_error = outbox_shape(real)["error"]
    assert outbox_shape(made.id) == outbox_shape(real)
    assert "[idempotency key N bytes (limit N)" in real_error
    assert inspect_outbox()["quarantined"] == 2


FACTORIES = [
    JobFactory,
    DoneJobFactory,
    RetryingJobFactory,
    DeadJobFactory,
    CancelledJobFactory,
    SleepingJobFactory,
    WaitingJobFactory,
    RunningJobFactory,
]


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f.__name__)
def test_every_operator_surface_renders_a_factory_row(db, client, factory):
    job = factory(name="tests.jobs.ok", input={"n": 1})
    # a retry waiting out its backoff is stored ready and shown delayed (one vocabulary, Q-05)
    state = shown_state(job.state, job.run_at, datetime.now(UTC))
    shown = inspect_job(job.id, reveal=True)
    assert shown is not None and shown["state"] == state
    assert len(shown["attempts"]) == len(job.errors)
    out = StringIO()
    call_command("xjobs", "show", str(job.id), "--json", stdout=out)
    assert json.loads(out.getvalue())["state"] == state
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    page = client.get(f"/admin/django_xjobs/job/{job.id}/change/")
    assert page.status_code == 200
    assert client.get("/admin/django_xjobs/job/").status_code == 200


def test_outbox_factory_rows_render_in_the_admin_and_the_cli(db, client):
    StagedOutboxFactory()
    QuarantinedOutboxFactory()
    out = StringIO()
    call_command("xjobs", "outbox", "--json", stdout=out)
    listed = json.loads(out.getvalue())
    assert (listed["pending"], listed["quarantined"]) == (1, 1)
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    assert client.get("/admin/django_xjobs/outboxentry/").status_code == 200


def test_times_follow_the_given_now(db):
    at = datetime(2026, 3, 1, 9, tzinfo=UTC)
    job = SleepingJobFactory(now=at, sleep_for=60)
    assert (job.created_at, job.run_at) == (at, datetime(2026, 3, 1, 9, 1, tzinfo=UTC))


def test_without_factory_boy_the_import_says_which_extra_to_install():
    code = (
        "import sys; sys.modules['factory'] = None\n"
        "import django; from django.conf import settings\n"
        "settings.configure(INSTALLED_APPS=['django_xjobs'], DATABASES={})\n"
        "django.setup()\n"
        "try:\n"
        "    import django_xjobs.testing.factories\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == MISSING
    assert "django-xjobs[testing]" in MISSING


def test_under_freezegun_rows_are_stamped_on_the_frozen_clock(db):
    from freezegun import freeze_time

    with freeze_time("2026-03-01 09:00"):
        job = RetryingJobFactory(retry_in=600)
        assert run_until_idle() == []  # due in ten minutes on the frozen clock, not before
    at = datetime(2026, 3, 1, 9, tzinfo=UTC)
    assert (job.created_at, job.run_at) == (at, datetime(2026, 3, 1, 9, 10, tzinfo=UTC))
    assert job.errors[0]["at"] == at.isoformat()
