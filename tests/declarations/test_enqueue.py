"""Enqueue, retry and storage SPEC ids that had no test of their own (issue 16 item 7):
ENQ-01, ENQ-11, RETRY-05, EXEC-01 and DB-04, on both drivers wherever storage is involved."""

from __future__ import annotations

import ast
import json
import re
import traceback
from dataclasses import fields, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test import override_settings

from django_xjobs import Actor
from django_xjobs.drivers import install, uninstall
from django_xjobs.drivers.contract import JobSnapshot
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.drivers.postgres import PostgresDriver
from django_xjobs.errors import DriverUnavailableError
from django_xjobs.run.execution import Outcome
from django_xjobs.testing import relay_staged, run_until_idle
from django_xjobs.worker.worker import Worker
from tests import jobs, tasks
from tests.conftest import Harness

PACKAGE = Path(__file__).resolve().parents[2] / "django_xjobs"


# --- ENQ-01: one enqueue path ----------------------------------------------------------------


class Recording:
    """The installed driver, recording the call stack of every ``enqueue``/``enqueue_many``
    that reaches it; everything else is the real driver's."""

    def __init__(self, driver) -> None:
        self._driver = driver
        self.calls: list[list[tuple[str, str]]] = []

    def __getattr__(self, name):
        return getattr(self._driver, name)

    def _record(self) -> None:
        """The package's frames that led here, as (path inside the package, function)."""
        frames = traceback.extract_stack()[:-2]
        self.calls.append(
            [
                (Path(f.filename).relative_to(PACKAGE).as_posix(), f.name)
                for f in frames
                if Path(f.filename).is_relative_to(PACKAGE)
            ]
        )

    def jobs(self):  # its enqueues stand in for the driver's
        return self

    def enqueue(self, request):
        self._record()
        return self._driver.jobs().enqueue(request)

    def enqueue_many(self, requests):
        self._record()
        return self._driver.jobs().enqueue_many(requests)


@pytest.fixture
def recording(harness):
    driver = Recording(harness.driver)
    install(driver)
    try:
        yield driver
    finally:
        uninstall(driver)


FACADE = ("run/enqueue.py", "submit_many")


def test_enq_01_every_public_enqueue_reaches_the_driver_through_one_facade(harness, recording):
    """``handle.enqueue``, ``enqueue_as``, ``aenqueue``, ``enqueue_many`` and a ``django.tasks``
    task's ``enqueue`` all call the driver from ``run.enqueue.submit_many``, and nowhere else."""
    callers = {
        "enqueue": lambda: jobs.ok.enqueue(n=1),
        "enqueue_as": lambda: jobs.ok.enqueue_as(Actor(id="user:42", tenant_id="acme"), n=2),
        "aenqueue": lambda: async_to_sync(jobs.ok.aenqueue)(n=3),
        "enqueue_many": lambda: jobs.ok.enqueue_many([{"n": 4}, {"n": 5}]),
        "task.enqueue": lambda: tasks.add.enqueue(1, 2),
    }
    for what, call in callers.items():
        recording.calls.clear()
        call()
        assert len(recording.calls) == 1, what
        [stack] = recording.calls
        assert FACADE in stack, f"{what} reached the driver without the facade: {stack}"
    rows = harness.driver.reads().list_jobs()
    assert sorted(r.name for r in rows) == ["tests.jobs.ok"] * 5 + ["tests.tasks.add"]
    [acted] = [r for r in rows if r.input == {"n": 2}]
    assert (acted.enqueued_by, acted.tenant_id) == ("user:42", "acme")


