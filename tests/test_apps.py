"""The app around the core: settings checks, schema drift, the admin, wake-ups, the driver
switch."""

from __future__ import annotations

import threading
import uuid
from io import StringIO

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import override_settings

from django_xjobs import conf
from django_xjobs.drivers import get_driver
from django_xjobs.drivers.contract import DriverFeatures
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.drivers.postgres import PostgresDriver
from django_xjobs.drivers.postgres.outbox import PostgresOutboxStore
from django_xjobs.drivers.postgres.scheduler import PostgresSchedulerStore
from django_xjobs.errors import ConfigInvalidError
from django_xjobs.management import checks
from tests import jobs

BASE = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "off"}


def test_migrations_match_the_models(db):
    """Schema drift fails a test (STYLE): models and migrations agree."""
    out = StringIO()
    call_command("makemigrations", "django_xjobs", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


@pytest.mark.parametrize(
    ("xjobs", "needle"),
    [
        ({"VISIBILITY_TIMOUT": 30}, "unknown key(s) VISIBILITY_TIMOUT"),
        ({"DRIVER": "redis"}, "not a driver"),
        ({"DATABASE": "nope"}, "not an alias"),
        ({"CONCURRENCY": 0}, "positive integer"),
        ({"MAX_PAYLOAD_BYTES": 1.5}, "positive integer"),
        ({"VISIBILITY_TIMEOUT": 0}, "positive, finite"),
        ({"POLL_INTERVAL": "soon"}, "not a duration"),
        ({"QUEUES": "emails"}, "list of names"),
        ({"QUEUES": ["bad name"]}, "not valid"),
        ({"OUTBOX": "sometimes"}, "not a mode"),
        ({"OUTBOX_DATABASES": ["nope"]}, "aliases of DATABASES"),
        ({"OUTBOX_CLAIM_LEASE": 0.5}, "shorter than a second"),
        ({"MAX_LEASE_EXPIRIES": 0}, "positive integer"),
        ({"LIMITS": {"global": 0}}, "LIMITS"),
    ],
)
def test_a_bad_xjobs_setting_fails_the_system_check(xjobs, needle):
    with override_settings(XJOBS=xjobs):
        [error] = checks.check_settings()
        assert error.id == "django_xjobs.E001"
        assert needle in error.msg
        assert error.hint
        with pytest.raises(ConfigInvalidError):
            conf.get()


def test_the_default_settings_pass_the_check():
    assert checks.check_settings() == []
    assert conf.get().visibility_timeout == 30
    assert conf.get().queues == ("other",)


def test_the_driver_follows_the_setting():
    assert isinstance(get_driver(), PostgresDriver)
    with override_settings(XJOBS={**BASE, "DRIVER": "memory"}):
        assert isinstance(get_driver(), MemoryDriver)


def test_the_admin_lists_jobs(client, db):
    jobs.ok.enqueue(n=1)
    jobs.terminal.enqueue(n=1)
    admin = User.objects.create_superuser("admin", "admin@example.com", "pw")
    client.force_login(admin)
    page = client.get("/admin/django_xjobs/job/?state__exact=ready")
    assert page.status_code == 200
    assert b"tests.jobs.terminal" in page.content
    assert b"0 of 5" in page.content


def test_a_ready_job_wakes_a_listening_worker(transactional_db):
    driver = PostgresDriver("default")
    woke = threading.Event()
    listener = driver.runs().notify_on_ready(["default"], woke.set)
    try:
        assert woke.wait(10)  # the listener pings once it is listening
        woke.clear()
        jobs.on_other_queue.enqueue(n=1)  # not a queue it watches
        jobs.ok.using(delay="1h").enqueue(n=1)  # not ready yet
        jobs.ok.enqueue(n=2)
        assert woke.wait(10)
    finally:
        listener.stop()


def ids(found):
    return sorted(message.id for message in found)


def test_a_heartbeat_too_slow_for_the_visibility_timeout_is_an_error():
    with override_settings(XJOBS={**BASE, "VISIBILITY_TIMEOUT": 10, "HEARTBEAT_INTERVAL": 5}):
        [error] = checks.check_settings()
    assert error.id == "django_xjobs.E001" and "three heartbeats" in error.msg and error.hint
    with override_settings(XJOBS={**BASE, "VISIBILITY_TIMEOUT": 30, "HEARTBEAT_INTERVAL": 5}):
        assert checks.check_settings() == []
        assert conf.get().heartbeat_interval == 5


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_a_non_postgres_database_is_an_error_and_the_memory_driver_a_warning():
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    with override_settings(DATABASES={**settings.DATABASES, "lite": sqlite}):
        with override_settings(XJOBS={**BASE, "DATABASE": "lite"}):
            assert ids(checks.check_settings()) == ["django_xjobs.E002"]
        with override_settings(
            XJOBS={**BASE, "OUTBOX": "auto", "OUTBOX_DATABASES": ["default", "lite"]}
        ):
            assert ids(checks.check_settings()) == ["django_xjobs.E003"]
    with override_settings(XJOBS={**BASE, "DRIVER": "memory"}):
        [warning] = checks.check_settings()
    assert warning.id == "django_xjobs.W001" and warning.hint


def test_registry_sanity_checks(monkeypatch):
    from django_xjobs import job
    from django_xjobs.declarations import registry

    @job(idempotency_key="x", name="test_app.slow_steps", timeout="10s", step_timeout="30s")
    def slow_steps(ctx):
        return None

    try:
        assert "django_xjobs.W002" in ids(checks.check_settings())

        class NoLeases:
            name = "custom"
            features = DriverFeatures(supports_fleet_slots=False)

        monkeypatch.setattr("django_xjobs.drivers.get_driver", lambda: NoLeases())
        found = {m.id: m for m in checks.check_settings()}
        assert "tests.jobs.exclusive" in found["django_xjobs.E004"].msg
    finally:
        registry.unregister("test_app.slow_steps")


STORES = {
    "x_jobs": lambda: PostgresDriver("default").reads().stats(),
    "x_job_steps": lambda: PostgresDriver("default").steps().list(uuid.uuid4()),
    "x_job_leases": lambda: PostgresDriver("default").limits().held_slots("job:x"),
    "x_outbox": lambda: PostgresOutboxStore("default").pending(),
    "x_scheduler_state": lambda: PostgresSchedulerStore("default").watermark("t"),
}


@pytest.mark.parametrize(("table", "call"), list(STORES.items()))
def test_every_store_names_a_missing_table_and_migrate(db, table, call):
    """One mechanism (drivers/postgres/sql.py) for every store: a missing table is X_DRIVER_UNAVAILABLE
    naming the table and ``migrate``, never a raw database error."""
    from django.db import connection

    from django_xjobs.errors import DriverUnavailableError

    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_away")  # undone with the test
    with pytest.raises(DriverUnavailableError) as caught:
        call()
    assert table in caught.value.message and "migrate" in caught.value.hint
