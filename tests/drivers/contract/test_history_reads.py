"""The driver contract, the reads and writes that find a finished job in the history as in the
jobs table (issue 46): the bulk verbs' filter, a batch's members, the relay's re-publish of a
moved job, ``after=`` on a moved dependency and the erasure of a tenant. Every case runs on the
memory driver AND the PostgreSQL driver through the ``harness`` fixture, asserting the same
answers."""

from __future__ import annotations

import json

from django_xjobs import Batch, inspect_batch, operations
from django_xjobs.drivers.contract import (
    Complete,
    EnqueueRequest,
    Finish,
    StepRecord,
    TenantRows,
)
from django_xjobs.limits.keys import tenant_key
from tests import jobs
from tests.drivers.contract.support import claim

FINISHED = ["done", "failed", "dead", "cancelled"]


def _enqueue(driver, key, *, queue="default", tenant=None, input=None):
    payload = {"n": 1} if input is None else input
    request = EnqueueRequest(
        name="tests.jobs.ok",
        queue=queue,
        input=payload,
        input_json=json.dumps(payload),
        idempotency_key=key,
        max_attempts=3,
        tenant_id=tenant,
    )
    return driver.jobs().enqueue(request).id


def _ended(driver, key, state="dead", **kwargs):
    """A job enqueued, claimed and ended ``state`` (X_TERMINAL its last error)."""
    job_id = _enqueue(driver, key, **kwargs)
    [job] = claim(driver, limit=1, queues=(kwargs.get("queue", "default"),))
    assert job.id == job_id
    error = "X_TERMINAL: the card was declined"
    assert driver.runs().finish(Finish(job.id, job.lease_token, state, error=error))
    return job_id


def _moved(harness) -> None:
    """Every finished job past a minute's grace moved to the history."""
    harness.advance(120)
    harness.driver.history().move_finished(grace=60)
    hot = harness.driver.jobs().prune(older_than=-86400.0, states=FINISHED, dry_run=True)
    assert sum(hot.values()) == 0


def test_hist_09_retry_jobs_finds_and_brings_back_moved_dead_jobs(harness):
    d = harness.driver
    wanted = [_ended(d, f"a{i}", input={"order_id": 4711, "n": i}) for i in range(3)]
    other = _ended(d, "b", input={"order_id": 1})
    done = _ended(d, "c", state="done", input={"order_id": 4711})
    _moved(harness)
    preview = operations.retry_jobs(state="dead", input={"order_id": 4711}, dry_run=True)
    assert preview["matched"] == 3
    answer = operations.retry_jobs(state="dead", input={"order_id": 4711})
    assert (answer["matched"], answer["changed"], answer["skipped"]) == (3, 3, 0)
    for job_id in wanted:
        row = harness.row(job_id)
        assert (row.state, row.attempt) == ("ready", 0)
    assert harness.row(other).state == "dead" and harness.row(done).state == "done"
    # back in the jobs table: a claim takes them
    assert {j.id for j in claim(d, limit=10)} == set(wanted)


def test_hist_09_a_moved_job_whose_key_a_live_job_holds_stays_in_the_history(harness):
    d = harness.driver
    dead = _ended(d, "same")
    _moved(harness)
    live = _enqueue(d, "same")
    answer = operations.retry_jobs(state="dead")
    assert (answer["matched"], answer["changed"], answer["skipped"]) == (1, 0, 1)
    assert harness.row(dead).state == "dead"
    assert harness.row(live).state == "ready"
    assert [r.id for r in d.reads().dead_letters()] == [dead]


def test_bulk_26_a_batch_of_moved_and_unmoved_jobs_sharing_a_key_retries_the_first(harness):
    # one batch: a moved job, and a later job of the same key still in the jobs table, and one
    # of another key; the first of the two sharing a key (the moved one, the lower id) runs
    # again, the other is skipped, as when every job of the batch sits in the same table
    d = harness.driver
    moved = _ended(d, "same")
    _moved(harness)
    later = _ended(d, "same")
    other = _ended(d, "other")
    assert moved < later
    answer = operations.retry_jobs(state="dead")
    assert (answer["matched"], answer["changed"], answer["skipped"]) == (3, 2, 1)
    assert harness.row(moved).state == "ready"
    assert harness.row(later).state == "dead"
    assert harness.row(other).state == "ready"
    assert {j.id for j in claim(d, limit=10)} == {moved, other}


def test_hist_09_requeue_jobs_runs_moved_jobs_again_on_another_queue(harness):
    d = harness.driver
    dead = _ended(d, "x", queue="emails")
    _moved(harness)
    answer = operations.requeue_jobs({"queue": "emails", "state": ["dead"]}, queue="default")
    assert answer["changed"] == 1
    row = harness.row(dead)
    assert (row.state, row.queue) == ("ready", "default")


