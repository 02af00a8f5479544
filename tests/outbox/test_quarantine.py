"""Issue 24 §1: one staged row must not wedge the outbox.

Keys and tenant ids are refused over their byte limits at every enqueue path, staged or not, on
both drivers; a row that got past those checks (written by another version, or by SQL) and whose
publish is refused for its own values is quarantined, and the rest of its batch is published in
the same pass; an operator lists, retries and discards it through the API, ``manage.py xjobs
outbox`` and the admin. The process case (a real relay) is in
tests/outbox/test_relay_quarantine.py.
"""

from __future__ import annotations

import json
import secrets
from io import StringIO
from types import SimpleNamespace
from uuid import UUID

import psycopg.errors
import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.db import DataError, OperationalError, transaction
from django.test import override_settings
from django.utils import timezone

from django_xjobs import (
    Actor,
    discard_outbox_entry,
    inspect_outbox,
    metrics,
    retry_outbox_entry,
)
from django_xjobs.backends.tasks import build_request, options_for
from django_xjobs.drivers import failures, get_driver
from django_xjobs.drivers.bounds import MAX_KEY_BYTES, MAX_TENANT_BYTES
from django_xjobs.drivers.contract import EnqueueRequest
from django_xjobs.errors import DriverUnavailableError, InputInvalidError, JobNotFoundError
from django_xjobs.management.command import database_error
from django_xjobs.models import OutboxEntry
from django_xjobs.outbox.relay import publish_visible
from django_xjobs.run import publish
from django_xjobs.run.execution import Outcome
from django_xjobs.run.publish import publish_batch
from django_xjobs.scheduler.role import _occurrence_request
from django_xjobs.worker.worker import Worker
from tests import jobs, tasks

AUTO = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "auto"}


def poison() -> str:
    """A key no live-key index entry can hold on either driver: 3,000 characters of random hex
    (incompressible enough that PostgreSQL's index compression cannot save it)."""
    return secrets.token_hex(1500)


def request(key: str, n: int = 0, tenant: str | None = None) -> EnqueueRequest:
    """A request built past the enqueue checks, as another version or SQL would write it."""
    payload = {"key": key}
    return EnqueueRequest(
        name="tests.jobs.keyed",
        queue="default",
        input=payload,
        input_json=json.dumps(payload),
        idempotency_key=key,
        max_attempts=3,
        tenant_id=tenant,
    )


def count_jobs(harness) -> int:
    return len(harness.driver.reads().list_jobs(limit=1000))


# --- the byte limits, at every enqueue path, on both drivers -------------------------------


def test_a_key_over_the_limit_is_refused_at_enqueue_naming_limit_and_size(harness):
    with pytest.raises(InputInvalidError) as caught:
        jobs.keyed.enqueue(key="k" * (MAX_KEY_BYTES + 1))
    error = caught.value
    assert error.code == "X_INPUT_INVALID"
    assert "1,025 bytes" in error.message and "at most 1,024 bytes" in error.message
    assert (error.meta["limit"], error.meta["size"]) == (1024, 1025) and error.hint
    assert count_jobs(harness) == 0


def test_the_limit_is_in_bytes_not_characters(harness):
    with pytest.raises(InputInvalidError, match="1,026 bytes"):
        jobs.keyed.enqueue(key="é" * 513)  # 513 characters, 1,026 bytes of UTF-8
    assert count_jobs(harness) == 0


def test_a_key_of_exactly_the_limit_is_accepted_and_runs(harness):
    result = jobs.keyed.enqueue(key="k" * MAX_KEY_BYTES)
    assert harness.row(result.id).idempotency_key == "k" * MAX_KEY_BYTES


def test_a_long_key_is_refused_inside_atomic_before_anything_is_staged(harness):
    with override_settings(XJOBS=AUTO):
        with transaction.atomic():
            with pytest.raises(InputInvalidError, match="idempotency key"):
                jobs.keyed.enqueue(key="k" * 3000)
            jobs.keyed.enqueue(key="fine")
        publish_visible(harness.driver, "test-relay")
    store = harness.driver.outbox("default")
    assert store.quarantine.count() == 0
    assert [r.idempotency_key for r in harness.driver.reads().list_jobs()] == ["fine"]


def test_enqueue_many_names_the_element_and_writes_nothing(harness):
    with pytest.raises(InputInvalidError) as caught:
        jobs.keyed.enqueue_many([{"key": "a"}, {"key": "b" * 2000}])
    assert caught.value.message.startswith("inputs[1]: ")
    assert caught.value.meta["size"] == 2000
    assert count_jobs(harness) == 0


