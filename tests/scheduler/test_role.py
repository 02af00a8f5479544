"""Crons and the scheduler: SPEC §10 (TASK-01..05, SCHED-01..17), sharp edges SE-37..44 and
SE-61, DESIGN §7 Q-06 (validation at declaration) and Q-07 (dispatch in one transaction).

Every scheduler case runs on both stores (the ``bench`` fixture): the memory driver with
``MemorySchedulerStore``, and the PostgreSQL driver with ``PostgresSchedulerStore`` inside the
test transaction. The scheduler's time is a ``FrozenClock``; nothing waits on the wall clock.
On PostgreSQL the leader lease reads the database's ``now()``, which is constant inside the test
transaction, so a test that needs an expired (or shortened) lease rewrites ``expires_at``.
Each Scheduler is restricted to the crons its test is about (``cron_names=``).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, connections

from django_xjobs import Retry, cron, job
from django_xjobs.clock import FrozenClock
from django_xjobs.declarations.cron import (
    ONE_MICROSECOND,
    CronHandle,
    occurrences_between,
    registered_crons,
    unregister,
)
from django_xjobs.drivers import install, uninstall
from django_xjobs.drivers.contract import LEADER_KEY, NotLeaderError
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.drivers.memory.scheduler import MemorySchedulerStore
from django_xjobs.drivers.postgres import PostgresDriver
from django_xjobs.drivers.postgres.scheduler import PostgresSchedulerStore
from django_xjobs.errors import JobDefinitionError
from django_xjobs.operations import inspect_manifest
from django_xjobs.scheduler import role
from django_xjobs.scheduler.role import Dispatch, Scheduler
from tests import crons as fixtures
from tests import jobs
from tests.support.process import wait_for

START = datetime(2026, 7, 26, tzinfo=UTC)  # the scheduler's first round, unless a test says so
OK = ("tests.jobs.ok",)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def epoch_ms(when: datetime) -> int:
    return int(when.timestamp()) * 1000


def cron_named(name: str) -> CronHandle:
    return {t.name: t for t in registered_crons()}[name]


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == name]


# --- module-level fixtures (unique names; each Scheduler only sees the crons it is given) ------


@job(name="test_scheduler.digest", idempotency_key="digest:{day}")
def digest(ctx, day: str):
    return day


@job(
    name="test_scheduler.tenanted",
    idempotency_key="tenanted:{day}",
    queue="other",
    retry=Retry(attempts=7),
    tenant=lambda **inputs: "acme",
)
def tenanted(ctx, day: str):
    return day


@cron("0 3 * * *", tz="UTC", name="test_scheduler.tenanted_daily")
def tenanted_daily(occurrence):
    return [(tenanted, {"day": occurrence.date().isoformat()})]


@cron("0 3 * * *", tz="UTC", name="test_scheduler.per_day", catch_up="run-all")
def per_day(occurrence):
    """SPEC SCHED-07 / SE-44: the payload is the occurrence's own day."""
    return [(digest, {"day": occurrence.date().isoformat()})]


@cron("0 3 * * *", tz="UTC", name="test_scheduler.fixed")
def fixed(occurrence):
    """The same two entries for every occurrence (TASK-04 plain keys)."""
    return [(jobs.ok, {"n": 7}), (jobs.on_other_queue, {"n": 8})]


@cron("0 3 * * *", tz="UTC", name="test_scheduler.capped", catch_up="run-all", max_catch_up=3)
def capped(occurrence):
    return []


BAD: dict[str, Any] = {"entries": []}


@cron("0 3 * * *", tz="UTC", name="test_scheduler.bad")
def bad(occurrence):
    return BAD["entries"]


class Gate:
    """Holds a task's function (inside a round) until the test opens it."""

    def __init__(self) -> None:
        self.active = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def pass_through(self) -> None:
        if self.active:
            self.entered.set()
            assert self.release.wait(10), "the test never opened the gate"


GATE = Gate()


@cron("0 * * * *", tz="UTC", name="test_scheduler.gate_a", catch_up="run-all")
def gate_a(occurrence):
    GATE.pass_through()
    return [(jobs.ok, {"n": int(occurrence.timestamp())})]


@cron("0 * * * *", tz="UTC", name="test_scheduler.gate_b", catch_up="run-all")
def gate_b(occurrence):
    return [(jobs.ok, {"n": int(occurrence.timestamp()) + 1})]


ONCE: list[Any] = []  # callables the next call of ``usurped`` runs, then forgets


@cron("0 * * * *", tz="UTC", name="test_scheduler.usurped")
def usurped(occurrence):
    while ONCE:
        ONCE.pop(0)()
    return [(jobs.ok, {"n": int(occurrence.timestamp())})]


@cron("30 1 * * *", tz="America/New_York", name="test_scheduler.ny_0130")
def ny_0130(occurrence):
    return []


@cron("30 2 * * *", tz="America/New_York", name="test_scheduler.ny_0230")
def ny_0230(occurrence):
    return []


@cron("30 2 * * *", tz="Australia/Sydney", name="test_scheduler.sydney_0230")
def sydney_0230(occurrence):
    return []


@cron("0 3 * * *", tz="America/New_York", name="test_scheduler.ny_3am")
def ny_3am(occurrence):
    return []


@cron("0 3 * * *", tz="UTC", name="test_scheduler.Zed")
def zed(occurrence):
    return []


@cron("0 3 * * *", tz="UTC", name="test_scheduler.abc")
def abc(occurrence):
    return []


@pytest.fixture(autouse=True)
def _reset_module_state() -> Iterator[None]:
    BAD["entries"] = []
    ONCE.clear()
    GATE.__init__()
    yield
    GATE.release.set()  # never leave a round blocked behind a failed test
    ONCE.clear()


# --- the two stores -----------------------------------------------------------------------------


