"""Real ``manage.py xjobs_relay`` processes against committed ``x_outbox`` rows (SPEC §9).

Relays are raced, SIGKILLed between publish and mark, and SIGSTOPped past their lease. The
moments in between are pinned with PostgreSQL triggers that ``pg_sleep`` inside one chosen
statement, and found with ``pg_stat_activity``. Waits are polls with a deadline, never a fixed
sleep. No worker runs here, so every published job stays ``ready`` (live) and a re-publish of the
same row is deduped by its idempotency key (SPEC OUTBOX-19, ENQ-06).
"""

from __future__ import annotations

import re
import signal
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from django_xjobs.ids import uuid7
from django_xjobs.models import Job, OutboxEntry
from django_xjobs.testing.postgres import database_url, url_for_database
from tests import jobs
from tests.support.process import ManageProcess, WorkerProcess, wait_for, worker_env

pytestmark = pytest.mark.process


class Lab:
    """Relay processes plus the sleeping triggers a test installs; torn down in that order."""

    def __init__(self) -> None:
        self.started: list[ManageProcess] = []
        self.triggers: list[tuple[str, str]] = []

    def relay(self, *args: str, env: dict[str, str] | None = None) -> ManageProcess:
        process = ManageProcess("xjobs_relay", *args, env=env)
        self.started.append(process)
        return process

    def sleep_trigger(self, name: str, table: str, event: str, when: str, seconds: float) -> None:
        """``BEFORE <event> ON <table> FOR EACH ROW WHEN (<when>)``: ``pg_sleep(seconds)``."""
        function = f"xjobs_test_{name}"
        self.triggers.append((function, table))
        execute(
            f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN PERFORM pg_sleep({seconds}); RETURN NEW; END $$"
        )
        execute(
            f"CREATE TRIGGER {function} BEFORE {event} ON {table} FOR EACH ROW "
            f"WHEN ({when}) EXECUTE FUNCTION {function}()"
        )

    def drop_triggers(self, *, terminate: bool = False) -> None:
        """Drop the triggers; DROP TRIGGER waits for a statement sleeping in one to finish.
        ``terminate`` ends such statements first (teardown must not wait, nor the flush)."""
        if terminate:
            execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND wait_event = 'PgSleep'"
            )
        while self.triggers:
            function, table = self.triggers.pop()
            execute(f"DROP TRIGGER IF EXISTS {function} ON {table}")
            execute(f"DROP FUNCTION IF EXISTS {function}()")

    def close(self) -> None:
        for process in self.started:
            process.kill()
        self.drop_triggers(terminate=True)


@pytest.fixture
def lab(transactional_db) -> Iterator[Lab]:
    """Committed rows (other processes must see them); everything started is cleaned up even
    when the test fails: relays killed, sleeping backends ended, triggers dropped."""
    lab = Lab()
    try:
        yield lab
    finally:
        lab.close()


def execute(sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []


def backends(where: str, *params: Any) -> list[int]:
    """Other backends on the test database matching ``where`` (pg_stat_activity)."""
    rows = execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        f" AND pid <> pg_backend_pid() AND {where}",
        list(params),
    )
    return [pid for (pid,) in rows]


def stage(
    keys: list[str],
    *,
    staged_at: datetime | None = None,
    names: dict[str, str] | None = None,
    **extra: Any,
) -> list[OutboxEntry]:
    """One committed transaction of outbox rows with time-ordered ids (SPEC OUTBOX-02, SE-31),
    job ``tests.jobs.ok`` unless ``names`` says otherwise for a key."""
    now = timezone.now()
    rows = [
        OutboxEntry(
            id=uuid7(),
            job=(names or {}).get(key, "tests.jobs.ok"),
            queue="default",
            input={"n": int(key.rsplit(":", 1)[1])},
            idempotency_key=key,
            max_attempts=3,
            priority=0,
            run_at=now,
            staged_at=staged_at or now,
            **extra,
        )
        for key in keys
    ]
    with transaction.atomic():
        OutboxEntry.objects.bulk_create(rows)
    return rows


