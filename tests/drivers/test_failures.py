"""Database errors are recognised by SQLSTATE and constraint name, never by message text, so a
server that speaks another language (``lc_messages``) behaves the same.

The fakes are the driver's own exception classes carrying a translated message, as a German
server would send it; the real-server cases check the same path end to end.
"""

from __future__ import annotations

import psycopg.errors
import pytest
from django.db import IntegrityError, OperationalError, ProgrammingError

from django_xjobs.drivers import failures
from django_xjobs.drivers.postgres import sql
from django_xjobs.errors import DriverUnavailableError
from django_xjobs.worker import guard as guard_module
from django_xjobs.worker.worker import Worker


def wrapped(django_class, driver_error):
    """What Django raises: its own class, with the driver's error as the cause."""
    try:
        raise django_class(str(driver_error)) from driver_error
    except django_class as error:
        return error


GERMAN_MISSING = psycopg.errors.UndefinedTable("FEHLER:  Relation »x_jobs« existiert nicht")


def test_a_missing_table_in_another_language_is_still_a_missing_table():
    error = wrapped(ProgrammingError, GERMAN_MISSING)
    translated = failures.translate(error, "default", "SELECT id FROM x_jobs WHERE id = %(id)s")
    assert isinstance(translated, DriverUnavailableError)
    assert translated.message == "the x_jobs table does not exist in database 'default'"
    assert translated.hint == "run: python manage.py migrate django_xjobs --database default"


def test_a_statement_over_two_tables_names_both():
    error = wrapped(ProgrammingError, GERMAN_MISSING)
    translated = failures.translate(
        error, "default", "SELECT 1 FROM x_jobs JOIN x_job_steps ON true"
    )
    assert "a table of x_job_steps, x_jobs does not exist" in str(translated)


def test_another_programming_error_is_left_alone():
    error = wrapped(ProgrammingError, psycopg.errors.SyntaxError("Syntaxfehler bei »FROM«"))
    assert failures.translate(error, "default", "SELECT FROM x_jobs") is None


def test_a_missing_table_on_the_real_server(db):
    with pytest.raises(DriverUnavailableError) as caught:
        sql.fetch("default", "SELECT id FROM x_not_migrated", {})
    assert "the x_not_migrated table does not exist in database 'default'" in str(caught.value)


@pytest.mark.parametrize(
    ("driver_error", "transient"),
    [
        (psycopg.errors.SerializationFailure("Serialisierungsfehler"), True),
        (psycopg.errors.DeadlockDetected("Verklemmung entdeckt"), True),
        (psycopg.errors.AdminShutdown("Verbindung wird beendet"), True),
        (psycopg.errors.TooManyConnections("zu viele Verbindungen"), True),
        (psycopg.errors.ConnectionFailure("Verbindungsfehler"), True),
        (psycopg.errors.UniqueViolation("doppelter Schlüsselwert"), False),
        (psycopg.errors.CheckViolation("verletzt Check-Constraint"), False),
        (psycopg.errors.UndefinedTable("Relation existiert nicht"), False),
    ],
)
def test_transient_is_decided_by_sqlstate(driver_error, transient):
    django_class = (
        IntegrityError if isinstance(driver_error, psycopg.IntegrityError) else (OperationalError)
    )
    error = wrapped(django_class, driver_error)
    assert failures.is_transient(error) is transient
    assert (
        failures.is_transient(DriverUnavailableError("down")) is False
    )  # no cause: not a database
    outer = DriverUnavailableError("database 'default' is unavailable")
    outer.__cause__ = error
    assert failures.is_transient(outer) is transient  # seen through the library's own wrapper


def test_a_connection_that_never_answered_is_transient():
    refused = wrapped(OperationalError, psycopg.OperationalError("connection refused"))
    assert failures.sqlstate(refused) is None and failures.is_transient(refused)