class Bench:
    """A driver, a scheduler store and the FrozenClock they share, on one backend."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.clock = FrozenClock(START)
        if kind == "memory":
            self.driver: Any = MemoryDriver(self.clock)
            self.store: Any = MemorySchedulerStore(self.clock)
        else:
            self.driver = PostgresDriver("default")
            self.store = PostgresSchedulerStore("default")

    def scheduler(
        self, *names: str, holder: str | None = None, store: Any = None, **options: Any
    ) -> Scheduler:
        return Scheduler(
            driver=self.driver,
            store=store or self.store,
            cron_names=list(names),
            clock=self.clock,
            holder=holder,
            **options,
        )

    def same_store(self) -> Any:
        """Another handle on the same durable state (on PostgreSQL: a fresh store object, as a
        restarted process would build)."""
        return self.store if self.kind == "memory" else PostgresSchedulerStore("default")

    def at(self, when: datetime) -> None:
        seconds = (when - self.clock.now()).total_seconds()
        assert seconds >= 0, "the clock only moves forward"
        self.clock.advance(seconds)

    def rows(self, name: str | None = None) -> list[Any]:
        found = self.driver.reads().list_jobs(name=name, limit=10_000)
        return sorted(found, key=lambda r: (r.run_at, r.idempotency_key))

    def lease(self) -> tuple[str, float] | None:
        """(holder, seconds left) of the scheduler lease, or None when nobody holds it."""
        if self.kind == "memory":
            held = self.store._leaders.get(LEADER_KEY)
            if held is None:
                return None
            return held[0], (held[1] - self.clock.now()).total_seconds()
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT holder, EXTRACT(EPOCH FROM expires_at - now()) FROM x_scheduler_leader"
                " WHERE lock_key = %s",
                [LEADER_KEY],
            )
            row = cursor.fetchone()
        return None if row is None else (row[0], float(row[1]))

    def set_lease_left(self, seconds: float) -> None:
        """Make the current lease end ``seconds`` from now (0: expired) on the store's clock."""
        if self.kind == "memory":
            holder = self.store._leaders[LEADER_KEY][0]
            ends = self.clock.now() + timedelta(seconds=seconds)
            self.store._leaders[LEADER_KEY] = (holder, ends)
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE x_scheduler_leader SET expires_at = now() + make_interval(secs => %s)"
                " WHERE lock_key = %s",
                [seconds, LEADER_KEY],
            )
            assert cursor.rowcount == 1


def _bench(kind: str) -> Iterator[Bench]:
    bench = Bench(kind)
    install(bench.driver)  # CronHandle.enqueue goes through the installed driver
    try:
        yield bench
    finally:
        uninstall(bench.driver)


@pytest.fixture(params=["memory", "postgres"])
def bench(request, db) -> Iterator[Bench]:
    """Each scheduler case on the memory store and on the PostgreSQL store."""
    yield from _bench(request.param)


@pytest.fixture
def pg(db) -> Iterator[Bench]:
    """The database store only (DESIGN Q-07 is a promise of the database driver)."""
    yield from _bench("postgres")


class Runner(threading.Thread):
    """Runs ``fn`` on a thread that uses the test's own connection, so PostgreSQL work done
    there joins the test transaction; keeps the result or the error."""

    def __init__(self, fn: Any) -> None:
        super().__init__(daemon=True)
        self.fn, self.result, self.error = fn, None, None
        self.conn = connections["default"]
        self.start()

    def run(self) -> None:
        connections["default"] = self.conn
        try:
            self.result = self.fn()
        except BaseException as error:
            self.error = error


@contextmanager
def shared_connection() -> Iterator[None]:
    conn = connections["default"]
    conn.inc_thread_sharing()
    try:
        yield
    finally:
        conn.dec_thread_sharing()


def watch_joins(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, list[Future]]:
    """Every round's future from now on, and an event set when anyone waits for a round in
    flight (a joining tick, or stop())."""
    waiting = threading.Event()
    created: list[Future] = []

    class Watched(Future):
        def __init__(self) -> None:
            super().__init__()
            created.append(self)

        def result(self, timeout=None):
            waiting.set()
            return super().result(timeout)

    monkeypatch.setattr(role, "Future", Watched)
    return waiting, created


# --- TASK-01/02, DESIGN Q-06: declaration-time validation ---------------------------------------


def declare(schedule: Any, **options: Any) -> CronHandle:
    def fn(occurrence):
        return []

    return cron(schedule, **options)(fn)


def test_task_01_tz_is_a_required_argument():
    with pytest.raises(TypeError):
        cron("0 3 * * *")


@pytest.mark.parametrize("tz", ["", "Bogota", "+02:00", "Mars/Olympus", None, 2])
def test_task_01_se_42_tz_must_be_an_iana_zone(tz):
    with pytest.raises(JobDefinitionError) as caught:
        declare("0 3 * * *", tz=tz, name="test_scheduler.bad_tz")
    assert caught.value.code == "X_INVARIANT"
    assert caught.value.hint and "zone" in caught.value.hint
    assert "test_scheduler.bad_tz" not in {t.name for t in registered_crons()}


def test_task_02_defaults_are_skip_and_ten():
    assert fixtures.berlin_2am.catch_up == "skip"
    assert fixtures.berlin_2am.max_catch_up == 10


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "3", None])
def test_task_02_se_61_max_catch_up_must_be_an_integer_of_at_least_one(value):
    with pytest.raises(JobDefinitionError) as caught:
        declare("0 3 * * *", tz="UTC", name="test_scheduler.bad_max", max_catch_up=value)
    assert caught.value.code == "X_INVARIANT"
    assert caught.value.hint
    assert "test_scheduler.bad_max" not in {t.name for t in registered_crons()}


def test_task_02_max_catch_up_of_one_is_accepted():
    try:
        handle = declare("0 3 * * *", tz="UTC", name="test_scheduler.max1", max_catch_up=1)
        assert handle.max_catch_up == 1
    finally:
        unregister("test_scheduler.max1")


@pytest.mark.parametrize("policy", ["run-twice", "RUN-ALL", "", None])
def test_task_02_an_unknown_catch_up_policy_is_refused(policy):
    with pytest.raises(JobDefinitionError) as caught:
        declare("0 3 * * *", tz="UTC", name="test_scheduler.bad_policy", catch_up=policy)
    assert caught.value.code == "X_INVARIANT"
    assert "run-all" in caught.value.hint


