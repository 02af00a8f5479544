"""The transactional outbox (SPEC §9 OUTBOX-*, SE-28..36): staging with the caller's
transaction, the on-commit fast path, the store contract on memory and PostgreSQL, the relay."""

from __future__ import annotations

import json
import math
import threading
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.test import override_settings
from django.utils import timezone

from django_xjobs.drivers.contract import EnqueueRequest, EnqueueResult
from django_xjobs.drivers.memory.outbox import MemoryOutboxStore
from django_xjobs.drivers.postgres.outbox import STATEMENTS, PostgresOutboxStore
from django_xjobs.errors import InputInvalidError, InvariantError, OutboxNoTxError
from django_xjobs.models import Job, OutboxEntry
from django_xjobs.operations import inspect_outbox
from django_xjobs.outbox.relay import Relay
from django_xjobs.run.publish import publish_batch
from django_xjobs.testing import run_until_idle
from tests import jobs

AUTO = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "auto"}


def jobs_for(key_prefix: str) -> list[Job]:
    return list(Job.objects.filter(idempotency_key__startswith=key_prefix))


# --- staging with the caller's transaction (transaction=True: real commits) ------------------


@pytest.fixture
def auto(transactional_db):
    with override_settings(XJOBS=AUTO):
        yield


def test_outbox_03_a_rollback_leaves_no_job_ever(auto):
    """SPEC OUTBOX-05: a rollback takes the staged rows with it."""
    with pytest.raises(RuntimeError), transaction.atomic():
        result = jobs.ok.enqueue(n=1)
        assert result.staged and result.run_id is None
        raise RuntimeError("the order could not be saved")
    assert not Job.objects.exists() and not OutboxEntry.objects.exists()
    assert Relay(store=PostgresOutboxStore("default")).tick() == 0


def test_outbox_01_03_a_commit_makes_exactly_one_job_at_once(auto):
    """SPEC OUTBOX-05, OUTBOX-20: staged inside ``atomic()``, published by the fast path right
    after the commit."""
    with transaction.atomic():
        result = jobs.ok.enqueue(n=2)
        assert not Job.objects.exists()  # SPEC OUTBOX-01: nothing in x_jobs before commit
    [job] = Job.objects.all()  # the on-commit fast path published it
    assert (job.name, job.input, job.idempotency_key) == ("tests.jobs.ok", {"n": 2}, "ok:2")
    entry = OutboxEntry.objects.get(id=result.id)
    assert entry.published_at is not None and entry.claimed_by.startswith("commit-")
    assert Relay(store=PostgresOutboxStore("default")).tick() == 0  # nothing left to publish


def test_a_savepoint_rollback_takes_its_staged_row_with_it(auto):
    with transaction.atomic():
        jobs.ok.enqueue(n=1)
        with pytest.raises(RuntimeError), transaction.atomic():
            jobs.ok.enqueue(n=2)
            raise RuntimeError("inner failure")
        jobs.ok.enqueue(n=3)
    assert sorted(j.input["n"] for j in Job.objects.all()) == [1, 3]
    assert OutboxEntry.objects.count() == 2


def test_outbox_04_required_refuses_an_enqueue_outside_atomic(transactional_db):
    with override_settings(XJOBS={**AUTO, "OUTBOX": "required"}):
        with pytest.raises(OutboxNoTxError) as caught:
            jobs.ok.enqueue(n=1)
        assert caught.value.code == "X_OUTBOX_NO_TX" and "atomic" in caught.value.hint
        assert not Job.objects.exists()
        direct = jobs.ok.using(outbox=False).enqueue(n=1)  # the escape hatch
        assert not direct.staged and Job.objects.filter(id=direct.id).exists()


def test_auto_publishes_directly_outside_atomic(auto):
    """SPEC OUTBOX-20: outside ``atomic()`` the outbox is not used."""
    result = jobs.ok.enqueue(n=1)
    assert not result.staged and Job.objects.filter(id=result.id).exists()
    assert not OutboxEntry.objects.exists()


def test_off_never_stages(transactional_db):
    with override_settings(XJOBS={**AUTO, "OUTBOX": "off"}), transaction.atomic():
        result = jobs.ok.enqueue(n=1)
        assert not result.staged and Job.objects.filter(id=result.id).exists()
    assert not OutboxEntry.objects.exists()


