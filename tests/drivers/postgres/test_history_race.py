"""``after=`` racing the mover on PostgreSQL (issue 46, HIST-12): an enqueue with a dependency
locks that dependency's row, and waits while a mover's batch that is deleting it commits. When it
gets the lock the row is gone from x_jobs, and the history's copy was committed after the
statement's snapshot: the statement alone reads the dependency as unknown. The driver asks once
more, and the new statement reads it as ended. The memory driver enqueues and moves under its
one lock, so only the database has this race."""

from __future__ import annotations

import threading
from dataclasses import replace
from uuid import UUID

import pytest
from django.db import connection, connections, transaction

from django_xjobs.drivers import install, uninstall
from django_xjobs.drivers.postgres import PostgresDriver, sql
from django_xjobs.drivers.postgres.archive import _statement
from django_xjobs.ids import uuid7
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.drivers.contract import support
from tests.support.database import lock_waiters, no_history_days
from tests.support.process import wait_for


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("staged", [False, True])
def test_hist_12_a_dependency_moved_while_the_enqueue_waits_on_it_reads_as_ended(staged):
    """Direct (strict: unknown is refused) and as a publish would (unknown counts as failed):
    both see a done dependency, and the new job is ready."""
    driver = PostgresDriver("default")
    install(driver)
    try:
        dependency = jobs.ok.enqueue(n=1).id
        run_until_idle(driver=driver, queues=["default"])
        driver.jobs().age(120, only={"jobs"})
        driver.history().ensure_partitions(0)
        answers: list[object] = []

        def enqueue() -> None:
            try:
                # a staged id is what the relay's publish enqueues
                request = replace(
                    support.request(key="after"),
                    after=(dependency,),
                    id=uuid7() if staged else None,
                )
                answers.append(driver.jobs().enqueue(request).id)
            except Exception as error:
                answers.append(error)
            finally:
                connections["default"].close()

        with transaction.atomic():  # the mover's batch holds the row it deleted until it commits
            params = {"grace": 60, "batch": 1000}
            assert sql.count("default", _statement("move_finished"), params) == 1
            waiter = threading.Thread(target=enqueue)
            waiter.start()
            with connection.cursor() as cursor:
                wait_for(lambda: lock_waiters(cursor, "), ended AS (") == 1, timeout=10)
        waiter.join(timeout=10)
        [job_id] = answers
        assert isinstance(job_id, UUID), job_id
        row = driver.reads().get_job(job_id)
        assert (row.state, row.after_failed, row.waiting_on) == ("ready", None, 0)
        assert driver.reads().get_job(dependency).state == "done"
    finally:
        uninstall(driver)


@pytest.mark.django_db(transaction=True)
def test_hist_15_a_day_is_made_beside_a_reader_and_a_drop_gives_up_behind_one(monkeypatch):
    """A day's partition is attached (SHARE UPDATE EXCLUSIVE on its state's table), so it is
    made while a reader of that state's history holds its lock, and gets the history's indexes;
    a drop, which must take ACCESS EXCLUSIVE, waits at most ``DDL_WAIT_MS`` behind such a
    reader, then fails (the next pass tries again)."""
    from django.db import OperationalError

    from django_xjobs.drivers.postgres import archive

    monkeypatch.setattr(archive, "DDL_WAIT_MS", "300", raising=False)
    history = archive.PostgresArchive("default")
    no_history_days(PostgresDriver("default"))
    history.ensure(0)
    with connection.cursor() as cursor:  # a wait this session would otherwise have no end
        cursor.execute("SET lock_timeout = '3s'")
    reader = connection.get_new_connection(connection.get_connection_params())
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM x_job_history_done")  # held to its end
        made = [p for p in history.ensure(2) if p.state == "done"]
        assert len(made) == 2  # tomorrow and the day after, beside the reader
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_indexes WHERE tablename = %s", [made[0].name])
            assert cursor.fetchone()[0] == 4  # id, created, tenant, batch
        with pytest.raises(OperationalError, match="lock timeout"):
            history.drop({"done": -10 * 86400.0})  # every day is past: the first waits
    finally:
        reader.close()
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
        no_history_days(PostgresDriver("default"))  # committed: gone for the tests after