@pytest.mark.parametrize(
    "cron", ["61 * * * *", "* * *", "*/0 * * * *", "* * * * * * *", "", None, "0 25 * * *"]
)
def test_q_06_a_malformed_cron_is_refused_at_declaration(cron):
    with pytest.raises(JobDefinitionError) as caught:
        declare(cron, tz="UTC", name="test_scheduler.bad_cron")
    assert caught.value.code == "X_CRON_INVALID"
    assert caught.value.hint
    assert "test_scheduler.bad_cron" not in {t.name for t in registered_crons()}


@pytest.mark.parametrize("cron", ["0 0 31 2 *", "0 0 30 2 *"])
def test_q_06_a_cron_that_can_never_fire_is_refused(cron):
    with pytest.raises(JobDefinitionError) as caught:
        declare(cron, tz="UTC", name="test_scheduler.never")
    assert caught.value.code == "X_CRON_INVALID"
    assert caught.value.hint


def test_job_11_a_second_function_under_a_taken_task_name_is_refused():
    """TASK-05 → JOB-11/15: the first declaration stays registered."""

    def first(occurrence):
        return []

    def second(occurrence):
        return []

    try:
        handle = cron("0 3 * * *", tz="UTC", name="test_scheduler.dup")(first)
        with pytest.raises(JobDefinitionError) as caught:
            cron("0 4 * * *", tz="UTC", name="test_scheduler.dup")(second)
        assert caught.value.code == "X_JOB_DUPLICATE"
        assert caught.value.hint
        assert cron_named("test_scheduler.dup") is handle
        with pytest.raises(JobDefinitionError) as caught:
            cron("0 3 * * *", tz="UTC", name="tests.daily")(second)
        assert caught.value.code == "X_JOB_DUPLICATE"
        assert cron_named("tests.daily") is fixtures.daily
    finally:
        unregister("test_scheduler.dup")


# --- TASK-03..05 -------------------------------------------------------------------------------


def test_task_03_entries_are_built_from_the_occurrence():
    occurrence = utc(2026, 7, 29, 3)
    assert fixtures.daily.entries(occurrence) == [(jobs.ok, {"n": int(occurrence.timestamp())})]
    assert fixtures.berlin_2am.entries(occurrence) == []
    assert fixed.entries(occurrence) == [(jobs.ok, {"n": 7}), (jobs.on_other_queue, {"n": 8})]


def test_task_05_describe_is_json_with_the_listed_fields():
    described = fixed.describe()
    assert json.loads(json.dumps(described)) == described
    assert described == {
        "kind": "cron",
        "name": "test_scheduler.fixed",
        "schedule": "0 3 * * *",
        "tz": "UTC",
        "catch_up": "skip",
        "max_catch_up": 10,
        "jobs": ["tests.jobs.ok", "tests.jobs.on_other_queue"],  # declaration order
    }


def test_task_04_enqueue_fires_the_entries_now_with_the_jobs_plain_keys(bench):
    fired = fixed.enqueue()
    assert [f["job"] for f in fired] == ["tests.jobs.ok", "tests.jobs.on_other_queue"]
    assert not any(f["result"].deduped or f["result"].staged for f in fired)
    rows = {r.name: r for r in bench.rows()}
    assert rows["tests.jobs.ok"].idempotency_key == "ok:7" == jobs.ok.key_for({"n": 7})
    assert rows["tests.jobs.on_other_queue"].idempotency_key == "other:8"
    assert rows["tests.jobs.on_other_queue"].queue == "other"
    assert {r.id for r in rows.values()} == {f["result"].id for f in fired}

    again = fixed.enqueue()  # plain keys: the live jobs are returned
    assert all(f["result"].deduped for f in again)
    assert len(bench.rows()) == 2

    # A scheduled occurrence is scoped by its own key, so it never dedupes against them.
    sched = bench.scheduler("test_scheduler.fixed")
    sched.tick()
    bench.at(utc(2026, 7, 26, 3))
    [dispatch] = sched.tick()
    assert dispatch.jobs == ("tests.jobs.ok", "tests.jobs.on_other_queue")
    assert len(bench.rows()) == 4


# --- SCHED-01..08 ------------------------------------------------------------------------------


def test_sched_01_the_first_round_arms_and_dispatches_nothing(bench):
    sched = bench.scheduler("tests.daily", "tests.hourly_once", "tests.every_second")
    assert sched.tick() == []
    assert bench.store.watermark("tests.daily") == utc(2026, 7, 26, 3) - ONE_MICROSECOND
    assert bench.store.watermark("tests.hourly_once") == utc(2026, 7, 26, 1) - ONE_MICROSECOND
    assert (
        bench.store.watermark("tests.every_second") == utc(2026, 7, 26, 0, 0, 1) - ONE_MICROSECOND
    )
    assert sched.tick() == []  # armed, nothing due yet
    assert bench.rows() == []

    bench.at(utc(2026, 7, 26, 1))  # the first occurrence after arming fires, on time
    assert sched.tick() == [
        # skip: 3 600 occurrences were due; only the latest is dispatched, flagged catch-up
        Dispatch("tests.every_second", utc(2026, 7, 26, 1), True, OK),
        Dispatch("tests.hourly_once", utc(2026, 7, 26, 1), False, OK),
    ]


def test_sched_02_due_is_after_the_watermark_and_up_to_now_inclusive(bench):
    sched = bench.scheduler("tests.daily_all")
    bench.store.mark_fired("tests.daily_all", utc(2026, 7, 26, 3))
    bench.at(utc(2026, 7, 27, 3))
    # (watermark, now]: the occurrence AT the watermark is not due, the one AT now is
    assert sched.tick() == [Dispatch("tests.daily_all", utc(2026, 7, 27, 3), False, OK)]


def test_sched_02_the_walk_takes_at_most_max_catch_up_steps(bench):
    sched = bench.scheduler("test_scheduler.capped")
    sched.tick()  # arms before 2026-07-26T03:00Z
    bench.at(utc(2026, 7, 31, 4))  # six occurrences are due: the 26th .. the 31st
    mark = bench.store.watermark("test_scheduler.capped")
    assert len(occurrences_between(capped, mark, bench.clock.now(), 3)) == 3

    first = sched.tick()
    assert [(d.occurrence.day, d.catch_up) for d in first] == [(26, True), (27, True), (28, True)]
    assert bench.store.watermark("test_scheduler.capped") == utc(2026, 7, 28, 3)
    second = sched.tick()  # the next round walks on from there
    assert [(d.occurrence.day, d.catch_up) for d in second] == [(29, True), (30, True), (31, False)]
    assert sched.tick() == []