def outbox() -> dict[uuid.UUID, tuple[datetime | None, str | None]]:
    return dict(
        (row_id, (published_at, claimed_by))
        for row_id, published_at, claimed_by in OutboxEntry.objects.values_list(
            "id", "published_at", "claimed_by"
        )
    )


def unpublished() -> int:
    return OutboxEntry.objects.filter(published_at__isnull=True).count()


def jobs_per_key(keys: list[str]) -> dict[str, int]:
    counts = dict.fromkeys(keys, 0)
    for key in Job.objects.filter(idempotency_key__in=keys).values_list(
        "idempotency_key", flat=True
    ):
        counts[key] += 1
    return counts


def published_count(out: str) -> int:
    match = re.search(r"published (\d+)", out)
    assert match, out
    return int(match.group(1))


@pytest.mark.timeout(180)
def test_outbox_03_06_08_se_28_two_relays_race_over_5000_rows_and_publish_each_once(lab):
    """Two relays claim from the same 5,000 committed rows (50 transactions of 100).

    SE-28: the claim is stamped in the locking statement, so no row is published twice.
    OUTBOX-03: every committed row becomes exactly one job. OUTBOX-06/08: each relay works
    through its rows in (staged_at, id) order, so what one relay marks is in stage order.
    """
    a = lab.relay("--batch-size", "100", "--interval", "50ms", "--relay-id", "relay-a")
    b = lab.relay("--batch-size", "100", "--interval", "50ms", "--relay-id", "relay-b")
    # Both relays polling before the first row commits, so both get a share of the work.
    wait_for(
        lambda: len(backends("query = 'LISTEN xjobs_outbox'")) >= 2, what="both relays to listen"
    )

    total, group = 5000, 100
    base = timezone.now()
    keys = [f"ok:{i}" for i in range(total)]
    for g in range(total // group):  # staged_at: one per transaction, increasing per group
        stage(keys[g * group : (g + 1) * group], staged_at=base + timedelta(milliseconds=g))

    wait_for(lambda: unpublished() == 0, timeout=120, what="every row to be published")
    for relay in (a, b):
        relay.send(signal.SIGTERM)
    code_a, out_a, err_a = a.finish()
    code_b, out_b, err_b = b.finish()
    assert (code_a, code_b) == (0, 0), err_a + err_b

    # One job per key: none duplicated, none missing, each with its own input.
    assert Job.objects.count() == total
    assert jobs_per_key(keys) == dict.fromkeys(keys, 1)
    assert all(
        row["input"] == {"n": int(row["idempotency_key"].split(":")[1])}
        for row in Job.objects.values("idempotency_key", "input")
    )

    rows = list(OutboxEntry.objects.values_list("id", "staged_at", "published_at", "claimed_by"))
    assert len(rows) == total
    assert all(published_at is not None for _, _, published_at, _ in rows)
    by_relay = {"relay-a": [], "relay-b": []}
    for row in rows:
        assert row[3] in by_relay, row  # marked by the relay that holds the claim
        by_relay[row[3]].append(row)
    # Both relays were listening before the first commit and poll every 50 ms while a pass
    # takes ~100 rows' worth of round trips, so each claims some of the 50 batches.
    assert all(by_relay.values()), {relay: len(rows) for relay, rows in by_relay.items()}
    # Each relay's own count of what it published is exactly what it marked.
    assert published_count(out_a) == len(by_relay["relay-a"]), out_a
    assert published_count(out_b) == len(by_relay["relay-b"]), out_b

    for relay, mine in by_relay.items():
        mine.sort(key=lambda row: (row[1], row[0]))  # stage order: (staged_at, id)
        marked = [published_at for _, _, published_at, _ in mine]
        out_of_order = [i for i in range(1, len(marked)) if marked[i] < marked[i - 1]]
        assert not out_of_order, (relay, [mine[i] for i in out_of_order[:3]])


def test_outbox_09_19_se_29_a_relay_killed_between_publish_and_mark_is_republished_once(lab):
    """OUTBOX-09/12: on the jobs' own database the job insert and the mark commit in one
    transaction. Relay A is SIGKILLed inside its mark: the insert rolls back with it, its claim
    lapses (SE-29), and relay B publishes the row, so the job exists exactly once."""
    key = "ok:1"
    lab.sleep_trigger(
        "hang_mark",
        "x_outbox",
        "UPDATE",
        "NEW.published_at IS NOT NULL AND OLD.published_at IS NULL",
        seconds=30,
    )
    [row] = stage([key])
    a = lab.relay("--claim-lease", "2s", "--relay-id", "relay-a")

    def marking() -> list[int]:
        return backends("state = 'active' AND query ILIKE %s", "%published_at = now()%")

    [pid] = wait_for(marking, what="relay A to insert the job, then hang in its mark")
    assert not Job.objects.filter(idempotency_key=key).exists()  # not committed without the mark
    a.send(signal.SIGKILL)
    a.finish()
    # The backend of a killed client only notices at its next write; end its statement now.
    execute("SELECT pg_terminate_backend(%s)", [pid])
    wait_for(lambda: pid not in backends("true"), what="relay A's backend to go")
    lab.drop_triggers()

    entry = OutboxEntry.objects.get(id=row.id)
    assert (entry.published_at, entry.claimed_by) == (None, "relay-a")  # the mark rolled back
    assert not Job.objects.filter(idempotency_key=key).exists()  # ... and the insert with it

    b = lab.relay("--claim-lease", "2s", "--relay-id", "relay-b")
    wait_for(
        lambda: OutboxEntry.objects.get(id=row.id).published_at is not None,
        what="relay B to re-claim the lapsed row and publish it",
    )
    b.send(signal.SIGTERM)
    code, out, err = b.finish()
    assert code == 0, err
    assert published_count(out) == 1, out

    assert OutboxEntry.objects.get(id=row.id).claimed_by == "relay-b"
    [job] = Job.objects.filter(idempotency_key=key)
    assert job.id == row.id  # the job has the id its enqueue returned
    assert (job.name, job.state, job.input) == ("tests.jobs.ok", "ready", {"n": 1})


def test_outbox_11_12_se_30_a_relay_stopped_past_its_lease_retires_nothing_when_it_resumes(lab):
    """Relay A claims 20 rows and is SIGSTOPped while publishing the first; its lease lapses and
    relay B publishes all 20. A's open publish transaction does not block B: the server ends it
    once it has been idle for A's lease, and it rolls back. Resumed, A finishes its stale pass:
    its marks are fenced on claimed_by (OUTBOX-12, SE-30), its publishes are no-ops, and
    nothing changes."""
    keys = [f"stop:{i}" for i in range(20)]
    # One transaction, so all 20 tie on staged_at; the slow one has the lowest id (OUTBOX-08).
    rows = stage(keys, names={keys[0]: "tests.relay.slow"})
    assert sorted(r.id for r in rows) == [r.id for r in rows]
    lab.sleep_trigger("slow_insert", "x_jobs", "INSERT", "NEW.name = 'tests.relay.slow'", 3)

    a = lab.relay("--claim-lease", "1s", "--batch-size", "100", "--relay-id", "relay-a")
    wait_for(
        lambda: backends(
            "state = 'active' AND wait_event = 'PgSleep' AND query ILIKE %s",
            "%INSERT INTO x_jobs%",
        ),
        what="relay A to be inside its first publish",
    )
    a.send(signal.SIGSTOP)
    try:
        assert set(outbox().values()) == {(None, "relay-a")}  # A holds all 20, marked none
        # DROP TRIGGER waits for A's open transaction, which the server ends after A's lease.
        lab.drop_triggers()
        assert jobs_per_key(keys[:1]) == {keys[0]: 0}  # A's insert rolled back with it

        b = lab.relay("--claim-lease", "1s", "--relay-id", "relay-b")
        wait_for(lambda: unpublished() == 0, what="relay B to publish all 20 rows")
        before = outbox()
        assert {claimed_by for _, claimed_by in before.values()} == {"relay-b"}
    finally:
        a.send(signal.SIGCONT)
    # SIGTERM stops A after the pass in flight (OUTBOX-18): its late publishes and marks of
    # all 20 rows have run when it exits. Sent right after SIGCONT, it tends to land just as
    # A's main thread leaves its timed-out wait, so the handler must not block on that wait.
    a.send(signal.SIGTERM)
    code_a, out_a, err_a = a.finish()
    assert code_a == 0, err_a
    assert "relay stopped" in out_a, out_a

    assert outbox() == before  # A's late marks retired nothing, nothing was unclaimed
    assert jobs_per_key(keys) == dict.fromkeys(keys, 1)  # A's late publishes were deduped
    assert Job.objects.count() == len(keys)

    b.send(signal.SIGTERM)
    code_b, out_b, err_b = b.finish()
    assert code_b == 0, err_b
    assert published_count(out_b) == len(keys), out_b


@pytest.mark.parametrize("schema", ["empty", "x_jobs only"])
def test_a_database_without_the_outbox_table_names_migrate(lab, schema):
    """The relay refuses to start with one clear error naming ``migrate``, not a traceback."""
    import psycopg

    name = f"xjobs_empty_{uuid.uuid4().hex[:8]}"
    url = url_for_database(database_url(), name)
    execute(f"CREATE DATABASE {name}")
    try:
        if schema == "x_jobs only":
            with psycopg.connect(url, autocommit=True) as other:
                other.execute("CREATE TABLE x_jobs (id uuid PRIMARY KEY)")
        code, out, err = lab.relay("--once", env=worker_env(url)).finish()
        assert code == 1, out + err
        assert "X_DRIVER_UNAVAILABLE" in err and "migrate" in err, err
        assert "Traceback" not in err, err
        if schema == "x_jobs only":
            assert "x_outbox" in err, err
    finally:
        execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_outbox_03_relay_once_publishes_everything_pending_and_exits_0(lab):
    """``--once`` drains every committed, unpublished row over several passes, then exits."""
    done = stage(["ok:9999"], published_at=timezone.now(), claimed_by="relay-old")
    keys = [f"ok:{i}" for i in range(250)]
    stage(keys)
    code, out, err = lab.relay("--once", "--batch-size", "100").finish()
    assert code == 0, err
    assert "published 250" in out, out
    assert unpublished() == 0
    assert jobs_per_key(keys) == dict.fromkeys(keys, 1)
    assert not Job.objects.filter(idempotency_key="ok:9999").exists()  # already published
    assert OutboxEntry.objects.get(id=done[0].id).claimed_by == "relay-old"


def test_a_worker_with_relay_publishes_and_runs_staged_jobs(transactional_db):
    """``xjobs_worker --with-relay``: one process relays the outbox and runs what it publishes."""
    from django.test import override_settings

    with override_settings(XJOBS={"QUEUES": ["other"], "OUTBOX": "auto"}):
        from django_xjobs.run import enqueue

        real_fast_path = enqueue.fast_path
        enqueue.fast_path = lambda alias, row_id: None  # leave the row to the relay
        try:
            with transaction.atomic():
                staged = jobs.ok.enqueue(n=4242)
        finally:
            enqueue.fast_path = real_fast_path
    assert staged.staged and not Job.objects.filter(idempotency_key="ok:4242").exists()
    worker = WorkerProcess("--queues", "default", "--with-relay", "--poll-interval", "100ms")
    try:
        wait_for(
            lambda: Job.objects.filter(idempotency_key="ok:4242", state="done").exists(),
            what="the relayed job to run",
        )
        worker.send(signal.SIGTERM)
        code, _, err = worker.finish()
        assert code == 0, err
    finally:
        worker.kill()
    assert OutboxEntry.objects.get(id=staged.id).published_at is not None
