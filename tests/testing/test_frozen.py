"""Time in tests follows freezegun (issue 33): under ``freeze_time`` a delay, a retry's backoff,
a step's sleep and a cron occurrence come due exactly when the frozen clock says, through
``django_xjobs.testing``, on both drivers. On PostgreSQL that is the database's ``now()``
following the frozen clock (DESIGN: time two processes compare comes from the database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from freezegun import freeze_time

from django_xjobs import Retry, cron, job
from django_xjobs.testing import memory_driver, run_crons, run_until_idle
from django_xjobs.testing.frozen import frozen_now
from tests import jobs

FROZEN = "2026-03-01 09:00:00"


@job(idempotency_key="freeze-flaky:{n}", retry=Retry(attempts=3, delay="10m", jitter=False))
def flaky_for_ten_minutes(ctx, n: int = 0):
    if ctx.attempt == 1:
        raise ConnectionError("the first attempt fails")
    return {"attempt": ctx.attempt}


@cron("0 10 * * *", tz="UTC", name="tests.freeze_ten_am")
def ten_am(occurrence):
    return [(jobs.ok, {"n": int(occurrence.timestamp())})]


def test_frozen_now_is_the_freeze_in_utc():
    assert frozen_now() is None
    with freeze_time(FROZEN) as freezer:
        assert frozen_now() == datetime(2026, 3, 1, 9, tzinfo=UTC)
        freezer.tick(timedelta(minutes=5))
        assert frozen_now() == datetime(2026, 3, 1, 9, 5, tzinfo=UTC)
    assert frozen_now() is None


def test_the_database_clock_is_the_frozen_clock_inside_a_test(db):
    run_until_idle()  # the helpers (imported above) keep the connection in step
    with freeze_time(FROZEN) as freezer, connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        assert cursor.fetchone()[0] == datetime(2026, 3, 1, 9, tzinfo=UTC)
        freezer.tick(timedelta(hours=2))
        cursor.execute("SELECT now()")
        assert cursor.fetchone()[0] == datetime(2026, 3, 1, 11, tzinfo=UTC)
    with connection.cursor() as cursor:  # the freeze ended: the server's clock again
        cursor.execute("SELECT now() = statement_timestamp() - (statement_timestamp() - now())")
        cursor.execute("SELECT now()")
        assert cursor.fetchone()[0] != datetime(2026, 3, 1, 11, tzinfo=UTC)


def test_a_delay_comes_due_when_the_frozen_clock_reaches_it(harness):
    with freeze_time(FROZEN) as freezer:
        job_id = jobs.ok.using(delay="10m").enqueue(n=1).id
        assert run_until_idle() == []
        freezer.tick(timedelta(minutes=9, seconds=59))
        assert run_until_idle() == []
        freezer.tick(timedelta(seconds=1))
        [execution] = run_until_idle()
    assert execution.outcome == "completed"
    assert harness.row(job_id).state == "done"


def test_a_retry_backoff_comes_due_when_the_frozen_clock_reaches_it(harness):
    with freeze_time(FROZEN) as freezer:
        job_id = flaky_for_ten_minutes.enqueue(n=1).id
        [first] = run_until_idle()
        assert first.outcome == "retried"
        row = harness.row(job_id)
        assert row.state == "ready"  # as a retry settles it: ready, due later
        assert row.run_at == datetime(2026, 3, 1, 9, 10, tzinfo=UTC)  # stamped on the frozen clock
        freezer.tick(timedelta(minutes=9))
        assert run_until_idle() == []
        freezer.tick(timedelta(minutes=1))
        [second] = run_until_idle()
    assert second.outcome == "completed"
    assert harness.row(job_id).attempt == 2


def test_a_step_sleep_comes_due_when_the_frozen_clock_reaches_it(harness):
    with freeze_time(FROZEN) as freezer:
        job_id = jobs.sleeper.enqueue(n=1).id
        [first] = run_until_idle()
        assert first.outcome == "suspended"
        freezer.tick(timedelta(days=3) - timedelta(seconds=1))
        assert run_until_idle() == []
        freezer.tick(timedelta(seconds=1))
        [woken] = run_until_idle()
    assert woken.outcome == "completed"
    assert harness.row(job_id).result == {"slept": True}


def test_a_cron_occurrence_comes_due_when_the_frozen_clock_reaches_it(harness):
    with freeze_time("2026-03-01 09:59:00") as freezer:
        assert run_crons(["tests.freeze_ten_am"]) == []  # arms the schedule (SCHED-01)
        freezer.tick(timedelta(seconds=59))
        assert run_crons(["tests.freeze_ten_am"]) == []
        freezer.tick(timedelta(seconds=1))
        [dispatch] = run_crons(["tests.freeze_ten_am"])
        [execution] = run_until_idle()
    assert dispatch.occurrence == datetime(2026, 3, 1, 10, tzinfo=UTC)
    assert execution.outcome == "completed"


@pytest.mark.parametrize("moved", [timedelta(minutes=10), timedelta(days=400)])
def test_moving_the_frozen_clock_with_move_to_counts_too(harness, moved):
    with freeze_time(FROZEN) as freezer:
        job_id = jobs.ok.using(delay="10m").enqueue(n=2).id
        freezer.move_to(datetime(2026, 3, 1, 9, tzinfo=UTC) + moved)
        [execution] = run_until_idle()
    assert execution.job.id == job_id


def test_in_autocommit_the_session_follows_and_gets_the_server_clock_back(transactional_db):
    run_until_idle()
    with freeze_time(FROZEN) as freezer, connection.cursor() as cursor:
        assert not connection.in_atomic_block
        cursor.execute("SELECT now()")  # its own transaction: the setting must be the session's
        assert cursor.fetchone()[0] == datetime(2026, 3, 1, 9, tzinfo=UTC)
        freezer.tick(timedelta(days=1))
        cursor.execute("SELECT now()")
        assert cursor.fetchone()[0] == datetime(2026, 3, 2, 9, tzinfo=UTC)
    with connection.cursor() as cursor:
        cursor.execute("SELECT now(), pg_catalog.now()")
        ours, servers = cursor.fetchone()
    assert ours == servers


def test_a_memory_driver_test_without_database_access_can_freeze_time():
    """No ``db`` fixture: the helpers must not open a connection to follow the freeze."""
    with memory_driver() as driver, freeze_time(FROZEN) as freezer:
        job_id = jobs.ok.using(delay="1h").enqueue(n=5).id
        assert run_until_idle() == []
        freezer.tick(timedelta(hours=1))
        [execution] = run_until_idle()
        assert execution.outcome == "completed" and driver.reads().get_job(job_id).state == "done"


def test_nothing_frozen_leaves_the_library_on_its_fast_path(db, monkeypatch):
    """The follower is installed on the jobs connection as soon as the helpers are imported;
    while nothing is frozen it says it is idle, so the library's statements run on the
    production cursor (DirectCursor), not Django's wrapper chain, and a freeze still reaches
    them."""
    from django_xjobs.drivers.postgres import frozen, sql

    run_until_idle()  # the helpers install the follower on this connection
    assert frozen._wrapper in connection.execute_wrappers
    chosen: list[type] = []
    choose = sql._cursor

    def recording(on):
        cursor = choose(on)
        chosen.append(type(cursor))
        return cursor

    monkeypatch.setattr(sql, "_cursor", recording)

    def now() -> datetime:
        with sql.execute(connection.alias, "SELECT now()", {}) as cursor:
            return cursor.fetchall()[0][0]

    server = now()
    assert chosen == [sql.DirectCursor]
    with freeze_time(FROZEN):
        assert now() == datetime(2026, 3, 1, 9, tzinfo=UTC)
    assert now() >= server  # the first statement after the freeze gives the server's clock back
    assert now() >= server
    assert chosen == [sql.DirectCursor, sql.CursorWrapper, sql.CursorWrapper, sql.DirectCursor]