def test_a_tenant_over_the_limit_is_refused_through_using_and_enqueue_as(harness):
    tenant = "t" * (MAX_TENANT_BYTES + 1)
    with pytest.raises(InputInvalidError, match="tenant_id is 513 bytes; at most 512"):
        jobs.keyed.using(tenant_id=tenant).enqueue(key="a")
    with pytest.raises(InputInvalidError, match="tenant_id is 513 bytes"):
        jobs.keyed.enqueue_as(Actor(id="user:1", tenant_id=tenant), key="a")
    assert count_jobs(harness) == 0
    ok = jobs.keyed.using(tenant_id="t" * MAX_TENANT_BYTES).enqueue(key="a")
    assert harness.row(ok.id).tenant_id == "t" * MAX_TENANT_BYTES


def test_the_django_tasks_backend_and_a_task_cron_key_are_checked(harness):
    options = options_for("default")
    with pytest.raises(InputInvalidError, match=r"task 'tests\.tasks\.add': the idempotency key"):
        build_request(tasks.add, (1, 2), {}, "default", options, key="x" * 1100)
    result = tasks.add.enqueue(1, 2)  # its key is its id: well inside the limit
    assert harness.row(UUID(result.id)) is not None


def test_a_cron_occurrence_prefix_that_pushes_a_key_over_is_refused():
    handle = SimpleNamespace(name="tests.long_cron")
    occurrence = timezone.now()
    fits = _occurrence_request(handle, jobs.keyed, {"key": "k" * 900}, occurrence)
    assert len(fits.idempotency_key) < MAX_KEY_BYTES
    with pytest.raises(
        InputInvalidError, match=r"cron 'tests\.long_cron' job 'tests\.jobs\.keyed'"
    ):
        _occurrence_request(handle, jobs.keyed, {"key": "k" * 1000}, occurrence)


# --- quarantine, on both drivers ----------------------------------------------------------


def test_a_poisoned_row_is_quarantined_and_the_rest_of_its_batch_published(harness):
    store = harness.driver.outbox("default")
    bad = store.stage(request(poison()))
    good = [store.stage(request(f"good:{n}", n)) for n in range(4)]
    before = metrics.value("xjobs_outbox_quarantined_total", code="54000")
    rows = store.claim(100, "relay-a")
    assert [r.id for r in rows] == [bad, *good]  # the poisoned row first, as in the issue
    assert publish_batch(store, harness.driver, rows, "relay-a") == 4
    assert sorted(r.idempotency_key for r in harness.driver.reads().list_jobs()) == [
        f"good:{n}" for n in range(4)
    ]
    assert metrics.value("xjobs_outbox_quarantined_total", code="54000") == before + 1
    assert store.claim(100, "relay-b") == []  # left out of later batches
    assert store.pending()[0] == 0  # the lag is not held up by it either
    outbox = inspect_outbox()
    assert outbox["quarantined"] == 1
    [entry] = outbox["entries"]
    assert (entry["id"], entry["error_code"], entry["key_bytes"]) == (str(bad), "54000", 3000)
    assert "index row size" in entry["error"]
    assert "idempotency key 3,000 bytes (limit 1,024)" in entry["error"]
    assert "unavailable" not in entry["error"] and "DATABASE_URL" not in entry["error"]


def test_retry_hands_a_quarantined_row_back_and_discard_deletes_it(harness):
    store = harness.driver.outbox("default")
    bad = store.stage(request(poison()))
    publish_batch(store, harness.driver, store.claim(10, "r"), "r")
    assert inspect_outbox()["quarantined"] == 1
    assert retry_outbox_entry(bad)["quarantined"] == 0
    [again] = store.claim(10, "r")  # back in the relay's batches ...
    assert again.id == bad
    publish_batch(store, harness.driver, [again], "r")  # ... and refused again: nothing fixed
    assert inspect_outbox()["quarantined"] == 1
    assert discard_outbox_entry(str(bad))["quarantined"] == 0
    assert store.claim(10, "r") == [] and count_jobs(harness) == 0
    with pytest.raises(JobNotFoundError, match="no quarantined outbox row"):
        discard_outbox_entry(bad)
    with pytest.raises(JobNotFoundError):
        retry_outbox_entry(bad)


def test_worker_tick_publish_path_quarantines_too(harness):
    store = harness.driver.outbox("default")
    store.stage(request(poison()))
    store.stage(request("behind", 1))
    worker = Worker(queues=["default"], driver=harness.driver, burst=True, concurrency=2)
    done = worker.tick()  # publishes what it sees first, then claims and runs
    assert [e.outcome for e in done.executions] == [Outcome.COMPLETED]
    assert [(r.idempotency_key, r.state) for r in harness.driver.reads().list_jobs()] == [
        ("behind", "done")
    ]
    assert inspect_outbox()["quarantined"] == 1
    assert worker.tick().executions == []  # the quarantined row stays out