def test_outbox_false_publishes_directly_inside_atomic(auto):
    with transaction.atomic():
        result = jobs.ok.using(outbox=False).enqueue(n=1)
        assert not result.staged
    assert not OutboxEntry.objects.exists()


def test_bad_input_inside_atomic_is_refused_before_staging_and_the_caller_goes_on(auto):
    with transaction.atomic():
        with pytest.raises(InputInvalidError):
            jobs.ok.enqueue(n=math.nan)
        jobs.ok.enqueue(n=5)  # the caller's transaction is unharmed
    assert [j.input for j in Job.objects.all()] == [{"n": 5}]
    assert OutboxEntry.objects.count() == 1


def test_on_conflict_error_cannot_be_staged(auto):
    with transaction.atomic(), pytest.raises(InvariantError) as caught:
        jobs.ok.using(on_conflict="error").enqueue(n=1)
    assert "outbox=False" in caught.value.hint


def test_a_failed_fast_path_never_reaches_the_caller_and_the_relay_publishes(
    auto, caplog, monkeypatch
):
    # the publish at commit inserts the jobs in its one statement: break that statement
    """SPEC OUTBOX-05: the relay publishes what the fast path missed."""
    monkeypatch.setitem(STATEMENTS, "publish_taken", "SELECT * FROM x_jobs_gone")
    with transaction.atomic():
        result = jobs.ok.enqueue(n=7)
    monkeypatch.undo()
    assert not Job.objects.exists()
    entry = OutboxEntry.objects.get(id=result.id)
    assert entry.published_at is None and entry.claimed_by is None  # released at once
    assert "xjobs.outbox.publish_failed" in caplog.text
    assert Relay(store=PostgresOutboxStore("default")).tick() == 1
    assert Job.objects.filter(idempotency_key="ok:7").count() == 1


def test_out_of_order_commits_still_publish_the_earlier_staged_row(auto, monkeypatch):
    """T1 stages first and commits last; T2 stages later and commits first."""
    from django_xjobs.run import enqueue

    monkeypatch.setattr(enqueue, "fast_path", lambda alias, row_id: None)  # leave it to the relay
    staged, release, done = threading.Event(), threading.Event(), threading.Event()

    def slow_transaction():
        try:
            with transaction.atomic():
                jobs.ok.enqueue(n=1)
                staged.set()
                release.wait(20)
        finally:
            connections.close_all()
            done.set()

    thread = threading.Thread(target=slow_transaction)
    thread.start()
    try:
        assert staged.wait(20)
        with transaction.atomic():
            jobs.ok.enqueue(n=2)
        relay = Relay(store=PostgresOutboxStore("default"))
        assert relay.tick() == 1  # only the committed row is visible
        release.set()
        assert done.wait(20)
        assert relay.tick() == 1  # the earlier-staged row, committed late, still goes
    finally:
        release.set()
        thread.join(20)
    assert sorted(j.input["n"] for j in Job.objects.all()) == [1, 2]
    first, second = OutboxEntry.objects.order_by("staged_at", "id")
    assert first.input == {"n": 1} and first.published_at > second.published_at


@pytest.mark.django_db(transaction=True, databases=["default", "orders"])
def test_the_outbox_across_databases_stages_on_the_callers_alias():
    """SPEC OUTBOX-20."""
    settings = {**AUTO, "OUTBOX_DATABASES": ["default", "orders"]}
    with override_settings(XJOBS=settings):
        with pytest.raises(RuntimeError), transaction.atomic(using="orders"):
            jobs.ok.enqueue(n=1)
            raise RuntimeError("rolled back on the orders database")
        with transaction.atomic(using="orders"):
            result = jobs.ok.enqueue(n=2)
            assert result.staged
            assert OutboxEntry.objects.using("orders").filter(id=result.id).exists()
            assert not OutboxEntry.objects.using("default").exists()
    assert [j.input for j in Job.objects.using("default").all()] == [{"n": 2}]
    assert not Job.objects.using("orders").exists()


