"""The driver contract, bulk actions by filter (issue 45): retry, cancel, delete and requeue of
every job a filter admits, a batch at a time, fenced as the single-job verbs are, and the audit
trail each action leaves. Every case runs on the memory driver AND the PostgreSQL driver
through the ``harness`` fixture, asserting the same answers."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from django_xjobs import operations
from django_xjobs.drivers.contract import (
    BulkAction,
    Complete,
    EnqueueRequest,
    Finish,
    OperatorRecord,
)
from django_xjobs.errors import BulkDeleteLiveError, QueueUnknownError
from django_xjobs.ids import uuid7
from django_xjobs.operations import bulk, job_filter
from tests.drivers.contract.support import claim


def _enqueue(driver, key, *, queue="default", tenant=None, input=None, name="tests.jobs.ok"):
    payload = {"n": 1} if input is None else input
    request = EnqueueRequest(
        name=name,
        queue=queue,
        input=payload,
        input_json=json.dumps(payload),
        idempotency_key=key,
        max_attempts=3,
        tenant_id=tenant,
    )
    return driver.jobs().enqueue(request).id


def _dead(driver, key, *, error="X_TERMINAL: the card was declined", state="dead", **kwargs):
    """A job enqueued, claimed and ended ``state`` with ``error`` as its last_error."""
    job_id = _enqueue(driver, key, **kwargs)
    [job] = claim(driver, limit=1, queues=(kwargs.get("queue", "default"),))
    assert job.id == job_id
    stop = "terminal" if state == "dead" else "attempts-exhausted"
    assert driver.runs().finish(
        Finish(job.id, job.lease_token, state, stop_reason=stop, error=error)
    )
    return job_id


def test_bulk_06_retry_jobs_runs_again_the_dead_jobs_the_filter_admits(harness):
    d = harness.driver
    wanted = [_dead(d, f"a{i}", queue="emails", input={"order_id": 4711, "n": i}) for i in range(3)]
    other_order = _dead(d, "b", queue="emails", input={"order_id": 1, "n": 9})
    other_code = _dead(d, "c", queue="emails", input={"order_id": 4711}, error="ValueError: x")
    answer = operations.retry_jobs(
        state="dead", queue="emails", error_code="X_TERMINAL", input={"order_id": 4711}
    )
    assert (answer.matched, answer.changed, answer.skipped, answer.note) == (3, 3, 0, None)
    for job_id in wanted:
        row = harness.row(job_id)
        assert (row.state, row.attempt, row.stop_reason) == ("ready", 0, None)
        assert row.last_error == "X_TERMINAL: the card was declined"  # kept as history
    assert harness.row(other_order).state == "dead"
    assert harness.row(other_code).state == "dead"
    # the error code is the whole code before the colon: a prefix of it matches nothing
    assert operations.retry_jobs(error_code="Value").matched == 0
    assert operations.retry_jobs(error_code="ValueError").changed == 1


def test_bulk_06_a_dead_job_whose_key_a_live_job_holds_is_skipped(harness):
    d = harness.driver
    first = _dead(d, "same")
    second = _dead(d, "other")
    _enqueue(d, "same")  # a live job holds the first one's key now
    answer = operations.retry_jobs(state="dead")
    assert (answer.matched, answer.changed, answer.skipped) == (2, 1, 1)
    assert harness.row(first).state == "dead"
    assert harness.row(second).state == "ready"


def test_bulk_05_cancel_jobs_cancels_waiting_and_running_jobs_of_one_tenant(harness):
    d = harness.driver
    running = _enqueue(d, "r", tenant="acme")
    [job] = claim(d, limit=1)
    assert job.id == running
    waiting = _enqueue(d, "w", tenant="acme")
    other = _enqueue(d, "o", tenant="globex")
    answer = operations.cancel_jobs(tenant_id="acme", reason="partner down")
    assert (answer.matched, answer.changed) == (2, 2)
    for job_id in (running, waiting):
        row = harness.row(job_id)
        assert (row.state, row.stop_reason, row.last_error) == (
            "cancelled",
            "cancelled",
            "partner down",
        )
    assert harness.row(other).state == "ready"
    # the running one's holder is stopped: its token no longer fences anything (CANCEL-05)
    assert harness.row(running).lease_token is None
    assert d.runs().complete([Complete(job.id, job.lease_token)]) == set()


def test_bulk_08_delete_jobs_deletes_finished_jobs_only(harness):
    d = harness.driver
    gone = _dead(d, "a", error="X_TERMINAL: x")
    kept_failed = _dead(d, "b", state="failed")
    live = _enqueue(d, "c")
    answer = operations.delete_jobs(state="dead")
    assert (answer.matched, answer.changed) == (1, 1)
    assert harness.row(gone) is None
    assert harness.row(kept_failed).state == "failed"
    for refused in ({}, {"state": ["dead", "ready"]}, {"state": "running"}):
        with pytest.raises(BulkDeleteLiveError) as caught:
            operations.delete_jobs(refused)
        assert caught.value.code == "X_BULK_DELETE_LIVE"
    assert harness.row(live).state == "ready"


def test_bulk_07_requeue_jobs_moves_waiting_jobs_and_reruns_dead_ones_there(harness):
    d = harness.driver
    dead = _dead(d, "d", queue="emails")
    later = d.jobs().enqueue(
        EnqueueRequest(
            name="tests.jobs.ok",
            queue="emails",
            input={"n": 2},
            input_json='{"n": 2}',
            idempotency_key="later",
            max_attempts=3,
            delay=3600.0,
        )
    )
    run_at = harness.row(later.id).run_at
    stays = _enqueue(d, "x", queue="default")
    answer = operations.requeue_jobs({"queue": "emails"}, queue="other")
    assert (answer.matched, answer.changed, answer.skipped) == (2, 2, 0)
    moved = harness.row(later.id)
    assert (moved.queue, moved.state, moved.run_at) == ("other", "delayed", run_at)
    again = harness.row(dead)
    assert (again.queue, again.state, again.attempt) == ("other", "ready", 0)
    assert harness.row(stays).queue == "default"
    with pytest.raises(QueueUnknownError) as caught:
        operations.requeue_jobs({"queue": "other"}, queue="nowhere-known")
    assert caught.value.code == "X_QUEUE_UNKNOWN"
    assert harness.row(later.id).queue == "other"


def test_bulk_02_a_dry_run_counts_and_shows_a_sample_and_changes_nothing(harness):
    d = harness.driver
    ids = [_dead(d, f"k{i}") for i in range(7)]
    before = len(operations.inspect_audit())
    answer = operations.retry_jobs(state="dead", dry_run=True)
    assert (answer.dry_run, answer.matched, answer.changed, answer.skipped) == (True, 7, 0, 0)
    assert len(answer.sample) == bulk.SAMPLE
    assert {s.id for s in answer.sample} <= {str(i) for i in ids}
    assert all(s.state == "dead" for s in answer.sample)
    assert {harness.row(i).state for i in ids} == {"dead"}
    assert len(operations.inspect_audit()) == before  # nothing done, nothing recorded
    doc = answer.to_json()
    assert doc["filter"] == {"state": ["dead"]} and doc["sample"][0]["state"] == "dead"


def test_bulk_09_a_filter_that_matches_nothing_does_nothing_and_says_so(harness):
    d = harness.driver
    job = _dead(d, "a")
    answer = operations.retry_jobs(queue="nowhere")
    assert (answer.matched, answer.changed, answer.batches) == (0, 0, 0)
    assert answer.note == "no job matches the filter: nothing to do"
    mismatch = operations.cancel_jobs(state="dead")  # cancel never acts on a dead job
    assert mismatch.matched == 0 and "admit none" in mismatch.note
    assert harness.row(job).state == "dead"


def test_bulk_03_a_bulk_action_goes_a_bounded_batch_at_a_time(harness, monkeypatch):
    d = harness.driver
    ids = [_dead(d, f"k{i}") for i in range(5)]
    monkeypatch.setattr(bulk, "BATCH", 2)
    seen = []
    store = d.jobs().bulk()
    act = store.act

    def recording(action, batch, where):
        seen.append(len(batch))
        return act(action, batch, where)

    monkeypatch.setattr(store, "act", recording)
    answer = operations.retry_jobs(state="dead")
    assert seen == [2, 2, 1]
    assert (answer.batches, answer.matched, answer.changed) == (3, 5, 5)
    assert {harness.row(i).state for i in ids} == {"ready"}


def test_bulk_20_the_walk_reads_several_batches_of_ids_at_once_and_acts_a_batch_at_a_time(
    harness, monkeypatch
):
    d = harness.driver
    ids = [_dead(d, f"k{i}") for i in range(13)]
    monkeypatch.setattr(bulk, "BATCH", 2)
    monkeypatch.setattr(bulk, "WALK", 6)
    store = d.jobs().bulk()
    match, act = store.match, store.act
    reads, acts = [], []

    def reading(where, *, states, after, limit):
        found = match(where, states=states, after=after, limit=limit)
        reads.append((after, limit, len(found)))
        return found

    def acting(action, batch, where):
        acts.append(len(batch))
        return act(action, batch, where)

    monkeypatch.setattr(store, "match", reading)
    monkeypatch.setattr(store, "act", acting)
    answer = operations.retry_jobs(state="dead")
    # three reads of up to six ids, each past the last id the one before read; no statement
    # acts on more than a batch
    assert [(limit, n) for _, limit, n in reads] == [(6, 6), (6, 6), (6, 1)]
    assert reads[0][0] is None and reads[1][0] == sorted(ids)[5] and reads[2][0] == sorted(ids)[11]
    assert acts == [2, 2, 2, 2, 2, 2, 1]
    assert (answer.batches, answer.matched, answer.changed) == (7, 13, 13)
    assert {harness.row(i).state for i in ids} == {"ready"}


def test_audit_01_a_bulk_action_cut_short_keeps_what_its_committed_batches_did(
    harness, monkeypatch
):
    d = harness.driver
    ids = [_dead(d, f"k{i}") for i in range(5)]
    monkeypatch.setattr(bulk, "BATCH", 2)
    store = d.jobs().bulk()
    act, calls = store.act, []

    def failing(action, batch, where):
        calls.append(batch)
        if len(calls) == 2:
            raise ConnectionError("the database went away")
        return act(action, batch, where)

    monkeypatch.setattr(store, "act", failing)
    with pytest.raises(ConnectionError):
        operations.retry_jobs(state="dead", by="ops:alice")
    assert sorted(harness.row(i).state for i in ids) == ["dead", "dead", "dead", "ready", "ready"]
    [entry] = operations.inspect_audit(verb="retry_jobs")
    assert (entry.actor, entry.matched, entry.changed, entry.skipped) == ("ops:alice", 2, 2, 0)


def test_bulk_04_a_job_that_moved_on_between_the_walk_and_the_action_is_skipped(harness):
    d = harness.driver
    settles = _enqueue(d, "settles")
    [job] = claim(d, limit=1)
    stays = _enqueue(d, "stays")
    where = job_filter()
    store = d.jobs().bulk()
    ids = store.match(where, states=bulk.VERB_STATES["cancel"], after=None, limit=10)
    assert set(ids) == {settles, stays}
    # the running job completes between the walk and the cancel of its batch
    assert d.runs().complete([Complete(job.id, job.lease_token)]) == {job.id}
    changed, parked = store.act(
        BulkAction(verb="cancel", states=bulk.VERB_STATES["cancel"], reason="x"), ids, where
    )
    assert (changed, parked) == (1, [])
    assert harness.row(settles).state == "done"
    assert harness.row(stays).state == "cancelled"
    # a retry walked over a dead job that an operator retried meanwhile leaves it alone
    dead = _dead(d, "dead")
    dead_filter = job_filter(state="dead")
    ids = store.match(dead_filter, states=bulk.VERB_STATES["retry"], after=None, limit=10)
    assert ids == [dead]
    operations.retry_job(dead)
    action = BulkAction(verb="retry", states=bulk.VERB_STATES["retry"])
    assert store.act(action, ids, dead_filter) == (0, [])


def test_bulk_01_the_filter_reads_shown_states_and_time_ranges(harness):
    d = harness.driver
    due = _enqueue(d, "due")
    later = d.jobs().enqueue(
        EnqueueRequest(
            name="tests.jobs.ok",
            queue="default",
            input={"n": 2},
            input_json='{"n": 2}',
            idempotency_key="later",
            max_attempts=3,
            delay=3600.0,
        )
    )
    now = d.steps().now()
    assert operations.cancel_jobs(state="delayed", dry_run=True).matched == 1
    before = operations.cancel_jobs(created_before=now + timedelta(seconds=60), dry_run=True)
    assert before.matched == 2
    after = operations.cancel_jobs(created_after=now + timedelta(seconds=60), dry_run=True)
    assert after.matched == 0
    answer = operations.cancel_jobs(state="ready")
    assert answer.changed == 1
    assert harness.row(due).state == "cancelled"
    assert harness.row(later.id).state in ("ready", "delayed")


def test_audit_01_every_operator_action_is_recorded_with_who_and_what(harness):
    d = harness.driver
    one = _dead(d, "one")
    _dead(d, "two")
    operations.retry_job(one, by="ops:alice")
    operations.cancel_job(one, reason="not now")
    operations.retry_jobs(state="dead", by="ops:bob")
    operations.pause_queue("emails", by="ops:carol")
    trail = operations.inspect_audit(limit=10)
    assert [(a.verb, a.actor) for a in trail] == [
        ("pause_queue", "ops:carol"),
        ("retry_jobs", "ops:bob"),
        ("cancel_job", "api"),
        ("retry_job", "ops:alice"),
    ]
    bulk_entry = trail[1]
    assert bulk_entry.filter == {"state": ["dead"]}
    assert (bulk_entry.matched, bulk_entry.changed, bulk_entry.skipped) == (1, 1, 0)
    assert trail[2].job_id == str(one) and trail[2].reason == "not now"
    assert trail[0].target == "emails"
    assert [a.verb for a in operations.inspect_audit(verb="retry_job")] == ["retry_job"]


def test_audit_02_the_trail_reads_newest_first_and_by_verb(harness):
    for queue in ("a", "b", "c"):
        operations.pause_queue(queue)
    operations.resume_queue("a")
    assert [(e.verb, e.target) for e in operations.inspect_audit(limit=3)] == [
        ("resume_queue", "a"),
        ("pause_queue", "c"),
        ("pause_queue", "b"),
    ]
    assert [e.target for e in operations.inspect_audit(verb="resume_queue")] == ["a"]
    assert operations.inspect_audit()[0].to_json()["at"] is not None


def test_audit_03_the_stored_filter_and_reason_pass_the_redaction_rules(harness, settings):
    settings.XJOBS = {**settings.XJOBS, "REDACT_KEYS": ["card"]}
    d = harness.driver
    _dead(d, "a", input={"card": "4242", "order_id": 1})
    operations.retry_jobs(input={"card": "4242"})
    [entry] = operations.inspect_audit(limit=1)
    assert entry.filter == {"input": {"card": "[redacted]"}}
    assert entry.changed == 1


def test_audit_04_the_trail_is_pruned_after_its_retention(harness):
    d = harness.driver
    store = d.jobs().audit()
    store.record(OperatorRecord(id=uuid7(), at=d.steps().now(), actor="api", verb="x"))
    assert operations.prune_audit("1h") == 0
    harness.advance(7200)  # the trail's times move with the jobs'
    store.record(OperatorRecord(id=uuid7(), at=d.steps().now(), actor="api", verb="y"))
    assert operations.prune_audit("1h") == 1
    assert [r.verb for r in store.recent()] == ["y"]


def test_bulk_11_list_jobs_filters_by_input_and_error_code_alike(harness):
    d = harness.driver
    order = _dead(d, "a", input={"order_id": 4711, "lines": [{"sku": "x", "n": 2}]})
    other = _dead(d, "b", input={"order_id": 4711}, error="ValueError: bad")
    _enqueue(d, "c", input={"order_id": 5})
    by_input = operations.list_jobs(input={"order_id": 4711})
    assert {j.id for j in by_input} == {str(order), str(other)}
    nested = operations.list_jobs(input='{"lines": [{"sku": "x"}]}')
    assert [j.id for j in nested] == [str(order)]
    assert [j.id for j in operations.list_jobs(error_code="X_TERMINAL")] == [str(order)]
    assert operations.list_jobs(error_code="X_TERMINAL", input={"order_id": 5}) == []


def test_bulk_13_a_filter_of_ids_admits_those_jobs_only(harness):
    d = harness.driver
    ids = [_dead(d, f"k{i}") for i in range(4)]
    live = _enqueue(d, "live")
    answer = operations.retry_jobs(ids=[ids[0], str(ids[2]), live], state="dead")
    assert (answer.matched, answer.changed) == (2, 2)
    assert [harness.row(i).state for i in ids] == ["ready", "dead", "ready", "dead"]
    assert harness.row(live).state == "ready"
    assert operations.cancel_jobs(ids=[live, ids[1]]).changed == 1  # ids[1] is dead: not live
    assert (harness.row(live).state, harness.row(ids[1]).state) == ("cancelled", "dead")
