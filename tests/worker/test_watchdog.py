"""Issue 12, items 1 and 4, below the process tests: the local deadline, the settle deadline, the
watchdog and the connection bounds, each with a clock the test moves (no real waiting)."""

from __future__ import annotations

import logging
import queue
import threading

import pytest
from django.db import connections

from django_xjobs import conf
from django_xjobs.drivers.connections import bound_connections, mark_role_thread, role_connections
from django_xjobs.errors import ConfigInvalidError, LeaseLostError
from django_xjobs.worker.watchdog import EXIT_STUCK, Watchdog
from tests.worker.test_heartbeat import VIS, Clock, ScriptedDriver, heartbeat, make_run

MARGIN = VIS / 10


@pytest.fixture
def clock():
    return Clock()


def test_lease_15_a_run_is_stopped_at_its_local_deadline_not_at_the_next_tick(clock, caplog):
    run = make_run(clock)
    beat = heartbeat(ScriptedDriver(), run, clock)
    clock.now += VIS - MARGIN - 0.5
    assert beat.expire_due() == pytest.approx(0.25)  # nothing due yet: look again soon
    clock.now += 0.4
    assert beat.expire_due() == pytest.approx(0.1)  # the timer sleeps exactly to the deadline
    assert not run.signal.is_set()
    clock.now += 0.1
    with caplog.at_level(logging.ERROR, logger="django_xjobs"):
        beat.expire_due()
    assert run.lost and run.signal.is_set()
    assert "xjobs.lease.lost" in caplog.text and "reason=deadline" in caplog.text


def test_lease_15_the_deadline_runs_from_when_the_renewal_was_sent(clock):
    def slow_renewal():
        clock.now += 2  # the renewal took 2 s to land
        return True

    run = make_run(clock)
    beat = heartbeat(ScriptedDriver(slow_renewal), run, clock)
    clock.now += 10
    sent = clock.now
    beat.beat()
    assert run.renewed_at == sent
    assert run.deadline(MARGIN) == sent + VIS - MARGIN


def test_lease_15_a_settled_run_has_no_deadline(clock):
    run = make_run(clock)
    run.settled.set()
    clock.now += VIS
    heartbeat(ScriptedDriver(), run, clock).expire_due()
    assert not run.lost and not run.signal.is_set()


def test_hang_03_a_returned_body_is_renewed_only_within_the_settle_deadline(clock, caplog):
    driver = ScriptedDriver()
    run = make_run(clock)
    beat = heartbeat(driver, run, clock)
    run.returned_at = clock.now  # the body returned; its settle has not landed
    clock.now += VIS - 1
    beat.beat()
    assert driver.calls == 1  # still within the settle deadline: renewed
    clock.now += 2
    with caplog.at_level(logging.ERROR, logger="django_xjobs"):
        beat.beat()
        beat.beat()
    assert driver.calls == 1  # past it: the lease is left to lapse
    assert caplog.text.count("xjobs.worker.settle_overdue") == 1


def test_hang_04_the_watchdog_ends_the_process_when_a_section_stays_blocked(clock, caplog):
    codes: list[int] = []
    watchdog = Watchdog(5, worker_id="w1", exit=codes.append, monotonic=clock)
    with watchdog.section("settle"):
        clock.now += 4.9
        assert watchdog.check() is False
        clock.now += 0.2
        with caplog.at_level(logging.CRITICAL, logger="django_xjobs"):
            assert watchdog.check() is True
    assert codes == [EXIT_STUCK]
    assert "xjobs.worker.stuck" in caplog.text and "section=settle" in caplog.text
    assert "test_watchdog.py" in caplog.text  # where the stuck thread was
    clock.now += 100
    assert watchdog.check() is False  # the section ended: nothing is open


def test_hang_04_a_section_that_ends_in_time_never_trips(clock):
    codes: list[int] = []
    watchdog = Watchdog(5, worker_id="w1", exit=codes.append, monotonic=clock)
    for _ in range(10):
        with watchdog.section("claim"):
            clock.now += 4
    assert watchdog.check() is False and codes == []


def statement_timeout(wrapper) -> str:
    with wrapper.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        return cursor.fetchone()[0]


def test_hang_01_a_role_bounds_its_statements_and_hands_the_connection_back(db):
    connection = connections["default"]
    before = statement_timeout(connection)
    with role_connections():
        assert statement_timeout(connection) == "30s"
    assert statement_timeout(connection) == before