def test_the_live_key_violation_is_found_by_constraint_name(db):
    from django.db import connection

    from tests import jobs

    first = jobs.ok.enqueue(n=1)
    with pytest.raises(IntegrityError) as caught, connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt,"
            " max_attempts, state, priority, run_at, created_at, updated_at)"
            " SELECT gen_random_uuid(), name, queue, input, idempotency_key, gen_random_uuid(),"
            " 0, 3, 'ready', 0, now(), now(), now() FROM x_jobs WHERE id = %s",
            [first.id],
        )
    assert failures.sqlstate(caught.value) == failures.UNIQUE_VIOLATION
    assert failures.constraint(caught.value) == "x_jobs_name_tenant_idempotency_live_idx"


def test_settling_retries_only_transient_failures_while_a_lease_may_hold(harness, monkeypatch):
    from django_xjobs.drivers.contract import RetryAt
    from django_xjobs.worker.run import Run
    from tests import jobs

    monkeypatch.setattr(guard_module, "_SETTLE_PAUSES", (0.0, 0.0))
    worker = Worker(queues=["default"], driver=harness.driver, burst=True)
    jobs.ok.enqueue(n=1)
    [job] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id=worker.worker_id
    )
    run = worker.runs.by_token[job.lease_token] = Run(job, worker.worker_id, 30)
    values = [RetryAt(job.id, job.lease_token)]
    calls = []

    def fails_with(driver_error, django_class, times=1000):
        def call():
            calls.append(driver_error)
            if len(calls) <= times:
                raise wrapped(django_class, driver_error)
            return True

        return call

    deadlock = psycopg.errors.DeadlockDetected("Verklemmung")
    assert worker._guard(fails_with(deadlock, OperationalError, 2), values, False) is True
    assert len(calls) == 3  # two retries after the first try, then it landed
    assert run.settled.is_set()  # marked the moment it landed
    calls.clear()
    broken = psycopg.errors.CheckViolation("verletzt")
    assert worker._guard(fails_with(broken, IntegrityError), values, "gave up") == "gave up"
    assert len(calls) == 1  # the same error would come back: not retried
    calls.clear()
    run.lost, run.lost_reason = True, "not-ours"  # the database said so: a retry cannot land
    assert worker._guard(fails_with(deadlock, OperationalError), values, "gave up") == "gave up"
    assert len(calls) == 1


def test_the_store_and_a_command_say_one_failure_in_the_same_words():
    """DriverUnavailableError is spelt once, in failures.py (issue 41): the store's translation
    and a command's report of the same failure read alike, and preflight builds its own from the
    same builders (its connect failure names where the database is as well)."""
    from django_xjobs.management.command import database_error

    lost = wrapped(OperationalError, psycopg.errors.AdminShutdown("terminating connection"))
    store, command = (
        failures.translate(lost, "default", "SELECT 1"),
        database_error(lost, "default"),
    )
    assert (store.message, store.hint) == (command.message, command.hint)
    assert (
        store.message == "database 'default' is unavailable, cannot connect: terminating connection"
    )
    assert store.hint == failures.UNREACHABLE_HINT
    located = failures.unreachable("default", "refused", at="db:5432/shop")
    assert (
        located.message
        == "database 'default' (db:5432/shop) is unavailable, cannot connect: refused"
    )

    deadlock = wrapped(OperationalError, psycopg.errors.DeadlockDetected("deadlock"))
    store, command = failures.translate(deadlock, "x", "SELECT 1"), database_error(deadlock, "x")
    assert (
        store.message
        == command.message
        == "database 'x' gave up on a statement (SQLSTATE 40P01): deadlock"
    )
    assert store.hint.endswith("; it is tried again") and command.hint.endswith(": run it again")

    missing = failures.table_missing("default", ["x_jobs"], at="db:5432/shop")
    assert missing.message == "the x_jobs table does not exist in database 'default' (db:5432/shop)"
    assert missing.hint == "run: python manage.py migrate django_xjobs --database default"
    column = wrapped(ProgrammingError, psycopg.errors.UndefinedColumn("column j.x does not exist"))
    behind = database_error(column, None)
    assert (
        behind.message
        == "the database is missing a column django_xjobs needs (column j.x does not exist)"
    )
    assert behind.hint == "run: python manage.py migrate"