def test_sched_03_skip_dispatches_only_the_latest_due_occurrence(bench, caplog):
    """Worked example: daily 03:00 UTC, down from 2026-07-26 00:00 for 3 d 4 h."""
    caplog.set_level(logging.INFO, logger="django_xjobs")
    sched = bench.scheduler("tests.daily")
    assert sched.tick() == []
    bench.at(START + timedelta(days=3, hours=4))
    assert sched.tick() == [Dispatch("tests.daily", utc(2026, 7, 29, 3), True, OK)]
    [row] = bench.rows()
    assert row.run_at == utc(2026, 7, 29, 3)
    assert bench.store.watermark("tests.daily") == utc(2026, 7, 29, 3)
    [logged] = events(caplog, "xjobs.scheduler.dispatched")
    assert logged.fields["catch_up"] == "skip"  # the policy, by name
    assert logged.fields["late"] is True  # this occurrence was caught up
    assert "catch_up=skip late=True" in logged.getMessage()


def test_sched_04_se_37_run_once_dispatches_once_then_moves_to_now(bench):
    """Worked example: an hourly task down 24 h fires one catch-up, not one per tick."""
    sched = bench.scheduler("tests.hourly_once")
    assert sched.tick() == []
    bench.at(START + timedelta(hours=24))
    assert sched.tick() == [Dispatch("tests.hourly_once", utc(2026, 7, 26, 1), True, OK)]
    assert bench.store.watermark("tests.hourly_once") == bench.clock.now()
    for _ in range(24):
        bench.clock.advance(1)
        assert sched.tick() == []
    bench.at(utc(2026, 7, 27, 1))  # the next real occurrence still fires, on time
    assert sched.tick() == [Dispatch("tests.hourly_once", utc(2026, 7, 27, 1), False, OK)]
    assert [r.run_at for r in bench.rows()] == [utc(2026, 7, 26, 1), utc(2026, 7, 27, 1)]


def test_sched_05_run_all_dispatches_every_due_occurrence_in_order(bench):
    """The SCHED-03 example under run-all: 4 dispatches, catch_up on all but the last."""
    sched = bench.scheduler("tests.daily_all")
    sched.tick()
    bench.at(START + timedelta(days=3, hours=4))
    assert sched.tick() == [
        Dispatch("tests.daily_all", utc(2026, 7, 26, 3), True, OK),
        Dispatch("tests.daily_all", utc(2026, 7, 27, 3), True, OK),
        Dispatch("tests.daily_all", utc(2026, 7, 28, 3), True, OK),
        Dispatch("tests.daily_all", utc(2026, 7, 29, 3), False, OK),
    ]
    assert [r.run_at.day for r in bench.rows()] == [26, 27, 28, 29]
    assert bench.store.watermark("tests.daily_all") == utc(2026, 7, 29, 3)


def test_sched_06_a_dispatch_enqueues_occurrence_scoped_rows_on_the_driver(bench, caplog):
    caplog.set_level(logging.INFO, logger="django_xjobs")
    occurrence = utc(2026, 7, 26, 3)
    n = int(occurrence.timestamp())
    sched = bench.scheduler("tests.daily", "test_scheduler.tenanted_daily")
    sched.tick()
    bench.at(occurrence)
    assert sched.tick() == [
        Dispatch("test_scheduler.tenanted_daily", occurrence, False, ("test_scheduler.tenanted",)),
        Dispatch("tests.daily", occurrence, False, OK),
    ]
    assert tenanted.build_request({"day": "x"}).tenant_id == "acme"  # enqueued directly
    expected = {
        # key `<task>:<occurrence epoch ms>:<job key>`, run_at = occurrence, the job's queue and
        # max_attempts, no tenant
        f"test_scheduler.tenanted_daily:{epoch_ms(occurrence)}:tenanted:2026-07-26": (
            "test_scheduler.tenanted",
            occurrence,
            "other",
            7,
            None,
            {"day": "2026-07-26"},
        ),
        f"tests.daily:{epoch_ms(occurrence)}:ok:{n}": (
            "tests.jobs.ok",
            occurrence,
            "default",
            3,
            None,
            {"n": n},
        ),
    }
    rows = {
        r.idempotency_key: (r.name, r.run_at, r.queue, r.max_attempts, r.tenant_id, r.input)
        for r in bench.rows()
    }
    assert rows == expected
    if bench.kind == "postgres":  # the x_jobs rows themselves
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT idempotency_key, name, run_at, queue, max_attempts, tenant_id, input"
                " FROM x_jobs"
            )
            stored = {
                key: (name, run_at, queue, attempts, tenant, json.loads(data))
                if isinstance(data, str)
                else (name, run_at, queue, attempts, tenant, data)
                for key, name, run_at, queue, attempts, tenant, data in cursor.fetchall()
            }
        assert stored == expected
    assert bench.store.watermark("tests.daily") == occurrence  # then mark_fired
    logged = {r.fields["cron"]: r.fields for r in events(caplog, "xjobs.scheduler.dispatched")}
    assert logged["tests.daily"] == {
        "cron": "tests.daily",
        "occurrence": occurrence.isoformat(),
        "tz": "UTC",
        "catch_up": "skip",
        "late": False,
        "jobs": "tests.jobs.ok",
    }


def test_sched_07_se_44_each_missed_occurrence_gets_its_own_payload(bench):
    sched = bench.scheduler("test_scheduler.per_day")
    sched.tick()
    bench.at(START + timedelta(days=3, hours=4))
    assert len(sched.tick()) == 4
    assert [r.input for r in bench.rows()] == [
        {"day": "2026-07-26"},
        {"day": "2026-07-27"},
        {"day": "2026-07-28"},
        {"day": "2026-07-29"},
    ]  # never the day of the wall clock that ran the catch-up (the 29th, four times)


