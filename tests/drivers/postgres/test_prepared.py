"""Server-side prepared statements (issue 13 item 2): every named statement run through
``drivers/postgres/sql.py`` is parsed and planned once per session, unless ``PREPARED_STATEMENTS`` is off
or "auto" sees an alias behind a transaction-mode pooler."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from django_xjobs.drivers.postgres import PostgresDriver, sql
from tests import jobs


def prepared_on_this_session() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def enqueue_twice() -> None:
    driver = PostgresDriver("default")
    jobs.ok.using(outbox=False).enqueue(n=1)
    jobs.ok.using(outbox=False).enqueue(n=2)
    driver.reads().stats()


@pytest.mark.django_db(transaction=True)
def test_the_enqueue_and_every_named_statement_are_prepared_on_the_session():
    connection.close()  # a fresh session: nothing prepared yet
    enqueue_twice()
    statements = prepared_on_this_session()
    assert any("INSERT INTO x_jobs" in s for s in statements), statements
    assert any("FROM x_jobs" in s and "GROUP BY" in s for s in statements), statements
    # prepared once, then reused by name: a second enqueue adds no second copy
    assert sum("INSERT INTO x_jobs" in s for s in statements) == 1


@pytest.mark.django_db(transaction=True)
@override_settings(XJOBS={"PREPARED_STATEMENTS": False})
def test_with_the_setting_off_nothing_is_prepared():
    connection.close()
    enqueue_twice()
    assert not [s for s in prepared_on_this_session() if "x_jobs" in s]


@pytest.mark.django_db(transaction=True)
def test_auto_stays_off_behind_a_transaction_pooler():
    """Django's DISABLE_SERVER_SIDE_CURSORS says a transaction-mode pooler may hand the next
    statement to another server session, which never saw our prepared names."""
    connection.close()
    connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = True
    try:
        assert not sql.prepares(connection)
        enqueue_twice()
        assert not [s for s in prepared_on_this_session() if "x_jobs" in s]
        with override_settings(XJOBS={"PREPARED_STATEMENTS": True}):
            assert sql.prepares(connection)  # an explicit True wins (PgBouncer >= 1.21)
    finally:
        del connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"]


@pytest.mark.django_db(transaction=True)
def test_a_prepared_statement_joins_the_callers_transaction_and_is_still_counted():
    """The raw connection's cursor keeps atomic() (a rollback takes the job away) and Django's
    execute wrappers (so statement counts and query logs still see it)."""
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        jobs.ok.using(outbox=False).enqueue(n=7)
        transaction.set_rollback(True)
    assert any("INSERT INTO x_jobs" in q["sql"] for q in queries)
    assert PostgresDriver("default").reads().list_jobs() == []


@pytest.mark.django_db(transaction=True)
def test_a_missing_table_is_still_the_one_clear_error():
    from django_xjobs.errors import DriverUnavailableError

    with pytest.raises(DriverUnavailableError, match="x_nothing table does not exist"):
        sql.fetch("default", "SELECT 1 FROM x_nothing WHERE 1 = %(n)s", {"n": 1})


@pytest.mark.django_db(transaction=True)
def test_server_side_binding_types_every_kind_of_parameter():
    """Prepared, a parameter is typed once for the statement: None, an int where a float is
    wanted (make_interval(secs => ...)), lists as arrays, JSON text into jsonb[] with a NULL."""
    from django_xjobs.drivers.contract import Complete, RetryAt

    driver = PostgresDriver("default")
    connection.close()  # a fresh session: each statement is prepared by its first run here
    jobs.ok.using(outbox=False, delay=0).enqueue(n=1)  # run_at None, tenant None
    jobs.ok.using(outbox=False, delay=3).enqueue(n=2)  # an int delay
    jobs.ok.using(outbox=False).enqueue_many([{"n": 3}, {"n": 4}])
    held = driver.runs().claim(queues=["default"], limit=10, visibility_timeout=30, worker_id="w")
    assert sorted(job.input["n"] for job in held) == [1, 3, 4]
    first, second, third = held
    assert driver.runs().retry(RetryAt(first.id, first.lease_token, delay=2))  # an int into secs
    done = [
        Complete(second.id, second.lease_token),
        Complete(third.id, third.lease_token, '{"ok":1}'),
    ]
    assert driver.runs().complete(done) == {
        second.id,
        third.id,
    }  # a NULL and a JSON text in jsonb[]
    assert driver.reads().get_job(third.id).result == {"ok": 1}
    assert any("INSERT INTO x_jobs" in s for s in prepared_on_this_session())