def test_hist_10_delete_jobs_deletes_moved_jobs_in_the_history(harness):
    d = harness.driver
    gone = [_ended(d, f"a{i}") for i in range(2)]
    kept = _ended(d, "b", state="failed")
    _moved(harness)
    assert operations.delete_jobs(state=["dead"], dry_run=True)["matched"] == 2
    answer = operations.delete_jobs(state=["dead"])
    assert (answer["matched"], answer["changed"]) == (2, 2)
    assert [harness.row(i) for i in gone] == [None, None]
    assert d.reads().dead_letters() == []
    assert harness.row(kept).state == "failed"
    assert operations.delete_jobs(state=["dead"])["matched"] == 0


def test_hist_09_cancel_jobs_never_matches_a_moved_job(harness):
    d = harness.driver
    _ended(d, "a")
    live = _enqueue(d, "b")
    _moved(harness)
    answer = operations.cancel_jobs(queue="default")
    assert (answer["matched"], answer["changed"]) == (1, 1)
    assert harness.row(live).state == "cancelled"


def test_erase_04_05_a_tenants_moved_jobs_and_fair_share_key_are_erased(harness):
    d = harness.driver
    moved = [_ended(d, f"a{i}", tenant="acme") for i in range(3)]
    theirs = _ended(d, "b", tenant="other")
    harness.advance(120)
    d.history().move_finished(grace=60)
    live = _enqueue(d, "c", tenant="acme")
    d.limits().pause_key(tenant_key("acme"), 60)  # the row FAIR_SHARE="tenant" keeps
    d.limits().pause_key(tenant_key("other"), 60)
    store = d.jobs().tenants()
    assert store.count("acme") == TenantRows(jobs=4, limit_keys=1)
    first = store.erase("acme", batch=2, running=False)
    assert (first.jobs, first.limit_keys) == (3, 1)  # a batch of each table: 1 live, 2 moved
    while store.erase("acme", batch=2, running=False).total:
        pass
    assert store.count("acme") == TenantRows()
    assert [harness.row(i) for i in [*moved, live]] == [None] * 4
    assert harness.row(theirs).state == "dead"
    assert store.count("other") == TenantRows(jobs=1, limit_keys=1)
    assert [k[0] for k in d.limits().key_usage()] == [tenant_key("other")]


def test_erase_04_the_steps_of_a_moved_job_go_with_it(harness):
    d = harness.driver
    job_id = _enqueue(d, "stepped", tenant="acme")
    [run] = claim(d, limit=1)
    d.steps().put(
        StepRecord(run_id=run.run_id, name="a", status="completed", output={"x": 1}),
        job_id=run.id,
        lease_token=run.lease_token,
    )
    assert d.runs().finish(Finish(run.id, run.lease_token, "dead", error="X_TERMINAL: no"))
    _moved(harness)
    assert d.jobs().tenants().count("acme") == TenantRows(jobs=1, steps=1)
    answer = operations.erase_tenant("acme", by="ops:alice")
    assert (answer["jobs"], answer["steps"]) == (1, 1)
    assert harness.row(job_id) is None and d.steps().list(run.run_id) == []


def test_hist_11_a_batch_whose_members_moved_lists_them_and_completes(harness):
    """Its counts live on the batch row, so its progress and callbacks hold; its member list
    and ``inspect_batch`` find the moved members, and a retry of one brings the batch back to
    waiting for it."""
    d = harness.driver
    batch = Batch(on_complete=jobs.batch_report)
    batch.add(jobs.ok, n=1)
    batch.add(jobs.ok, n=2)
    first, second = claim(d, limit=2)
    d.runs().complete([Complete(first.id, first.lease_token)])
    assert d.runs().finish(Finish(second.id, second.lease_token, "dead"))
    _moved(harness)
    assert d.batches().members(batch.id) == sorted([first.id, second.id])
    report = inspect_batch(batch.id)
    assert [(m["id"], m["state"]) for m in report["members"]] == sorted(
        [(str(first.id), "done"), (str(second.id), "dead")]
    )
    assert (report["done"], report["dead"], report["pending"]) == (1, 1, 0)
    d.jobs().requeue(second.id, from_step=None, force=False)  # back from the history
    assert d.batches().get(batch.id).pending == 1
    [again] = claim(d)
    d.runs().complete([Complete(again.id, again.lease_token)])
    batch.close()
    [callback] = d.reads().list_jobs(name="tests.jobs.batch_report")
    assert callback.input["batch"]["done"] == 2