def test_sched_08_the_same_occurrence_is_never_dispatched_twice(bench):
    sched = bench.scheduler("tests.daily", "tests.daily_all", "tests.hourly_once")
    sched.tick()
    bench.at(utc(2026, 7, 26, 3))
    assert len(sched.tick()) == 3
    for _ in range(5):
        assert sched.tick() == []
    # nor by another scheduler object of the same holder on the same store
    again = Scheduler(
        driver=bench.driver,
        store=bench.same_store(),
        cron_names=["tests.daily", "tests.daily_all", "tests.hourly_once"],
        clock=bench.clock,
        holder=sched.holder,
    )
    assert again.tick() == []
    assert len(bench.rows()) == 3


# --- a task whose entries are bad ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "code"),
    [
        pytest.param([("tests.jobs.ok", {"n": 1})], "X_INVARIANT", id="name-not-handle"),
        pytest.param([(jobs.ok, [("n", 1)])], "X_INVARIANT", id="inputs-not-dict"),
        pytest.param([(jobs.ok, {"n": 1}, "extra")], "X_INVARIANT", id="triple"),
        pytest.param([jobs.ok], "X_INVARIANT", id="bare-handle"),
        pytest.param(
            [(jobs.ok, {"n": 1}), (jobs.ok, {"n": object()})], "X_INPUT_INVALID", id="not-json"
        ),
        pytest.param([(jobs.ok, {"n": float("nan")})], "X_INPUT_INVALID", id="nan"),
        pytest.param([(jobs.ok, {"nope": 1})], "X_INPUT_INVALID", id="unknown-input"),
        pytest.param(5, None, id="not-a-list"),
    ],
)
def test_a_bad_entry_skips_that_occurrence_loudly_and_others_still_dispatch(
    bench, caplog, entries, code
):
    caplog.set_level(logging.INFO, logger="django_xjobs")
    BAD["entries"] = entries
    sched = bench.scheduler("test_scheduler.bad", "tests.daily")
    sched.tick()
    occurrence = utc(2026, 7, 26, 3)
    bench.at(occurrence)
    assert sched.tick() == [Dispatch("tests.daily", occurrence, False, OK)]
    [failed] = events(caplog, "xjobs.scheduler.cron_failed")
    assert failed.levelno == logging.ERROR
    assert failed.fields["cron"] == "test_scheduler.bad"
    assert "cron=test_scheduler.bad" in failed.getMessage()
    if code is not None:
        assert failed.fields["code"] == code and failed.fields["hint"]
    # nothing of it was enqueued, not even its valid first entry; the occurrence is passed
    assert [r.idempotency_key.split(":")[0] for r in bench.rows()] == ["tests.daily"]
    assert bench.store.watermark("test_scheduler.bad") == occurrence
    assert sched.tick() == []  # skipped once, not retried every tick
    assert len(events(caplog, "xjobs.scheduler.cron_failed")) == 1


# --- SCHED-09/14: leadership --------------------------------------------------------------------


def test_sched_09_14_only_the_leader_dispatches_and_release_hands_over(bench):
    day = 24 * 3600  # a lease that outlives the clock jumps below (the memory lease ages with it)
    a = bench.scheduler("tests.daily", holder="node-a", leader_ttl=day)
    b = bench.scheduler("tests.daily", holder="node-b", store=bench.same_store(), leader_ttl=day)
    assert a.tick() == [] and a.is_leader
    assert b.tick() == [] and not b.is_leader
    assert bench.lease()[0] == "node-a"

    bench.at(utc(2026, 7, 26, 3))
    assert b.tick() == []  # due, but not the leader's to dispatch
    assert a.tick() == [Dispatch("tests.daily", utc(2026, 7, 26, 3), False, OK)]
    assert b.tick() == []

    a.stop()  # SCHED-11: gives the lease up
    assert bench.lease() is None and not a.is_leader
    bench.at(utc(2026, 7, 27, 3))
    assert b.tick() == [Dispatch("tests.daily", utc(2026, 7, 27, 3), False, OK)]
    assert b.is_leader and bench.lease()[0] == "node-b"
    assert [r.run_at for r in bench.rows()] == [utc(2026, 7, 26, 3), utc(2026, 7, 27, 3)]


def test_sched_09_an_expired_lease_is_taken_and_the_old_leader_logs_the_loss(bench, caplog):
    caplog.set_level(logging.INFO, logger="django_xjobs")
    day = 24 * 3600  # a lease that outlives the clock jumps below (the memory lease ages with it)
    a = bench.scheduler("tests.daily", holder="node-a", leader_ttl=day)
    b = bench.scheduler("tests.daily", holder="node-b", store=bench.same_store(), leader_ttl=day)
    a.tick()
    assert a.is_leader
    bench.set_lease_left(0)  # node-a stalled past its TTL
    assert b.tick() == [] and b.is_leader
    assert bench.lease()[0] == "node-b"

    bench.at(utc(2026, 7, 26, 3))
    assert a.tick() == [] and not a.is_leader
    [lost] = events(caplog, "xjobs.scheduler.leadership_lost")
    assert lost.levelno == logging.WARNING and lost.fields["holder"] == "node-a"
    assert b.tick() == [Dispatch("tests.daily", utc(2026, 7, 26, 3), False, OK)]
    assert len(bench.rows()) == 1


def test_sched_09_every_round_renews_the_lease(bench):
    sched = bench.scheduler("tests.daily")
    sched.tick()
    bench.set_lease_left(5)
    bench.clock.advance(1)
    sched.tick()
    holder, left = bench.lease()
    assert holder == sched.holder and left == pytest.approx(30, abs=0.01)


def test_sched_14_the_lease_wins_when_free_held_by_the_caller_or_expired(bench):
    store = bench.store
    assert store.acquire(LEADER_KEY, "h1", 30)
    assert not store.acquire(LEADER_KEY, "h2", 30)
    assert store.acquire(LEADER_KEY, "h1", 300)  # a renewal
    assert bench.lease() == ("h1", pytest.approx(300, abs=0.01))
    store.confirm(LEADER_KEY, "h1")
    with pytest.raises(NotLeaderError):
        store.confirm(LEADER_KEY, "h2")

    store.release(LEADER_KEY, "h2")  # not h2's: deletes nothing
    assert bench.lease()[0] == "h1"
    assert not store.acquire(LEADER_KEY, "h2", 30)
    assert store.acquire("another-key", "h2", 30)  # keys are independent

    bench.set_lease_left(0)
    with pytest.raises(NotLeaderError):
        store.confirm(LEADER_KEY, "h1")
    assert store.acquire(LEADER_KEY, "h2", 30)
    assert not store.acquire(LEADER_KEY, "h1", 30)
    store.release(LEADER_KEY, "h2")
    assert bench.lease() is None
    assert store.acquire(LEADER_KEY, "h1", 30)


