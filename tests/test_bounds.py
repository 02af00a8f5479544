"""Raw exceptions where a code belongs (issue 24 §4): a NUL or a lone surrogate in a stored name,
an endless duration, a queue name with a trailing newline, absurd settings, a run of endless
steps — each is refused with one coded line (or bounded), the same on both drivers; and expired
events go in the workers' upkeep, not only when someone publishes.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace
from datetime import timedelta
from uuid import uuid4

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.test import override_settings

from django_xjobs import (
    DurationInvalidError,
    InputInvalidError,
    InvariantError,
    conf,
    publish_event,
)
from django_xjobs.drivers.contract import EnqueueRequest
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.management import checks as xjobs_checks
from django_xjobs.models import JobEvent
from django_xjobs.run.execution import Outcome
from django_xjobs.testing import run_until_idle
from django_xjobs.worker.retention import Retention
from tests import jobs
from tests.support.process import wait_for

TEST_XJOBS = settings.XJOBS

# --- names the library stores -----------------------------------------------------------------


@pytest.mark.parametrize("bad", ["acme\x00", "acme\ud83d"])
@pytest.mark.parametrize("field", ["tenant_id", "enqueued_by"])
def test_a_stored_name_with_nul_or_a_lone_surrogate_is_refused_with_a_code(harness, field, bad):
    handle = jobs.ok.using(**{field: bad})
    with pytest.raises(InputInvalidError, match=field):
        handle.enqueue(n=1)
    staged = override_settings(XJOBS={**TEST_XJOBS, "OUTBOX": "auto"})
    with staged, transaction.atomic(), pytest.raises(InputInvalidError, match=field):
        handle.enqueue(n=2)  # staged: the same refusal, before anything is written
    assert harness.driver.reads().list_jobs() == []


@pytest.mark.parametrize("bad", ["acme\x00", "acme\ud83d"])
@pytest.mark.parametrize("field", ["tenant_id", "enqueued_by"])
def test_enqueue_many_refuses_such_a_name_and_writes_none(harness, field, bad):
    # the elements share one request made once, and each is that request with its own input:
    # the names an element sets are checked for it, the shared ones once
    with pytest.raises(InputInvalidError, match=field):
        jobs.ok.using(**{field: bad}).enqueue_many([{"n": 1}, {"n": 2}])
    assert harness.driver.reads().list_jobs() == []


def test_a_request_for_another_input_equals_the_one_constructed_and_stays_frozen():
    shared = EnqueueRequest(
        name="a",
        queue="q",
        input={},
        input_json="{}",
        idempotency_key="",
        max_attempts=3,
        enqueued_by="parent",
    )
    made = shared.for_input({"n": 1}, '{"n":1}', "k:1", "acme")
    assert made == EnqueueRequest(
        name="a",
        queue="q",
        input={"n": 1},
        input_json='{"n":1}',
        idempotency_key="k:1",
        max_attempts=3,
        enqueued_by="parent",
        tenant_id="acme",
    )
    assert repr(made) == repr(replace(made))
    job_id = uuid4()
    assert made.with_id(job_id) == replace(made, id=job_id) and made.id is None
    with pytest.raises(FrozenInstanceError):
        made.name = "b"  # type: ignore[misc]
    assert shared.input == {} and shared.idempotency_key == ""  # the shared one is untouched
    with pytest.raises(InputInvalidError, match="tenant_id contains a NUL"):
        shared.for_input({}, "{}", "k", "t\x00")
    with pytest.raises(InputInvalidError, match="the idempotency key contains a lone"):
        shared.for_input({}, "{}", "k\udc80", None)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"event": "shipped\x00"}, "event name contains a NUL"),
        ({"event": "shipped", "correlation_key": "k\udc80"}, "correlation_key contains a lone"),
    ],
)
def test_an_event_name_or_key_that_cannot_be_stored_is_refused(harness, kwargs, needle):
    with pytest.raises(InvariantError, match=needle):
        publish_event(**kwargs)


def test_a_step_name_that_cannot_be_stored_fails_the_run_with_a_code(harness):
    job_id = jobs.bad_step_name.enqueue().id
    [execution] = run_until_idle()
    assert execution.outcome == Outcome.DEAD_LETTERED
    assert harness.row(job_id).last_error.startswith("X_INVARIANT: step name")


# --- durations ------------------------------------------------------------------------------------


@pytest.mark.parametrize("delay", [1e300, "99999999w", timedelta(days=999_999_999)])
def test_a_delay_past_the_longest_duration_is_refused(delay):
    with pytest.raises(DurationInvalidError, match="longer than 100 years"):
        jobs.ok.using(delay=delay)


def test_an_event_ttl_past_the_longest_duration_is_refused(harness):
    with pytest.raises(DurationInvalidError, match="longer than 100 years"):
        publish_event("e", ttl=1e12)


def test_both_drivers_refuse_an_endless_visibility_timeout(harness):
    jobs.ok.enqueue(n=1)
    with pytest.raises(InvariantError, match="visibility_timeout"):
        harness.driver.runs().claim(
            queues=["default"], limit=1, visibility_timeout=1e300, worker_id="w1"
        )
    assert harness.driver.reads().list_jobs()[0].state == "ready"  # nothing was claimed


def test_the_command_line_says_the_duration_is_too_long():
    from django_xjobs.durations import parse_command_line

    with pytest.raises(DurationInvalidError, match="--older-than 99999999w is longer than 100"):
        parse_command_line("99999999w", flag="--older-than")


# --- queue names and settings -----------------------------------------------------------------


def test_a_queue_name_with_a_trailing_newline_is_refused():
    with pytest.raises(InvariantError, match="not valid"):
        jobs.ok.using(queue="default\n")
    with pytest.raises(InvariantError, match="not valid"):
        conf.check_queue_name("default\n", error=InvariantError)


@pytest.mark.parametrize(
    ("xjobs", "needle"),
    [
        ({"CONCURRENCY": 10**9}, "more than 1,024"),
        ({"CONCURRENCY": {"default": 10**9}}, "more than 1,024"),
        ({"RELAY_BATCH_SIZE": 10**9}, "at most 10,000"),
        ({"PREFETCH": 10**9}, "from 0 to 10,000"),
        ({"MAX_PAYLOAD_BYTES": 10**12}, "at most 67,108,864"),
        ({"MAX_LEASE_EXPIRIES": 10**9}, "at most 1,000"),
        ({"OUTAGE_RETRIES": 10**9}, "from 0 to 1,000"),
        ({"MAX_STEPS_PER_RUN": 10**9}, "at most 1,000,000"),
        ({"QUEUES": ["default\n"]}, "not valid"),
        ({"VISIBILITY_TIMEOUT": 1e300}, "longer than 100 years"),
    ],
)
def test_an_absurd_setting_fails_the_system_check(xjobs, needle):
    with override_settings(XJOBS=xjobs):
        [error] = xjobs_checks.check_settings()
        assert error.id == "django_xjobs.E001"
        assert needle in error.msg


def test_the_worker_refuses_an_absurd_concurrency():
    from django_xjobs.conf.concurrency import parse_concurrency

    with pytest.raises(InvariantError, match="more than 1,024"):
        parse_concurrency("1000000000", field="--concurrency")


def test_the_relay_refuses_an_absurd_batch(db):
    with pytest.raises(CommandError, match="--batch-size must be from 1 to 10,000"):
        call_command("xjobs_relay", "--batch-size", str(10**9))


# --- steps per run --------------------------------------------------------------------------------


def test_a_run_past_the_step_cap_fails_with_its_code(harness):
    with override_settings(XJOBS={**TEST_XJOBS, "MAX_STEPS_PER_RUN": 3}):
        done = jobs.many_steps.enqueue(n=3).id
        over = jobs.many_steps.enqueue(n=4).id
        run_until_idle()
    assert harness.row(done).state == "done"
    row = harness.row(over)
    assert (row.state, row.stop_reason) == ("dead", "terminal")
    assert row.last_error.startswith("X_STEP_LIMIT: step 's3' would be step 4 of this run")


def test_the_admin_step_timeline_shows_the_latest_steps_only(db, client):
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    job_id = jobs.many_steps.enqueue(n=230).id
    run_until_idle()
    page = client.get(f"/admin/django_xjobs/job/{job_id}/change/").content.decode()
    assert "30 earlier steps not shown" in page
    assert ">s229<" in page and ">s29<" not in page


# --- expired events go in upkeep --------------------------------------------------------------


def test_a_worker_purges_expired_events_without_anyone_publishing(live_harness):
    driver = live_harness.driver
    publish_event("short-lived", {"n": 1}, ttl="1s")
    if isinstance(driver, MemoryDriver):
        driver.events().shift(5)
        left = lambda: len(driver.events()._events)  # noqa: E731
    else:
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE x_job_events SET published_at = published_at - interval '5 seconds',"
                " expires_at = expires_at - interval '5 seconds'"
            )
        left = JobEvent.objects.count
    assert left() == 1
    retention = Retention(driver)  # no RETENTION set: the purge runs all the same
    retention.maybe_prune()
    wait_for(lambda: not retention.running.is_set(), what="the upkeep pass to end")
    assert left() == 0


@pytest.mark.parametrize("key", ["k\x00", "k\ud800"])
def test_a_refusal_naming_a_bad_key_can_itself_be_printed(key):
    with pytest.raises(InputInvalidError) as refused:
        jobs.takes_kwargs.enqueue(**{"data": {key: 1}})
    str(refused.value).encode()  # a lone surrogate here would make the error unprintable
    assert "\x00" not in str(refused.value)