def test_publish_event_follows_the_required_rule(transactional_db):
    from django_xjobs.steps.events import publish_event

    with override_settings(XJOBS={**AUTO, "OUTBOX": "required"}):
        with pytest.raises(OutboxNoTxError):
            publish_event("order.paid", {"id": 1})
        with transaction.atomic():
            publish_event("order.paid", {"id": 1})


def test_run_until_idle_publishes_rows_staged_in_the_test_transaction(db):
    with override_settings(XJOBS=AUTO):
        assert jobs.ok.enqueue(n=3).staged  # the test transaction never commits
        [run] = run_until_idle()
    assert run.outcome == "completed" and run.job.input == {"n": 3}


# --- the store contract: memory and PostgreSQL -------------------------------------------------


class Outbox:
    def __init__(self, store):
        self.store = store

    def stage(self, n, key=None):
        payload = {"n": n}
        return self.store.stage(
            EnqueueRequest(
                name="tests.jobs.ok",
                queue="default",
                input=payload,
                input_json=json.dumps(payload),
                idempotency_key=key or f"ok:{n}",
                max_attempts=3,
            )
        )

    def advance(self, seconds):
        if isinstance(self.store, MemoryOutboxStore):
            self.store.shift(seconds)
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE x_outbox SET staged_at = staged_at - %(d)s, claimed_at = claimed_at - %(d)s",
                {"d": timedelta(seconds=seconds)},
            )


@pytest.fixture(params=["memory", "postgres"])
def outbox(request, db):
    store = (
        MemoryOutboxStore(claim_lease=30)
        if request.param == "memory"
        else PostgresOutboxStore("default", 30)
    )
    return Outbox(store)


@pytest.fixture(params=["memory", "postgres"])
def live_outbox(request, transactional_db):
    """Both stores with committed rows, for relays that run on threads of their own."""
    store = (
        MemoryOutboxStore(claim_lease=30)
        if request.param == "memory"
        else PostgresOutboxStore("default", 30)
    )
    return Outbox(store)


def test_outbox_06_07_a_claim_is_a_lease(outbox):
    ids = [outbox.stage(n) for n in range(3)]
    rows = outbox.store.claim(10, "relay-a")
    assert [r.id for r in rows] == ids and {r.claimed_by for r in rows} == {"relay-a"}
    assert outbox.store.claim(10, "relay-b") == []  # held inside the lease
    outbox.advance(30)
    again = outbox.store.claim(10, "relay-b")
    assert [r.id for r in again] == ids and {r.claimed_by for r in again} == {"relay-b"}


def test_outbox_08_se_31_ties_on_staged_at_go_in_id_order(outbox):
    ids = [outbox.stage(n) for n in range(5)]
    assert [r.id for r in outbox.store.claim(2, "a")] == ids[:2]
    assert [r.id for r in outbox.store.claim(10, "b")] == ids[2:]


def test_outbox_11_release_only_for_the_holder(outbox):
    """SPEC OUTBOX-13: both stores fence a release on the claimer's id."""
    ids = [outbox.stage(n) for n in range(2)]
    outbox.store.claim(10, "relay-a")
    assert outbox.store.release(ids, "relay-stale") == 0
    assert outbox.store.claim(10, "relay-b") == []
    assert outbox.store.release([], "relay-a") == 0  # no statement for nothing
    assert outbox.store.release(ids, "relay-a") == 2
    assert len(outbox.store.claim(10, "relay-b")) == 2


def test_outbox_12_se_30_mark_published_only_for_the_holder_and_only_once(outbox):
    """SPEC OUTBOX-13: both stores fence a mark on the claimer's id."""
    row_id = outbox.stage(1)
    outbox.store.claim(10, "relay-a")
    outbox.advance(30)
    outbox.store.claim(10, "relay-b")
    assert outbox.store.mark_published(row_id, "relay-a") is False  # a stale relay retires nothing
    assert outbox.store.mark_published(row_id, "relay-b") is True
    assert outbox.store.mark_published(row_id, "relay-b") is False
    assert outbox.store.release([row_id], "relay-b") == 0
    assert outbox.store.pending() == (0, 0.0)