def test_sched_14_defaults_key_holder_and_ttl(bench):
    one = Scheduler(driver=bench.driver, store=bench.store, cron_names=[], clock=bench.clock)
    two = Scheduler(driver=bench.driver, store=bench.store, cron_names=[], clock=bench.clock)
    assert LEADER_KEY == "scheduler"
    assert one.holder.startswith("scheduler-") and one.holder != two.holder
    assert one.leader_ttl == 30 and one.tick_interval == 1
    assert one.tick() == [] and one.is_leader
    assert bench.lease() == (one.holder, pytest.approx(30, abs=0.01))


# --- SCHED-10/11: one round at a time, and the drain ---------------------------------------------


def test_sched_10_se_38_a_tick_during_a_round_joins_it(bench, monkeypatch):
    joined, _ = watch_joins(monkeypatch)
    sched = bench.scheduler("test_scheduler.gate_a")
    assert sched.tick() == []  # arms
    bench.at(utc(2026, 7, 26, 1))
    GATE.active = True

    def open_once_joined():
        joined.wait(10)
        GATE.release.set()

    with shared_connection():
        first = Runner(sched.tick)
        assert GATE.entered.wait(10)  # the first round is inside the task's function
        opener = threading.Thread(target=open_once_joined, daemon=True)
        opener.start()
        second = sched.tick()  # from the test: joins the round in flight
        first.join(10)
        opener.join(10)
    assert joined.is_set()
    assert first.error is None
    assert second is first.result
    assert second == [Dispatch("test_scheduler.gate_a", utc(2026, 7, 26, 1), False, OK)]
    assert len(bench.rows()) == 1


def test_sched_11_se_39_stop_waits_for_the_round_then_releases_leadership(bench, monkeypatch):
    waiting, created = watch_joins(monkeypatch)
    sched = bench.scheduler("test_scheduler.gate_a", "test_scheduler.gate_b")
    sched.tick()  # arms both
    armed_b = bench.store.watermark("test_scheduler.gate_b")
    bench.at(utc(2026, 7, 26, 1))
    rounds_done: list[bool] = []
    real_release = sched.store.release

    def release(key, holder):
        rounds_done.append(all(f.done() for f in created))
        real_release(key, holder)

    monkeypatch.setattr(sched.store, "release", release)
    GATE.active = True
    with shared_connection():
        in_flight = Runner(sched.tick)
        assert GATE.entered.wait(10)
        stopping = Runner(sched.stop)
        assert waiting.wait(10)  # stop() is waiting for the round
        assert sched.state == "draining"
        assert stopping.is_alive()
        assert bench.lease()[0] == sched.holder  # still leading while the round runs
        GATE.release.set()
        in_flight.join(10)
        stopping.join(10)
    assert in_flight.error is None and stopping.error is None
    # the task in hand finished; the next one was not started once draining began
    assert in_flight.result == [Dispatch("test_scheduler.gate_a", utc(2026, 7, 26, 1), False, OK)]
    assert bench.store.watermark("test_scheduler.gate_b") == armed_b
    assert rounds_done == [True]  # leadership was released only after the round ended
    assert bench.lease() is None
    assert not sched.is_leader and sched.state == "stopped"

    # a round that starts during/after the drain neither acquires nor dispatches
    assert sched.tick() == []
    assert bench.lease() is None
    sched.stop()  # a second stop returns at once
    assert sched.state == "stopped"
    assert len(bench.rows()) == 1


def test_sched_11_stop_with_no_round_in_flight_releases_at_once(bench):
    sched = bench.scheduler("tests.daily")
    sched.tick()
    assert bench.lease()[0] == sched.holder
    sched.stop()
    assert bench.lease() is None and sched.state == "stopped"
    bench.at(utc(2026, 7, 26, 3))
    assert sched.tick() == []
    assert bench.lease() is None and bench.rows() == []


def test_sched_11_a_stop_asked_before_run_is_kept_and_a_stopped_scheduler_runs_again():
    """A SIGTERM can reach the scheduler while its process is still starting: the run that
    follows ends at once instead of wiping the stop and leading on."""
    clock = FrozenClock(utc(2026, 7, 26, 3))
    store, driver = MemorySchedulerStore(clock), MemoryDriver(clock)
    sched = Scheduler(
        driver=driver, store=store, cron_names=["tests.daily"], clock=clock, tick_interval=0.01
    )
    sched.stop()
    loop = threading.Thread(target=sched.run, daemon=True)
    loop.start()
    loop.join(10)
    stopped = not loop.is_alive()
    if not stopped:
        sched.stop()
        loop.join(10)
    assert stopped, "run() wiped the stop asked before it and led on"
    assert sched.state == "stopped" and store._leaders == {}
    again = threading.Thread(target=sched.run, daemon=True)  # a stopped scheduler runs again
    again.start()
    wait_for(lambda: store._leaders != {}, timeout=10, what="the second run to lead")
    sched.stop()
    again.join(10)
    assert not again.is_alive() and sched.state == "stopped"


def test_sched_10_12_run_loops_until_stop_and_a_failed_round_is_logged(caplog):
    """Memory store only: ``run()`` closes its thread's connections when it ends."""
    caplog.set_level(logging.INFO, logger="django_xjobs")
    clock = FrozenClock(utc(2026, 7, 26, 3))
    store, driver = MemorySchedulerStore(clock), MemoryDriver(clock)
    store.mark_fired("tests.daily", utc(2026, 7, 25, 3))
    sched = Scheduler(
        driver=driver, store=store, cron_names=["tests.daily"], clock=clock, tick_interval=0
    )
    calls: list[int] = []
    later_round = threading.Event()
    real_acquire = store.acquire

    def acquire(key, holder, ttl):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("lease table unavailable")
        if len(calls) >= 3:  # the round after the failed one has ended
            later_round.set()
        return real_acquire(key, holder, ttl)

    store.acquire = acquire
    loop = threading.Thread(target=sched.run, daemon=True)
    loop.start()
    assert later_round.wait(10)
    sched.stop()
    loop.join(10)
    assert not loop.is_alive() and sched.state == "stopped"
    [failed] = events(caplog, "xjobs.scheduler.tick_failed")
    assert "lease table unavailable" in str(failed.fields["error"])
    [row] = driver.reads().list_jobs()
    assert row.run_at == utc(2026, 7, 26, 3)  # the loop went on and dispatched once
    assert store._leaders == {}  # released on stop