def test_hang_01_a_role_thread_bounds_the_connections_it_opens(transactional_db):
    seen: list[str] = []

    def role() -> None:
        mark_role_thread()
        try:
            seen.append(statement_timeout(connections["default"]))
        finally:
            connections["default"].close()

    def body() -> None:  # a job body's thread: unbounded
        try:
            seen.append(statement_timeout(connections["default"]))
        finally:
            connections["default"].close()

    for target in (role, body):
        thread = threading.Thread(target=target)
        thread.start()
        thread.join(30)
    assert seen == ["30s", "0"]


def test_hang_01_a_role_starts_on_a_connection_the_database_dropped(transactional_db):
    """A worker writes its presence on its loop's thread, then marks the thread a role thread,
    which bounds the connections already open. The database going away in between (a CI run
    cut it there) ended the worker before its loop: now the dropped connection is closed, and
    the thread's next statement opens a new one, bounded."""
    opened: queue.SimpleQueue[int] = queue.SimpleQueue()
    dropped = threading.Event()
    seen: list[object] = []

    def role() -> None:
        connection = connections["default"]
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                opened.put(cursor.fetchone()[0])
            assert dropped.wait(30)
            mark_role_thread()  # raised OperationalError before the fix
            seen.append(connection.connection is None)  # the dropped one was closed
            seen.append(statement_timeout(connection))  # and the next one is bounded
        except Exception as error:
            seen.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=role)
    thread.start()
    with connections["default"].cursor() as cursor:  # this thread's own session ends it
        cursor.execute("SELECT pg_terminate_backend(%s)", [opened.get(timeout=30)])
    dropped.set()
    thread.join(30)
    assert seen == [True, "30s"]


def test_hang_01_connection_options_go_under_the_project_s_own(transactional_db):
    settings_dict = connections.settings["default"]
    saved = settings_dict.get("OPTIONS", {})
    settings_dict["OPTIONS"] = {**saved, "keepalives_idle": 7}
    found: dict[str, str] = {}

    def connect() -> None:
        try:
            connections["default"].ensure_connection()
            found.update(connections["default"].connection.info.get_parameters())
        finally:
            connections["default"].close()

    try:
        bound_connections(["default"])
        thread = threading.Thread(target=connect)
        thread.start()
        thread.join(30)
    finally:
        settings_dict["OPTIONS"] = saved
    assert found["keepalives_idle"] == "7"  # the project's value wins
    assert found["tcp_user_timeout"] == "30000" and found["connect_timeout"] == "10"


@pytest.mark.parametrize("bad", [["keepalives"], {1: 2}, "keepalives=1"])
def test_hang_01_connection_options_must_be_a_dict_of_names(bad):
    with pytest.raises(ConfigInvalidError) as caught:
        conf.validate({"CONNECTION_OPTIONS": bad})
    assert "CONNECTION_OPTIONS" in caught.value.message and caught.value.hint


def test_lease_15_a_resumed_run_reads_its_deadline_itself_before_any_timer_fires(clock, caplog):
    """A frozen process (SIGSTOP, a paused VM) resumes with every thread at once: the handler
    must not see an unset signal for a moment until the deadline timer gets its turn. The
    signal reads the run's local deadline whenever it is read."""
    run = make_run(clock)
    assert not run.signal.is_set()
    clock.now += VIS  # frozen past the deadline; no heartbeat or timer ran meanwhile
    with caplog.at_level(logging.ERROR, logger="django_xjobs"):
        assert run.signal.wait(0) is True  # a timed-out wait() right after the resume
    assert run.lost and isinstance(run.signal.reason, LeaseLostError)
    with pytest.raises(LeaseLostError):
        run.signal.raise_if_set()
    [lost] = [r for r in caplog.records if getattr(r, "event", "") == "xjobs.lease.lost"]
    assert lost.fields["reason"] == "deadline"


def test_lease_15_a_renewal_moves_the_deadline_the_signal_reads(clock):
    run = make_run(clock)
    clock.now += VIS * 0.8
    run.renewed_at = clock()  # a renewal sent now landed
    clock.now += VIS * 0.8  # past the first deadline, inside the renewed one
    assert not run.signal.is_set() and not run.lost