def test_outbox_16_19_pending_counts_claimed_rows_and_published_rows_leave_it(outbox):
    a = outbox.stage(1)
    outbox.stage(2)
    outbox.store.claim(1, "relay-a")
    outbox.advance(5)
    count, oldest = outbox.store.pending()
    assert count == 2 and oldest >= 5
    outbox.store.mark_published(a, "relay-a")
    assert outbox.store.pending()[0] == 1


def test_outbox_16_se_36_the_memory_store_deletes_a_row_once_it_is_published():
    """SPEC SE-36: the memory outbox keeps no payload it has published: the rows it holds are
    the unpublished ones."""
    store = MemoryOutboxStore(claim_lease=30)
    outbox = Outbox(store)
    ids = [outbox.stage(n) for n in range(3)]
    store.claim(10, "relay-a")
    for row_id in ids[:2]:
        assert store.mark_published(row_id, "relay-a")
    assert list(store._rows) == [ids[2]]
    assert set(store._claimed_at) <= {ids[2]}


def test_outbox_16_postgres_keeps_published_rows_until_retention(db):
    store = PostgresOutboxStore("default")
    row_id = Outbox(store).stage(1)
    store.claim(1, "r")
    store.mark_published(row_id, "r")
    assert OutboxEntry.objects.get(id=row_id).published_at is not None
    assert store.prune(3600) == 0
    OutboxEntry.objects.filter(id=row_id).update(
        published_at=OutboxEntry.objects.get(id=row_id).published_at - timedelta(hours=2)
    )
    assert store.prune(3600) == 1


@pytest.mark.parametrize("lease", [0, -1, math.inf, math.nan, 0.5, "soon"])
@pytest.mark.parametrize("kind", ["memory", "postgres"])
def test_outbox_14_se_32_a_bad_claim_lease_is_refused_when_the_store_is_built(lease, kind):
    build = (
        MemoryOutboxStore
        if kind == "memory"
        else (lambda claim_lease: PostgresOutboxStore("default", claim_lease))
    )
    with pytest.raises(Exception) as caught:
        build(claim_lease=lease)
    assert caught.value.code in ("X_INVARIANT", "X_DURATION_INVALID")
    assert "30" in caught.value.hint


def test_outbox_09_10_se_35_a_failed_publish_stops_the_batch_and_releases_the_rest(outbox, caplog):
    ids = [outbox.stage(n) for n in range(4)]
    rows = outbox.store.claim(10, "relay-a")

    class FailsOnThird:
        name = "memory"
        database = None  # not a database: nothing to share a transaction with

        def __init__(self):
            self.enqueued = []

        def jobs(self):
            return self

        def enqueue(self, request):
            if request.input["n"] == 2:
                raise ConnectionError("down")
            self.enqueued.append(request.input["n"])
            return EnqueueResult(id=request.id, run_id=None)

    driver = FailsOnThird()
    assert publish_batch(outbox.store, driver, rows, "relay-a") == 2
    assert driver.enqueued == [0, 1]  # n=3 never overtakes the failed n=2
    assert "xjobs.outbox.publish_failed" in caplog.text and "remaining=2" in caplog.text
    again = outbox.store.claim(10, "relay-b")  # released at once, not after the lease
    assert [r.id for r in again] == ids[2:]


def test_outbox_19_a_republish_is_deduped_only_while_the_job_is_live(harness):
    store = MemoryOutboxStore(claim_lease=30)
    box = Outbox(store)
    box.stage(1)
    box.stage(1)  # the same key staged twice (a retried request)
    rows = store.claim(10, "r")
    assert publish_batch(store, harness.driver, rows, "r") == 2
    assert len(harness.driver.reads().list_jobs()) == 1  # the live job absorbed the repeat
    [job] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id="w"
    )
    from django_xjobs.drivers.contract import Complete

    harness.driver.runs().complete([Complete(job.id, job.lease_token)])
    box.stage(1)
    publish_batch(store, harness.driver, store.claim(10, "r"), "r")
    assert len(harness.driver.reads().list_jobs()) == 2  # at-least-once once the first finished


