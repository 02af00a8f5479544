"""``JobHandle.enqueue_many`` (issue 13 item 3) and the batched publish of everything one
transaction staged (item 4), on both drivers: one result per input in order, dedupe kept per
element, a bad element refused by index before anything is written."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from asgiref.sync import async_to_sync
from django.db import connection, connections, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from django_xjobs.drivers.postgres import PostgresDriver
from django_xjobs.errors import (
    InputInvalidError,
    JobDuplicateError,
    QueueUnknownError,
    ValueRefusedError,
)
from django_xjobs.models import OutboxEntry
from tests import jobs

AUTO = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "auto"}


@pytest.fixture
def live(live_harness):
    with override_settings(XJOBS=AUTO):
        yield live_harness


@contextmanager
def own_connection() -> Iterator[psycopg.Connection]:
    wrapper = connections.create_connection("default")
    wrapper.ensure_connection()
    wrapper.connection.autocommit = True
    try:
        yield wrapper.connection
    finally:
        wrapper.close()


def wake_ups(listener: psycopg.Connection, other: psycopg.Connection) -> list[str]:
    """What ``listener`` heard so far: a marker sent from ``other`` now is delivered after it."""
    other.execute("NOTIFY xjobs, 'end-marker'")
    payloads = []
    for note in listener.notifies(timeout=10):
        if note.payload == "end-marker":
            break
        payloads.append(note.payload)
    return payloads


def inputs(harness) -> dict[object, object]:
    return {job.id: job.input for job in harness.driver.reads().list_jobs(limit=1000)}


# --- direct (outside atomic, or outbox=False): one write ------------------------------------


def test_one_result_per_input_in_order(harness):
    results = jobs.ok.enqueue_many([{"n": 1}, {"n": 2}, {"n": 3}])
    assert [r.deduped for r in results] == [False, False, False]
    assert len({r.id for r in results}) == 3 and all(r.run_id for r in results)
    assert [inputs(harness)[r.id] for r in results] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert jobs.ok.enqueue_many([]) == []


def test_a_key_repeated_in_the_batch_collapses_into_its_first_element(harness):
    first, second, other = jobs.ok.enqueue_many([{"n": 1}, {"n": 1}, {"n": 2}])
    assert not first.deduped and not other.deduped
    assert second.deduped and (second.id, second.run_id) == (first.id, first.run_id)
    assert len(harness.driver.reads().list_jobs()) == 2


def test_a_live_key_dedupes_to_the_live_job(harness):
    live = jobs.ok.enqueue(n=5)
    fresh, again = jobs.ok.enqueue_many([{"n": 6}, {"n": 5}])
    assert not fresh.deduped
    assert again.deduped and (again.id, again.run_id) == (live.id, live.run_id)


def test_on_conflict_error_names_the_element(harness):
    live = jobs.ok.enqueue(n=5)
    with pytest.raises(JobDuplicateError) as caught:
        jobs.ok.using(on_conflict="error").enqueue_many([{"n": 6}, {"n": 5}])
    assert "inputs[1]" in caught.value.message and str(live.id) in caught.value.message


def test_options_apply_to_every_element(harness):
    results = jobs.ok.using(queue="other", delay="1h", priority=7).enqueue_many(
        [{"n": 1}, {"n": 2}]
    )
    rows = [harness.row(r.id) for r in results]
    assert {(r.queue, r.state, r.priority) for r in rows} == {("other", "delayed", 7)}


@pytest.mark.parametrize(
    ("bad", "error", "says"),
    [
        ({"n": math.nan}, InputInvalidError, "inputs[2]: job 'tests.jobs.ok': inputs.n"),
        ({"nope": 1}, InputInvalidError, "inputs[2]: job 'tests.jobs.ok'"),
        ([1], InputInvalidError, "inputs[2] is list, not a dict"),
    ],
)
def test_a_bad_element_is_refused_by_index_and_nothing_is_written(harness, bad, error, says):
    with pytest.raises(error) as caught:
        jobs.ok.enqueue_many([{"n": 1}, {"n": 2}, bad, {"n": 4}])
    assert says in str(caught.value)
    assert harness.driver.reads().list_jobs() == []


def test_an_unknown_queue_is_refused_before_anything_is_written(harness):
    with pytest.raises(QueueUnknownError, match="no job declares queue 'nowhere'"):
        jobs.ok.using(queue="nowhere").enqueue_many([{"n": 1}])
    assert harness.driver.reads().list_jobs() == []


def test_a_dict_instead_of_a_list_is_refused(harness):
    with pytest.raises(InputInvalidError, match="takes a list of input dicts"):
        jobs.ok.enqueue_many({"n": 1})


def test_the_async_twin_answers_the_same(live_harness):
    results = async_to_sync(jobs.ok.aenqueue_many)([{"n": 1}, {"n": 1}])
    assert [r.deduped for r in results] == [False, True]


@pytest.mark.django_db(transaction=True)
def test_one_insert_statement_and_one_wake_up_per_queue():
    driver = PostgresDriver("default")
    with own_connection() as listener, own_connection() as other:
        listener.execute("LISTEN xjobs")
        with CaptureQueriesContext(connection) as queries:
            driver_results = jobs.ok.enqueue_many([{"n": n} for n in range(50)])
        assert len(queries) == 1  # one multi-row statement for 50 jobs
        payloads = wake_ups(listener, other)
    assert payloads == ["default"]
    assert len({r.id for r in driver_results}) == 50
    assert len(driver.reads().list_jobs(limit=100)) == 50


@pytest.mark.django_db(transaction=True)
def test_a_batch_sends_its_shared_options_once_and_a_mixed_batch_row_by_row():
    """One job's batch shares name, queue and options: they go as single values. A batch of many
    jobs (a relay's) sends every column by row. Both insert the same rows."""
    driver = PostgresDriver("default")
    shared = [jobs.ok.using(queue="other", priority=3).build_request({"n": n}) for n in (1, 2)]
    mixed = [
        jobs.ok.using(queue="other", priority=3).build_request({"n": 3}),
        jobs.takes_kwargs.using(priority=-2, delay="1h").build_request({"a": 1}),
    ]
    with CaptureQueriesContext(connection) as queries:
        results = driver.jobs().enqueue_many(shared) + driver.jobs().enqueue_many(mixed)
    assert [
        "unnest(%(ids)s::uuid[], %(run_ids)s::uuid[], %(keys)s::text[]" in q["sql"] for q in queries
    ] == [True, False]
    rows = [driver.reads().get_job(r.id) for r in results]
    assert [(r.name, r.queue, r.priority, r.state, r.input) for r in rows] == [
        ("tests.jobs.ok", "other", 3, "ready", {"n": 1}),
        ("tests.jobs.ok", "other", 3, "ready", {"n": 2}),
        ("tests.jobs.ok", "other", 3, "ready", {"n": 3}),
        ("tests.jobs.takes_kwargs", "default", -2, "delayed", {"a": 1}),
    ]


# --- inside atomic(): staged in one statement, published at commit together -----------------


def test_inside_atomic_the_batch_is_staged_and_published_at_commit_under_its_ids(live):
    with transaction.atomic():
        results = jobs.ok.enqueue_many([{"n": 1}, {"n": 2}, {"n": 1}])
        assert all(r.staged and r.run_id is None and r.deduped is None for r in results)
        assert live.driver.reads().list_jobs() == []
    assert [inputs(live)[r.id] for r in results[:2]] == [{"n": 1}, {"n": 2}]
    assert len(live.driver.reads().list_jobs()) == 2  # the repeated key collapsed at publish
    assert live.driver.outbox("default").pending()[0] == 0


def test_a_rolled_back_batch_leaves_nothing(live):
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.ok.enqueue_many([{"n": 1}, {"n": 2}])
        raise RuntimeError("the order could not be saved")
    assert live.driver.reads().list_jobs() == []
    assert live.driver.outbox("default").pending()[0] == 0


def test_every_enqueue_of_a_transaction_is_published_at_its_commit(live):
    with transaction.atomic():
        results = [jobs.ok.enqueue(n=n) for n in range(30)]
    assert sorted(inputs(live)[r.id]["n"] for r in results) == list(range(30))
    assert live.driver.outbox("default").pending()[0] == 0


def test_a_savepoint_rolled_back_takes_only_its_own_enqueues(live):
    with transaction.atomic():
        kept = jobs.ok.enqueue(n=1)
        with pytest.raises(RuntimeError), transaction.atomic():
            jobs.ok.enqueue(n=2)
            raise RuntimeError("inner")
        later = jobs.ok.enqueue(n=3)
    assert sorted(i["n"] for i in inputs(live).values()) == [1, 3]
    assert {kept.id, later.id} == set(inputs(live))


def test_the_first_enqueue_rolled_back_with_its_savepoint_still_publishes_the_rest(live):
    with transaction.atomic():
        with pytest.raises(RuntimeError), transaction.atomic():
            jobs.ok.enqueue(n=1)
            raise RuntimeError("inner")
        later = jobs.ok.enqueue(n=2)
    assert list(inputs(live)) == [later.id]  # published at commit, no relay involved
    assert live.driver.outbox("default").pending()[0] == 0


@pytest.mark.django_db(transaction=True)
def test_the_publish_at_commit_costs_the_same_statements_for_2_and_for_40_enqueues():
    """One transaction of a few multi-row statements, not a claim, an insert and a mark per
    staged job (issue 13)."""

    def publish_statements(count: int) -> int:
        with CaptureQueriesContext(connection) as queries, transaction.atomic():
            for n in range(count):
                jobs.ok.enqueue(n=n + 1000 * count)
            staged = len(queries)
        assert OutboxEntry.objects.filter(published_at__isnull=True).count() == 0
        return len(queries) - staged

    with override_settings(XJOBS=AUTO):
        assert publish_statements(2) == publish_statements(40) <= 6


@pytest.mark.django_db(transaction=True)
def test_a_failed_publish_at_commit_leaves_every_row_of_the_chunk_to_the_relay(monkeypatch, caplog):
    """The take, the inserts and the marks are one transaction: a failure rolls the take back
    too, so the relay publishes every row at once, each exactly once (SPEC OUTBOX-10/12)."""
    from django_xjobs.drivers.postgres.outbox import STATEMENTS, PostgresOutboxStore
    from django_xjobs.models import Job
    from django_xjobs.outbox.relay import Relay

    with override_settings(XJOBS=AUTO):
        # the publish inserts the jobs in its one statement: break that statement
        monkeypatch.setitem(STATEMENTS, "publish_taken", "SELECT * FROM x_jobs_gone")
        with transaction.atomic():
            results = [jobs.ok.enqueue(n=n) for n in range(3)]
        monkeypatch.undo()
        assert not Job.objects.exists()
        assert "xjobs.outbox.publish_failed" in caplog.text
        entries = OutboxEntry.objects.filter(id__in=[r.id for r in results])
        assert [(e.published_at, e.claimed_by) for e in entries] == [(None, None)] * 3
        assert Relay(store=PostgresOutboxStore("default")).tick() == 3
    assert sorted(Job.objects.values_list("id", flat=True)) == sorted(r.id for r in results)


def test_batch_ids_are_time_ordered_uuid7s_each_unique():
    from django_xjobs.ids import uuid7, uuid7_many

    before = uuid7()
    batch = uuid7_many(5000)
    after = uuid7()
    assert [before, *batch, after] == sorted({before, *batch, after})  # increasing, unique
    assert {u.version for u in batch} == {7}


# --- the publish at commit on the jobs' database: one statement takes, marks and inserts ------


@pytest.mark.django_db(transaction=True)
def test_the_publish_at_commit_inserts_ready_and_delayed_jobs_and_wakes_each_queue_once():
    from django_xjobs.models import Job

    with override_settings(XJOBS=AUTO), own_connection() as listener, own_connection() as other:
        listener.execute("LISTEN xjobs")
        with transaction.atomic():
            now = [jobs.ok.enqueue(n=n).id for n in range(3)]
            later = jobs.ok.using(delay="10m").enqueue(n=9).id
            elsewhere = jobs.on_other_queue.enqueue(n=1).id
        payloads = wake_ups(listener, other)
    assert sorted(payloads) == ["default", "other"]
    states = dict(Job.objects.values_list("id", "state"))
    assert states == {**dict.fromkeys(now, "ready"), later: "delayed", elsewhere: "ready"}
    assert OutboxEntry.objects.filter(published_at__isnull=True).count() == 0
    assert all(e.job_id == e.id for e in OutboxEntry.objects.all())


@pytest.mark.django_db(transaction=True)
def test_a_commit_whose_rows_collapse_publishes_the_rest_and_resolves_the_duplicates():
    """A staged row whose insert is suppressed (a live job, or an earlier row of the same
    transaction, holds its key) is published through the driver, which records what it
    collapsed into (SPEC OUTBOX-12); the others go in with the one statement."""
    from django_xjobs.models import Job
    from django_xjobs.operations import inspect_job

    live_job = jobs.ok.enqueue(n=1)  # outside atomic: published at once
    with override_settings(XJOBS=AUTO), transaction.atomic():
        onto_live = jobs.ok.enqueue(n=1)
        first = jobs.ok.enqueue(n=2)
        again = jobs.ok.enqueue(n=2)
        fresh = jobs.ok.enqueue(n=3)
    assert set(Job.objects.values_list("id", flat=True)) == {live_job.id, first.id, fresh.id}
    assert inspect_job(onto_live.id)["id"] == str(live_job.id)
    assert inspect_job(again.id)["id"] == str(first.id)
    assert OutboxEntry.objects.filter(published_at__isnull=True).count() == 0


# --- a long direct call: written a chunk at a time, in one transaction -----------------------


@pytest.fixture
def chunks_of_two(monkeypatch):
    """A "long" call is one of more than two inputs: each chunk of two is sent as it is made."""
    monkeypatch.setattr("django_xjobs.run.enqueue.STREAM_CHUNK", 2)


def inserts(queries: CaptureQueriesContext) -> int:
    return sum("INSERT INTO x_jobs" in q["sql"] for q in queries)


def test_a_long_call_answers_as_a_short_one_across_its_chunks(live_harness, chunks_of_two):
    """SPEC ENQ-06 across chunks: a key an earlier chunk took dedupes to that job, a live key
    to the live job; one result per input, in order, on both drivers."""
    live = jobs.ok.enqueue(n=9)
    results = jobs.ok.enqueue_many([{"n": n} for n in (1, 2, 1, 9, 3, 2)])
    assert [r.deduped for r in results] == [False, False, True, True, False, True]
    assert (results[2].id, results[3].id, results[5].id) == (
        results[0].id,
        live.id,
        results[1].id,
    )
    assert [inputs(live_harness)[r.id] for r in results] == [{"n": n} for n in (1, 2, 1, 9, 3, 2)]
    assert len(live_harness.driver.reads().list_jobs()) == 4


@pytest.mark.parametrize("where", [0, 4])
def test_a_bad_element_of_a_long_call_leaves_nothing_written(live_harness, chunks_of_two, where):
    """The chunks sent before the bad element's are rolled back with it (autocommit, so the
    call's own transaction is all that holds them)."""
    given: list[object] = [{"n": n} for n in range(6)]
    given[where] = {"n": math.nan}
    with pytest.raises(InputInvalidError, match=rf"inputs\[{where}\]: job 'tests.jobs.ok'"):
        jobs.ok.enqueue_many(given)
    assert live_harness.driver.reads().list_jobs() == []


def test_a_long_calls_duplicate_is_named_by_its_index(live_harness, chunks_of_two):
    live = jobs.ok.enqueue(n=5)
    with pytest.raises(JobDuplicateError) as caught:
        jobs.ok.using(on_conflict="error").enqueue_many([{"n": n} for n in (1, 2, 3, 5)])
    assert "inputs[3]" in caught.value.message and str(live.id) in caught.value.message


@pytest.mark.django_db(transaction=True)
def test_a_long_call_sends_a_statement_per_chunk_and_wakes_each_queue_once(chunks_of_two):
    """On a fresh session too: the chunks after the first are sent before the first's statement
    is known to be prepared, and each must find it by name, not prepare it again."""
    connection.close()
    with own_connection() as listener, own_connection() as other:
        listener.execute("LISTEN xjobs")
        with CaptureQueriesContext(connection) as queries:
            results = jobs.ok.enqueue_many([{"n": n} for n in range(5)])
        payloads = wake_ups(listener, other)
    assert inserts(queries) == 3  # chunks of 2, 2 and 1
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%INSERT INTO x_jobs%"],
        )
        assert cursor.fetchone() == (1,)  # prepared once, then run by name
    assert payloads == ["default"]  # one transaction: the chunks' wake-ups are one
    assert (
        len(PostgresDriver("default").reads().list_jobs(limit=10))
        == len({r.id for r in results})
        == 5
    )