def test_a_transient_failure_still_hands_the_whole_batch_back(harness):
    store = harness.driver.outbox("default")
    ids = [store.stage(request(f"k:{n}", n)) for n in range(3)]
    rows = store.claim(10, "r")

    class Down:
        name, database = "down", None

        def jobs(self):
            return self

        def enqueue(self, req):
            raise OperationalError("server closed the connection unexpectedly")

    assert publish_batch(store, Down(), rows, "r") == 0
    assert store.quarantine.count() == 0
    assert [r.id for r in store.claim(10, "other")] == ids  # released at once


# --- SQLSTATE decides the wording -----------------------------------------------------------


def wrapped(django_class, driver_error):
    try:
        raise django_class(str(driver_error)) from driver_error
    except django_class as error:
        return error


def test_a_program_limit_error_names_the_value_never_the_connection():
    error = wrapped(
        OperationalError,
        psycopg.errors.ProgramLimitExceeded("index row size 3016 exceeds btree maximum 2704"),
    )
    translated = failures.translate(error, "default", "INSERT", {"key": "k" * 3000, "name": "n"})
    assert translated.code == "X_VALUE_REFUSED"
    assert "key 3,000 bytes" in translated.message and "SQLSTATE 54000" in translated.message
    assert "unavailable" not in str(translated) and "DATABASE_URL" not in str(translated)
    assert failures.is_permanent(error) and not failures.is_transient(error)


def test_a_data_error_names_the_row_of_an_array_parameter():
    error = wrapped(DataError, psycopg.errors.StringDataRightTruncation("value too long"))
    translated = failures.translate(error, "default", "INSERT", {"keys": ["a", "b" * 10]})
    assert "keys[1] 10 bytes" in translated.message


def test_only_a_connection_failure_says_unavailable():
    lost = wrapped(OperationalError, psycopg.errors.AdminShutdown("terminating connection"))
    assert "is unavailable" in str(failures.translate(lost, "default", "SELECT 1"))
    deadlock = wrapped(OperationalError, psycopg.errors.DeadlockDetected("deadlock"))
    said = failures.translate(deadlock, "default", "SELECT 1")
    assert isinstance(said, DriverUnavailableError)  # still retried
    assert "unavailable" not in said.message and "DATABASE_URL" not in said.hint
    assert not failures.is_permanent(deadlock)


def test_a_command_names_a_refused_value_not_the_connection():
    error = wrapped(
        OperationalError, psycopg.errors.ProgramLimitExceeded("index row size 3016 exceeds")
    )
    said = database_error(error, "default")
    assert said.code == "X_VALUE_REFUSED" and "unavailable" not in said.message
    assert "DATABASE_URL" not in said.hint


def test_a_real_oversized_key_on_postgres_is_refused_by_value(db):
    from django_xjobs.drivers.postgres import PostgresDriver

    driver = PostgresDriver("default")
    with pytest.raises(Exception) as caught, transaction.atomic():
        driver.jobs().enqueue(request(poison()))
    assert caught.value.code == "X_VALUE_REFUSED"
    assert failures.sqlstate(caught.value) == "54000"
    assert "key 3,000 bytes" in caught.value.message
    assert "unavailable" not in str(caught.value)


# --- the operator's surfaces: manage.py xjobs outbox, the admin, the metric -------------------


def quarantined_row(driver) -> UUID:
    store = driver.outbox("default")
    bad = store.stage(request(poison()))
    store.stage(request("behind", 1))
    publish_batch(store, driver, store.claim(10, "r"), "r")
    return bad


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


def test_xjobs_outbox_lists_retries_and_discards(harness):
    bad = quarantined_row(harness.driver)
    listed = json.loads(xjobs("outbox", "--json"))
    assert listed["quarantined"] == 1 and listed["pending"] == 0
    [entry] = listed["entries"]
    assert (entry["id"], entry["error_code"], entry["key_bytes"]) == (str(bad), "54000", 3000)
    text = xjobs("outbox")
    assert "quarantined 1" in text and str(bad) in text and "54000" in text
    assert "key 3,000B" in text and "index row size" in text
    assert f"{bad} handed back" in xjobs("outbox", "retry", str(bad))
    assert harness.driver.outbox("default").quarantine.count() == 0
    publish_visible(harness.driver, "r")  # refused again: nothing was fixed
    assert json.loads(xjobs("outbox", "discard", str(bad), "--json"))["quarantined"] == 0
    with pytest.raises(CommandError, match="X_JOB_NOT_FOUND: no quarantined outbox row"):
        xjobs("outbox", "discard", str(bad))
    with pytest.raises(CommandError, match="X_INVARIANT: xjobs outbox retry needs the id"):
        xjobs("outbox", "retry")