# --- SCHED-13 / SE-41: the durable watermark -----------------------------------------------------


def test_sched_13_mark_fired_only_moves_forward(bench):
    store = bench.store
    assert store.watermark("test_scheduler.capped") is None
    store.mark_fired("test_scheduler.capped", utc(2026, 7, 28, 3))
    store.mark_fired("test_scheduler.capped", utc(2026, 7, 27, 3))  # a stale round
    assert store.watermark("test_scheduler.capped") == utc(2026, 7, 28, 3)
    assert bench.same_store().watermark("test_scheduler.capped") == utc(2026, 7, 28, 3)
    store.mark_fired("test_scheduler.capped", utc(2026, 7, 29, 3))
    assert store.watermark("test_scheduler.capped") == utc(2026, 7, 29, 3)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("tests.daily_all", [(27, True), (28, True), (29, False)]),  # run-all: all three
        ("tests.daily", [(29, True)]),  # skip: only the last
    ],
)
def test_sched_13_se_41_a_restarted_scheduler_continues_from_the_durable_watermark(
    bench, name, expected
):
    before = bench.scheduler(name, holder="before-deploy")
    before.tick()
    bench.at(utc(2026, 7, 26, 3))
    assert before.tick() == [Dispatch(name, utc(2026, 7, 26, 3), False, OK)]
    before.stop()

    bench.at(utc(2026, 7, 29, 3, 30))  # down across three occurrences
    after = bench.scheduler(name, holder="after-deploy", store=bench.same_store())
    got = after.tick()  # no re-arming: the watermark is durable
    assert [(d.occurrence.day, d.catch_up) for d in got] == expected
    assert after.tick() == []
    assert [r.run_at.day for r in bench.rows()] == [26] + [day for day, _ in expected]


# --- SCHED-16 / SE-43: daylight-saving time ------------------------------------------------------

# Each local day yields one occurrence at the earliest instant that exists: in a fall-back fold
# the first pass of the hour (fold=0); in a spring-forward gap the wall time read with the offset
# before the gap (fold=0, PEP 495 / RFC 5545), i.e. shifted by the gap, never skipped.
# Transitions in 2026: Europe/Berlin 03-29 (02:00 CET → 03:00 CEST) and 10-25 (03:00 CEST →
# 02:00 CET); America/New_York 03-08 (02:00 EST → 03:00 EDT) and 11-01 (02:00 EDT → 01:00 EST);
# Australia/Sydney 04-05 (03:00 AEDT → 02:00 AEST) and 10-04 (02:00 AEST → 03:00 AEDT).
DST_CASES = [
    pytest.param(
        "tests.berlin_2am",
        utc(2026, 10, 24, 12),
        [
            (utc(2026, 10, 25, 0), "2026-10-25 02:00 +0200"),  # CEST, not again at 02:00 CET
            (utc(2026, 10, 26, 1), "2026-10-26 02:00 +0100"),
        ],
        id="berlin-fall-back",
    ),
    pytest.param(
        "tests.berlin_2am",
        utc(2026, 3, 28, 12),
        [
            (utc(2026, 3, 29, 1), "2026-03-29 03:00 +0200"),  # 02:00 does not exist
            (utc(2026, 3, 30, 0), "2026-03-30 02:00 +0200"),
        ],
        id="berlin-spring-forward",
    ),
    pytest.param(
        "test_scheduler.ny_0130",
        utc(2026, 10, 31, 12),
        [
            (utc(2026, 11, 1, 5, 30), "2026-11-01 01:30 -0400"),  # EDT, not again in EST
            (utc(2026, 11, 2, 6, 30), "2026-11-02 01:30 -0500"),
        ],
        id="new-york-fall-back",
    ),
    pytest.param(
        "test_scheduler.ny_0230",
        utc(2026, 3, 7, 12),
        [
            (utc(2026, 3, 8, 7, 30), "2026-03-08 03:30 -0400"),  # 02:30 does not exist
            (utc(2026, 3, 9, 6, 30), "2026-03-09 02:30 -0400"),
        ],
        id="new-york-spring-forward",
    ),
    pytest.param(
        "test_scheduler.sydney_0230",
        utc(2026, 4, 4, 0),
        [
            (utc(2026, 4, 4, 15, 30), "2026-04-05 02:30 +1100"),  # AEDT, not again in AEST
            (utc(2026, 4, 5, 16, 30), "2026-04-06 02:30 +1000"),
        ],
        id="sydney-fall-back",
    ),
    pytest.param(
        "test_scheduler.sydney_0230",
        utc(2026, 10, 3, 0),
        [
            (utc(2026, 10, 3, 16, 30), "2026-10-04 03:30 +1100"),  # 02:30 does not exist
            (utc(2026, 10, 4, 15, 30), "2026-10-05 02:30 +1100"),
        ],
        id="sydney-spring-forward",
    ),
]


@pytest.mark.parametrize(("name", "start", "expected"), DST_CASES)
def test_sched_16_se_43_one_occurrence_per_local_day_across_dst(name, start, expected):
    handle = cron_named(name)
    zone = ZoneInfo(handle.tz)
    first = handle.next_occurrence(start)
    second = handle.next_occurrence(first)
    assert [first, second] == [instant for instant, _ in expected]
    for instant, local in expected:  # the hand computation, re-read through zoneinfo
        assert instant.astimezone(zone).strftime("%Y-%m-%d %H:%M %z") == local
    assert occurrences_between(handle, start, second, 10) == [first, second]
    for instant, _ in expected:  # the arming watermark (SCHED-01) walks back onto it
        assert handle.next_occurrence(instant - ONE_MICROSECOND) == instant