def test_enq_01_a_staged_enqueue_reaches_the_driver_only_through_the_relay(harness, recording):
    with override_settings(XJOBS={"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "auto"}):
        staged = jobs.ok.enqueue(n=1)
        assert staged.staged and recording.calls == []  # inside atomic(): only the outbox row
        relay_staged()
    [stack] = recording.calls
    assert ("run/publish.py", "publish_batch") in stack and FACADE not in stack
    assert harness.row(staged.id).state == "ready"


#: where ``driver.jobs().enqueue`` may be called from: the facade, the outbox relay and its stores,
#: the scheduler's dispatch, and a step's child jobs (their ids are recorded in the step before
#: they are inserted under them, so they go to the store directly, CHILD-01), and the routing
#: driver's job store handing each enqueue to the driver of its database (SHARD-03)
ENQUEUE_CALLERS = {
    "run/enqueue.py",
    "drivers/memory/outbox.py",
    "drivers/postgres/outbox.py",
    "scheduler/role.py",
    "operations/cron_controls.py",
    "drivers/memory/batches.py",
    "steps/children.py",
    "drivers/routing/jobs.py",
}


def test_enq_01_no_other_module_calls_a_driver_enqueue():
    """Every ``<driver>.enqueue(...)``/``enqueue_many(...)`` in the package, read from the
    source: a receiver named like a driver, called outside the facade, relay and scheduler."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("enqueue", "enqueue_many")
            ):
                continue
            receiver = ast.unparse(node.func.value)
            if "driver" in receiver:  # driver, self.driver, get_driver(), ...
                found.add(path.relative_to(PACKAGE).as_posix())
    assert {"run/enqueue.py", "scheduler/role.py"} <= found  # the reading above finds calls
    assert sorted(found - ENQUEUE_CALLERS) == []


# --- ENQ-11: a suppressed insert with no live row to return ---------------------------------


def drift_the_live_key_index() -> None:
    """Replace the live-key index with a drifted one, inside the test's transaction (the
    rollback restores it): unique on (name, key) in every state, so a finished row suppresses
    the insert while the live-row lookup, which reads live states only, finds nothing."""
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX x_jobs_name_tenant_idempotency_live_idx")
        cursor.execute("CREATE UNIQUE INDEX x_jobs_drifted_idx ON x_jobs (name, idempotency_key)")


def finished_row(n: int) -> None:
    jobs.ok.enqueue(n=n)
    [execution] = run_until_idle()
    assert execution.outcome == Outcome.COMPLETED


@pytest.fixture
def postgres(db):
    """ENQ-11 is the SQL driver's alone: the memory driver has no index to drift, its live-row
    lookup is its insert."""
    driver = PostgresDriver("default")
    install(driver)
    try:
        yield Harness(driver)
    finally:
        uninstall(driver)


def test_enq_11_a_suppressed_insert_with_no_live_row_is_driver_unavailable(postgres):
    finished_row(1)
    drift_the_live_key_index()
    with pytest.raises(DriverUnavailableError) as raised:
        jobs.ok.enqueue(n=1)
    error = raised.value
    assert error.code == "X_DRIVER_UNAVAILABLE"
    assert "'tests.jobs.ok'" in error.message and "no live row" in error.message
    assert "migrate" in error.hint


def test_enq_11_the_same_for_a_batch(postgres):
    finished_row(1)
    finished_row(2)
    drift_the_live_key_index()
    with pytest.raises(DriverUnavailableError) as raised:
        jobs.ok.enqueue_many([{"n": 1}, {"n": 2}])
    assert raised.value.code == "X_DRIVER_UNAVAILABLE" and "migrate" in raised.value.hint
    assert [r.state for r in postgres.driver.reads().list_jobs()] == ["done", "done"]


def test_enq_11_the_same_for_a_long_batch_sent_in_chunks(postgres, monkeypatch):
    """A call long enough to be sent a chunk at a time answers ENQ-11 as one statement does,
    and the chunks its transaction wrote are gone with it."""
    monkeypatch.setattr("django_xjobs.run.enqueue.STREAM_CHUNK", 1)
    finished_row(1)
    finished_row(2)
    drift_the_live_key_index()
    with pytest.raises(DriverUnavailableError) as raised:
        jobs.ok.enqueue_many([{"n": 3}, {"n": 1}, {"n": 2}])
    assert raised.value.code == "X_DRIVER_UNAVAILABLE" and "migrate" in raised.value.hint
    assert [r.state for r in postgres.driver.reads().list_jobs()] == ["done", "done"]


# --- RETRY-05: the handle's policy and the claimed attempt, never the row's max_attempts ----


def set_row(harness, job_id, **changes) -> None:
    """Rewrite stored columns of one row, as an older release or a hand edit left them."""
    if isinstance(harness.driver, MemoryDriver):
        rows = harness.driver._rows
        rows[job_id] = replace(rows[job_id], **changes)
        return
    columns = ", ".join(
        f"{name} = %({name})s::jsonb" if name == "input" else f"{name} = %({name})s"
        for name in changes
    )
    values = {k: json.dumps(v) if k == "input" else v for k, v in changes.items()}
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE x_jobs SET {columns} WHERE id = %(id)s", {**values, "id": job_id})


def tick(harness):
    """One real worker pass; the single run it settled."""
    [execution] = Worker(queues=["default"], driver=harness.driver).tick(limit=1).executions
    return execution


def test_retry_05_the_retry_decision_ignores_the_rows_max_attempts(harness):
    """``tests.jobs.fails`` retries up to 3 attempts. A row that says 1 is still retried after
    its first failure; a row that says 100 still dead-letters at the policy's third."""
    job_id = jobs.fails.enqueue(n=1).id
    set_row(harness, job_id, max_attempts=1)
    first = tick(harness)
    assert (first.outcome, first.job.attempt) == (Outcome.RETRIED, 1)

    set_row(harness, job_id, max_attempts=100, attempt=2)
    harness.advance(1)  # past the retry's delay
    third = tick(harness)
    assert (third.outcome, third.job.attempt, third.stop_reason) == (
        Outcome.DEAD_LETTERED,
        3,
        "attempts-exhausted",
    )
    assert harness.row(job_id).state == "dead"


def test_retry_05_the_over_budget_check_reads_the_policy_not_the_row(harness):
    """A claim past the policy's last attempt (its worker died on the last one) dead-letters
    without running, whatever the row says; one within the policy runs, whatever the row says."""
    over = jobs.ok.enqueue(n=1).id
    set_row(harness, over, attempt=3, max_attempts=100)  # the claim makes it attempt 4 of 3
    stopped = tick(harness)
    assert (stopped.outcome, stopped.stop_reason) == (Outcome.DEAD_LETTERED, "attempts-exhausted")
    assert harness.row(over).result is None  # the body never ran
    # it says which attempt was past the budget, not "the last 0 run(s)" (no lapse was counted)
    error = harness.row(over).last_error or ""
    assert "claimed for attempt 4 of 3" in error and "last 0" not in error, error

    within = jobs.ok.enqueue(n=2).id
    set_row(harness, within, attempt=1, max_attempts=1)  # attempt 2 of 3; the row says 1
    ran = tick(harness)
    assert (ran.outcome, ran.job.attempt) == (Outcome.COMPLETED, 2)
    assert harness.row(within).result == {"n": 2, "attempt": 2}


# --- EXEC-01: stored inputs that no longer fit the handler ----------------------------------


@pytest.mark.parametrize(
    ("handle", "stored", "mismatch"),
    [
        (jobs.ok, {"order": 1}, "unexpected keyword argument 'order'"),
        (jobs.async_ok, {"n": 1, "order": 1}, "unexpected keyword argument 'order'"),
        (jobs.ledger, {"hold": 0}, "missing a required argument: 'token'"),
        (jobs.ok, [1, 2], "it is list, not a dict of inputs"),
    ],
    ids=["renamed", "renamed-async", "added-required", "not-a-dict"],
)
def test_exec_01_a_stored_input_that_no_longer_fits_is_an_ordinary_attempt_failure(
    harness, handle, stored, mismatch
):
    """The run fails with ``X_INPUT_INVALID`` naming the mismatch (not a TypeError from inside
    the call), and the retry decision takes it like any failure: retried at attempt 1 of 3."""
    job_id = handle.enqueue(**({"token": "exec-01"} if handle is jobs.ledger else {"n": 1})).id
    set_row(harness, job_id, input=stored)
    execution = tick(harness)
    assert execution.outcome == Outcome.RETRIED
    error = execution.error or ""
    assert error.startswith("X_INPUT_INVALID") and mismatch in error
    assert f"job {handle.name!r}: its stored input no longer fits the handler" in error
    row = harness.row(job_id)
    assert (row.state, row.attempt) in {("ready", 1), ("delayed", 1)}
    assert row.last_error == error


# --- DB-04: explicit projections; timestamps read as aware datetimes by one helper ---------


def sql_texts():
    """Every .sql file of the package and every SQL string in its modules."""
    for path in sorted(PACKAGE.rglob("*.sql")):
        yield path.relative_to(PACKAGE).as_posix(), path.read_text()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and re.search(r"\bSELECT\b", text):
                yield path.relative_to(PACKAGE).as_posix(), text


def stars_in(text: str) -> list[str]:
    """The stars of ``text`` that expand a table: a star may only expand the statement's own
    CTE, a subquery or an ``unnest`` of its parameters, whose columns it names itself."""
    text = re.sub(r"--[^\n]*", "", text)
    ctes = set(re.findall(r"(\w+)\s+AS\s+\(", text, flags=re.I))
    ctes |= set(re.findall(r"\)\s+AS\s+(\w+)", text, flags=re.I))  # a subquery's alias
    found = re.findall(r"\bRETURNING\s+\*", text, flags=re.I)
    found += [f"{q}.*" for q in re.findall(r"\b(\w+)\.\*", text) if q not in ctes]
    for source in re.findall(r"\bSELECT\s+\*\s+FROM\s+(\(|\w+)", text, flags=re.I):
        if source != "(" and source.lower() != "unnest" and source not in ctes:
            found.append(f"SELECT * FROM {source}")
    return found


def test_db_04_no_statement_selects_star_from_a_table():
    """SPEC SE-59."""
    assert stars_in("SELECT * FROM x_jobs") and stars_in("SELECT j.* FROM x_jobs j")
    assert not stars_in("WITH w AS (SELECT id FROM x_jobs) SELECT * FROM w")
    seen, stars = 0, []
    for where, text in sql_texts():
        seen += len(re.findall(r"\bSELECT\b", text, flags=re.I))
        stars += [(where, star) for star in stars_in(text)]
    assert seen > 60  # the reading above found the statements
    assert stars == []


def test_db_04_stored_times_read_back_as_aware_utc_datetimes(harness):
    """DESIGN differs from the epoch-ms projections SPEC DB-04 describes: psycopg decodes
    ``timestamptz`` as an aware datetime, so reads hand those on; every PostgreSQL row goes
    through the one helper (``drivers.postgres.snapshot``) and both drivers answer alike."""
    job_id = jobs.ok.enqueue(n=1).id
    harness.driver.runs().claim(queues=["default"], limit=1, visibility_timeout=30, worker_id="w")
    row = harness.row(job_id)
    times = {
        f.name: getattr(row, f.name)
        for f in fields(JobSnapshot)
        if isinstance(getattr(row, f.name), datetime)
    }
    assert {"run_at", "visible_at", "created_at", "updated_at", "started_at"} <= times.keys()
    for name, value in times.items():
        assert value.utcoffset() is not None and value.utcoffset().total_seconds() == 0, name
        assert abs((value - datetime.now(UTC)).total_seconds()) < 120, name
    sources = (path.read_text() for path in (PACKAGE / "drivers" / "postgres").glob("*.py"))
    assert sum(s.count("JobSnapshot(") for s in sources) == 1  # one place makes a snapshot