def test_the_metric_exports_the_quarantined_gauge_and_counter(harness):
    pytest.importorskip("prometheus_client")
    from prometheus_client import generate_latest

    quarantined_row(harness.driver)
    metrics.clear_cache()
    text = generate_latest(metrics.registry()).decode()
    assert "xjobs_outbox_quarantined 1.0" in text
    assert 'xjobs_outbox_quarantined_total{code="54000"}' in text


def test_the_admin_lists_quarantined_rows_and_acts_with_permissions(client, db):
    # the admin reads x_outbox: the PostgreSQL driver, as configured
    driver = get_driver()
    assert driver.name == "postgres"
    bad = quarantined_row(driver)
    page_url = "/admin/django_xjobs/outboxentry/"
    clerk = User.objects.create_user("clerk", password="pw", is_staff=True)
    clerk.user_permissions.add(Permission.objects.get(codename="view_outboxentry"))
    client.force_login(clerk)
    page = client.get(page_url + "?status=quarantined")
    text = page.content.decode()
    assert [e.pk for e in page.context["cl"].result_list] == [bad]
    assert "1 quarantined" in text and "54000" in text and ">quarantined<" in text
    assert "retry_quarantined" not in text and "discard_quarantined" not in text
    refused = client.post(page_url, {"action": "retry_quarantined", "_selected_action": [bad]})
    assert refused.status_code == 200  # "no action selected": nothing done
    assert OutboxEntry.objects.get(pk=bad).quarantined_at is not None

    clerk.user_permissions.add(Permission.objects.get(codename="change_outboxentry"))
    clerk = User.objects.get(pk=clerk.pk)  # permissions are cached per user object
    client.force_login(clerk)
    assert "retry_quarantined" in client.get(page_url).content.decode()
    assert "discard_quarantined" not in client.get(page_url).content.decode()
    done = client.post(page_url, {"action": "retry_quarantined", "_selected_action": [bad]})
    assert done.status_code == 302
    assert OutboxEntry.objects.get(pk=bad).quarantined_at is None

    publish_visible(driver, "r")  # refused again
    clerk.user_permissions.add(Permission.objects.get(codename="delete_outboxentry"))
    client.force_login(User.objects.get(pk=clerk.pk))
    done = client.post(page_url, {"action": "discard_quarantined", "_selected_action": [bad]})
    assert done.status_code == 302 and not OutboxEntry.objects.filter(pk=bad).exists()


def test_two_poisoned_rows_in_a_batch_are_found_and_the_rest_publish(harness):
    store = harness.driver.outbox("default")
    keys = [poison() if n in (3, 8) else f"k:{n}" for n in range(10)]
    ids = [store.stage(request(key, n)) for n, key in enumerate(keys)]
    assert publish_batch(store, harness.driver, store.claim(100, "r"), "r") == 8
    published = [j.idempotency_key for j in harness.driver.reads().list_jobs(limit=100)]
    assert sorted(published) == sorted(k for n, k in enumerate(keys) if n not in (3, 8))
    entries = inspect_outbox()["entries"]
    assert sorted(e["id"] for e in entries) == sorted([str(ids[3]), str(ids[8])])
    assert {e["error_code"] for e in entries} == {"54000"}


def test_a_refused_value_read_from_a_table_does_not_blame_the_lease_token():
    error = wrapped(OperationalError, psycopg.errors.ProgramLimitExceeded("index row size"))
    said = failures.translate(error, "default", "WITH picked ...", {"ids": [], "token": "commit-1"})
    assert "token" not in said.message and "read its values from a table" in said.message


def test_a_quarantined_rows_error_is_redacted_and_storable(harness):
    """The refusal's first line can quote the value that broke (a class 22 error does): it is
    stored and shown, so the row's secrets are masked and a NUL or lone surrogate in it cannot
    make the quarantine itself fail (issue 24 §3, issue 26 §3)."""
    store = harness.driver.outbox("default")
    payload = {"password": "hunter2-outbox"}
    row_id = store.stage(
        EnqueueRequest(
            name="tests.jobs.keyed",
            queue="default",
            input=payload,
            input_json=json.dumps(payload),
            idempotency_key="quarantine-text",
            max_attempts=3,
        )
    )
    [row] = store.claim(10, "r")
    refusal = DataError('invalid input syntax: "hunter2-outbox" \x00 \ud83d')
    publish._quarantine(store, row, "r", refusal)
    [entry] = inspect_outbox()["entries"]
    assert entry["id"] == str(row_id)
    assert "hunter2-outbox" not in entry["error"] and "[redacted]" in entry["error"]
    assert "\\x00" in entry["error"] and "\\ud83d" in entry["error"]