def test_sched_16_the_fall_back_fold_and_the_spring_gap_as_zoneinfo_reads_them():
    berlin, new_york = ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York")
    fold = datetime(2026, 10, 25, 2, 0)
    assert fold.replace(tzinfo=berlin, fold=0).astimezone(UTC) == utc(2026, 10, 25, 0)
    assert fold.replace(tzinfo=berlin, fold=1).astimezone(UTC) == utc(2026, 10, 25, 1)
    assert fixtures.berlin_2am.next_occurrence(utc(2026, 10, 25, 0)) == utc(2026, 10, 26, 1)
    gap = datetime(2026, 3, 8, 2, 30)
    assert gap.replace(tzinfo=new_york, fold=0).astimezone(UTC) == utc(2026, 3, 8, 7, 30)


@pytest.mark.parametrize(("name", "start", "expected"), DST_CASES)
def test_sched_16_the_scheduler_fires_once_per_local_day_across_dst(bench, name, start, expected):
    """Armed before the first occurrence (watermark = occurrence - 1 µs, SCHED-01), then ticked
    every 30 minutes across the transition: one dispatch per local day, each on time."""
    clock = FrozenClock(start)  # the scheduler's own clock: some cases predate the bench's
    sched = Scheduler(driver=bench.driver, store=bench.store, cron_names=[name], clock=clock)
    assert sched.tick() == []
    assert bench.store.watermark(name) == expected[0][0] - ONE_MICROSECOND
    end = expected[-1][0] + timedelta(hours=1)
    fired: list[Dispatch] = []
    while clock.now() < end:
        clock.advance(30 * 60)
        fired += sched.tick()
    assert fired == [Dispatch(name, instant, False, ()) for instant, _ in expected]


def test_sched_17_a_task_follows_its_own_zone(bench):
    assert ny_3am.next_occurrence(START) == utc(2026, 7, 26, 7)  # 03:00 EDT
    assert ny_3am.next_occurrence(utc(2026, 1, 15)) == utc(2026, 1, 15, 8)  # 03:00 EST
    sched = bench.scheduler("test_scheduler.ny_3am")
    assert sched.next_runs() == {"test_scheduler.ny_3am": "2026-07-26T07:00:00+00:00"}
    sched.tick()
    bench.at(utc(2026, 7, 26, 3))
    assert sched.tick() == []  # 03:00 UTC is not 03:00 in New York
    bench.at(utc(2026, 7, 26, 7))
    assert sched.tick() == [Dispatch("test_scheduler.ny_3am", utc(2026, 7, 26, 7), False, ())]


# --- DESIGN Q-07: jobs and watermark commit together, under a leadership check -------------------


def count_jobs() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM x_jobs")
        return cursor.fetchone()[0]


def test_q_07_a_failed_leadership_check_writes_neither_jobs_nor_watermark(pg, caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="django_xjobs")
    sched = pg.scheduler("tests.daily_all")
    sched.tick()
    armed = pg.store.watermark("tests.daily_all")
    pg.at(utc(2026, 7, 27, 4))  # two occurrences due

    def not_leader(key, holder):
        raise NotLeaderError(key)

    monkeypatch.setattr(pg.store, "confirm", not_leader)
    assert sched.tick() == []
    assert not sched.is_leader
    assert count_jobs() == 0
    assert pg.store.watermark("tests.daily_all") == armed
    assert len(events(caplog, "xjobs.scheduler.leadership_lost")) == 1

    monkeypatch.undo()  # the check passes again: nothing was lost
    assert [d.occurrence.day for d in sched.tick()] == [26, 27]
    assert count_jobs() == 2


def test_q_07_a_rival_taking_the_expired_lease_mid_dispatch_rolls_the_dispatch_back(pg):
    sched = pg.scheduler("test_scheduler.usurped", holder="stalled")
    sched.tick()
    armed = pg.store.watermark("test_scheduler.usurped")
    pg.at(utc(2026, 7, 26, 1))

    def rival_takes_over():  # between acquire and the dispatch transaction
        pg.set_lease_left(0)
        assert PostgresSchedulerStore("default").acquire(LEADER_KEY, "rival", 30)

    ONCE.append(rival_takes_over)
    assert sched.tick() == []
    assert not sched.is_leader
    assert count_jobs() == 0
    assert pg.store.watermark("test_scheduler.usurped") == armed

    rival = pg.scheduler("test_scheduler.usurped", holder="rival", store=pg.same_store())
    assert rival.tick() == [Dispatch("test_scheduler.usurped", utc(2026, 7, 26, 1), False, OK)]
    assert count_jobs() == 1


# --- INSP-08: the manifest -----------------------------------------------------------------------


def test_insp_08_the_manifest_lists_crons_in_code_unit_order_with_their_next_run():
    before = datetime.now(UTC)
    manifest = inspect_manifest()
    after = datetime.now(UTC)
    assert json.loads(json.dumps(manifest)) == manifest
    rows = {row["name"]: row for row in manifest["crons"]}
    names = [row["name"] for row in manifest["crons"]]
    assert names == sorted(names)
    assert {"tests.daily", "tests.berlin_2am", "test_scheduler.fixed"} <= set(names)
    assert names.index("test_scheduler.Zed") < names.index("test_scheduler.abc")  # not locale
    for row in manifest["crons"]:
        assert datetime.fromisoformat(row["next_run"]).tzinfo is not None
    daily = rows["tests.daily"]
    assert (daily["schedule"], daily["tz"], daily["catch_up"]) == ("0 3 * * *", "UTC", "skip")
    assert daily["next_run"] in {
        fixtures.daily.next_occurrence(before).isoformat(),
        fixtures.daily.next_occurrence(after).isoformat(),
    }
    berlin = datetime.fromisoformat(rows["tests.berlin_2am"]["next_run"])
    assert berlin.astimezone(ZoneInfo("Europe/Berlin")).strftime("%H:%M") in {"02:00", "03:00"}


def test_insp_08_a_manifest_cron_row_names_the_jobs_it_enqueues():
    rows = {row["name"]: row for row in inspect_manifest()["crons"]}
    assert rows["test_scheduler.fixed"]["jobs"] == [
        "tests.jobs.ok",
        "tests.jobs.on_other_queue",
    ]