def test_outbox_17_se_34_a_failing_pass_is_logged_and_the_loop_goes_on(live_outbox, caplog):
    outbox = live_outbox
    outbox.stage(1)
    real_claim = outbox.store.claim
    calls = []

    def flaky_claim(limit, token):
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("claim failed")
        rows = real_claim(limit, token)
        if len(calls) >= 2:
            relay.stop_soon.set()
        return rows

    outbox.store.claim = flaky_claim
    published = []

    class Driver:
        name = "test"
        database = None  # not a database: nothing to share a transaction with

        def jobs(self):
            return self

        def enqueue(self, request):
            published.append(request.input)

    relay = Relay(store=outbox.store, driver=Driver(), interval=0.01)
    relay.stop_soon = threading.Event()
    thread = threading.Thread(target=relay.run)
    thread.start()
    assert relay.stop_soon.wait(10)
    relay.stop()
    thread.join(10)
    assert published == [{"n": 1}]
    assert "xjobs.outbox.tick_failed" in caplog.text


def test_outbox_18_se_33_stop_waits_for_the_pass_in_flight(live_outbox):
    outbox = live_outbox
    row_id = outbox.stage(1)
    entered, release = threading.Event(), threading.Event()

    class SlowDriver:
        name = "test"
        database = None  # not a database: nothing to share a transaction with

        def jobs(self):
            return self

        def enqueue(self, request):
            entered.set()
            release.wait(10)
            return EnqueueResult(id=request.id, run_id=None)

    relay = Relay(store=outbox.store, driver=SlowDriver())
    ticking = threading.Thread(target=lambda: (relay.tick(), connections.close_all()))
    ticking.start()
    assert entered.wait(10)
    stopped = threading.Event()
    stopper = threading.Thread(target=lambda: (relay.stop(), stopped.set()))
    stopper.start()
    assert not stopped.wait(0.2)  # still publishing: stop() must not return
    release.set()
    assert stopped.wait(10)
    ticking.join(10)
    assert outbox.store.mark_published(row_id, relay.relay_id) is False  # already marked
    assert outbox.store.pending()[0] == 0
    relay.stop()  # a second stop returns at once


def test_inspect_outbox_reports_pending_and_the_oldest_age(db):
    box = Outbox(PostgresOutboxStore("default"))
    box.stage(1)
    box.advance(12)
    report = inspect_outbox()
    assert report["pending"] == 1 and report["oldest_pending_seconds"] >= 12
    assert report["databases"]["default"]["pending"] == 1


def test_outbox_02_a_staged_row_carries_the_whole_request(auto):
    with transaction.atomic():
        handle = jobs.important.using(delay="1h", tenant_id="acme", enqueued_by="user:9")
        result = handle.enqueue(n=4)
        entry = OutboxEntry.objects.get(id=result.id)
        assert (entry.job, entry.queue, entry.input, entry.idempotency_key) == (
            "tests.jobs.important",
            "default",
            {"n": 4},
            "prio:4",
        )
        assert (entry.max_attempts, entry.priority, entry.tenant_id, entry.enqueued_by) == (
            3,
            5,
            "acme",
            "user:9",
        )
        assert timedelta(minutes=59) < entry.run_at - entry.staged_at <= timedelta(hours=1)
    job = Job.objects.get(idempotency_key="prio:4")
    assert (job.state, job.priority, job.tenant_id) == ("delayed", 5, "acme")


def test_outbox_02_a_staged_row_carries_the_expiry_and_the_replace(auto):
    """Each staging statement (the first row's, the later rows', enqueue_many's) writes them
    (SPEC JCTL-08)."""
    at = timezone.now() + timedelta(hours=2)
    with transaction.atomic():
        first = jobs.expiring.enqueue(token="o2")
        given = jobs.expiring.using(expires_at=at).enqueue(token="o2-at")
        many = jobs.debounced.enqueue_many([{"doc": 21}, {"doc": 22}])
        ids = [first.id, given.id, *(r.id for r in many)]
        rows = OutboxEntry.objects.in_bulk(ids)
        controls = [(rows[i].expires_at, rows[i].expires_in, rows[i].replace) for i in ids]
    assert controls == [
        (None, 600.0, False),
        (at, None, False),
        (None, None, True),
        (None, None, True),
    ]


def test_outbox_15_each_relay_has_its_own_id(db):
    a, b = (Relay(store=PostgresOutboxStore("default")) for _ in range(2))
    assert a.relay_id.startswith("relay-") and a.relay_id != b.relay_id