@pytest.mark.django_db(transaction=True)
def test_a_long_call_in_the_callers_atomic_takes_back_only_its_own_rows(chunks_of_two):
    """outbox=False inside the caller's transaction: the call is a savepoint, so a bad element
    takes back the chunks already sent and leaves the caller's transaction usable."""
    direct = jobs.ok.using(outbox=False)
    with transaction.atomic():
        kept = direct.enqueue(n=100)
        with pytest.raises(InputInvalidError, match=r"inputs\[3\]"):
            direct.enqueue_many([{"n": 1}, {"n": 2}, {"n": 3}, {"nope": 4}])
        later = direct.enqueue_many([{"n": n} for n in (4, 5, 6)])
    assert {job.id for job in PostgresDriver("default").reads().list_jobs(limit=10)} == {
        kept.id,
        *(r.id for r in later),
    }  # nothing of n 1 and 2, sent before the bad element was reached


@pytest.mark.django_db(transaction=True)
def test_a_statement_the_server_refuses_in_a_later_chunk_is_raised_and_nothing_is_written(
    chunks_of_two,
):
    """An error of a chunk already on the wire is raised as any statement's is (SQLSTATE 22 is
    a refused value), and the chunks before it are rolled back."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION refuse_n3() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.input->>'n' = '3' THEN RAISE EXCEPTION 'n 3 refused' "
            "USING ERRCODE = '22023'; END IF; RETURN NEW; END $$; "
            "CREATE TRIGGER refuse_n3 BEFORE INSERT ON x_jobs FOR EACH ROW "
            "EXECUTE FUNCTION refuse_n3()"
        )
    try:
        with pytest.raises(ValueRefusedError, match="SQLSTATE 22023"):
            jobs.ok.enqueue_many([{"n": n} for n in range(6)])
        assert PostgresDriver("default").reads().list_jobs() == []
        again = jobs.ok.enqueue_many([{"n": n} for n in (4, 5, 6)])  # the connection is usable
        assert len(PostgresDriver("default").reads().list_jobs()) == len(again) == 3
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER refuse_n3 ON x_jobs; DROP FUNCTION refuse_n3()")


@pytest.mark.django_db(transaction=True)
def test_without_prepared_statements_a_long_call_is_one_statement(chunks_of_two):
    """Behind a transaction-mode pooler statements are not sent ahead: the chunks are made
    first and written by one statement, as a short call is."""
    with (
        override_settings(XJOBS={"PREPARED_STATEMENTS": False}),
        CaptureQueriesContext(connection) as queries,
    ):
        results = jobs.ok.enqueue_many([{"n": n} for n in (1, 2, 1, 3, 4)])
    assert inserts(queries) == 1
    assert [r.deduped for r in results] == [False, False, True, False, False]


def test_a_long_call_inside_atomic_is_staged_whole(live, chunks_of_two):
    with transaction.atomic():
        results = jobs.ok.enqueue_many([{"n": n} for n in range(5)])
        assert all(r.staged for r in results) and live.driver.reads().list_jobs() == []
    assert sorted(inputs(live)[r.id]["n"] for r in results) == list(range(5))
