"""Batches (issue 32) on both drivers: members counted in the settle that ends each one, the
callbacks queued by the last, exactly once (docs/concepts/workflows.md)."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import override_settings

from django_xjobs import Batch, BatchClosedError, BatchNotFoundError, inspect_batch
from django_xjobs.drivers.contract import Complete, Finish
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.drivers.contract.support import claim


def _callbacks(driver, name="tests.jobs.batch_report"):
    return [r for r in driver.reads().list_jobs(name=name)]


def test_batch_callback_is_queued_by_the_settle_of_its_last_member(harness):
    """SPEC BATCH-01, BATCH-07: the settle of the last member queues the callback with the input
    and the counts; a settle its fence refuses counts nothing."""
    driver = harness.driver
    with Batch(on_complete=jobs.batch_report, input={"tag": "t"}) as batch:
        jobs.ok.enqueue(n=1)
        batch.add(jobs.ok, n=2)
    record = driver.batches().get(batch.id)
    assert (record.total, record.pending, record.closed_at is not None) == (2, 2, True)
    first, second = claim(driver, limit=2)
    assert driver.runs().complete([Complete(first.id, first.lease_token, "{}")]) == {first.id}
    assert _callbacks(driver) == []  # one member still running: nothing queued
    assert driver.runs().complete([Complete(second.id, second.lease_token, "{}")]) == {second.id}
    [callback] = _callbacks(driver)
    assert callback.id == batch.callbacks[0].id and callback.state == "ready"
    assert callback.input == {
        "tag": "t",
        "batch": {
            "id": str(batch.id),
            "total": 2,
            "done": 2,
            "dead": 0,
            "failed": 0,
            "cancelled": 0,
        },
    }
    # a second settle of the same run is refused by its fence and counts nothing
    assert driver.runs().complete([Complete(second.id, second.lease_token, "{}")]) == set()
    assert driver.batches().get(batch.id).pending == 0
    assert len(_callbacks(driver)) == 1


def test_batch_counts_every_final_state_and_picks_success_or_failure(harness):
    """SPEC BATCH-01: ``on_complete`` whatever the ends, ``on_success`` only when all are done,
    ``on_failure`` when one is not."""
    driver = harness.driver
    batch = Batch(
        on_complete=jobs.batch_report,
        on_success=jobs.batch_report.using(queue="other"),
        on_failure=jobs.batch_report.using(priority=5),
        input={},
    )
    with batch:
        for n in range(3):
            jobs.ok.enqueue(n=n)
    done, dead, cancelled = claim(driver, limit=3)
    driver.runs().complete([Complete(done.id, done.lease_token)])
    assert driver.runs().finish(Finish(dead.id, dead.lease_token, "dead", stop_reason="terminal"))
    driver.jobs().cancel(cancelled.id, "stop")
    record = driver.batches().get(batch.id)
    assert (record.done, record.dead, record.cancelled, record.pending) == (1, 1, 1, 0)
    assert record.completed_at is not None
    queued = {r.id for r in driver.reads().list_jobs() if r.state == "ready"}
    kinds = {c.kind for c in batch.callbacks if c.id in queued}
    assert kinds == {"complete", "failure"}


def test_batch_closed_after_its_members_ended_completes_at_close(harness):
    """SPEC BATCH-04."""
    driver = harness.driver
    batch = Batch(on_complete=jobs.batch_report)
    batch.add(jobs.ok, n=1)
    run_until_idle(queues=["default"])
    assert _callbacks(driver) == []  # open: more members may join
    assert driver.batches().get(batch.id).pending == 0
    batch.close()
    [callback] = _callbacks(driver)
    assert callback.input["batch"]["done"] == 1
    batch.close()  # a second close changes nothing
    assert len(_callbacks(driver)) == 1


def test_an_empty_batch_completes_when_it_closes(harness):
    """SPEC BATCH-04: an empty batch completes at once with ``total: 0``."""
    with Batch(on_complete=jobs.batch_report) as batch:
        pass
    [callback] = _callbacks(harness.driver)
    assert callback.input["batch"]["total"] == 0
    assert inspect_batch(batch.id)["state"] == "completed"


def test_no_member_joins_a_closed_batch(harness):
    """SPEC BATCH-04: ``X_BATCH_CLOSED``, and nothing added."""
    with Batch(on_complete=jobs.batch_report) as batch:
        jobs.ok.enqueue(n=1)
    with pytest.raises(BatchClosedError) as caught:
        batch.add(jobs.ok, n=2)
    assert caught.value.code == "X_BATCH_CLOSED"
    with pytest.raises(BatchClosedError):
        harness.driver.batches().add(batch.id, [jobs.ok.build_request({"n": 3})])
    assert inspect_batch(batch.id)["total"] == 1


def test_a_deduped_enqueue_is_no_member(harness):
    """SPEC BATCH-05."""
    live = jobs.ok.enqueue(n=1)
    with Batch(on_complete=jobs.batch_report) as batch:
        again = jobs.ok.enqueue(n=1)
        fresh = jobs.ok.enqueue(n=2)
    assert again.deduped and again.id == live.id and not fresh.deduped
    trace = inspect_batch(batch.id)
    assert trace["total"] == 1 and [m["id"] for m in trace["members"]] == [str(fresh.id)]
    assert harness.driver.reads().get_job(fresh.id).batch_id == batch.id
    assert harness.driver.reads().get_job(live.id).batch_id is None


def test_the_callback_runs_with_the_counts(harness):
    """SPEC BATCH-01: the callback runs with the batch's input and counts."""
    with Batch(on_complete=jobs.batch_report, input={"tag": "x"}) as batch:
        jobs.ok.enqueue(n=1)
        jobs.fails.using(queue="default").enqueue(n=1)
    executions = run_until_idle(queues=["default"])
    for _ in range(3):  # the failing member's retries, each moved into the past
        harness.advance(10)
        executions += run_until_idle(queues=["default"])
    [report] = [e for e in executions if e.job.name == "tests.jobs.batch_report"]
    row = harness.driver.reads().get_job(report.job.id)
    assert row.result["tag"] == "x" and (row.result["done"], row.result["dead"]) == (1, 1)
    assert inspect_batch(batch.id)["state"] == "completed"


def test_inspect_batch_refuses_an_unknown_id(harness):
    """SPEC BATCH-09."""
    with pytest.raises(BatchNotFoundError):
        inspect_batch("0197a3c2-0000-7000-8000-000000000000")
    with pytest.raises(BatchNotFoundError):
        inspect_batch("nope")


def test_a_callback_that_cannot_take_the_counts_is_refused_at_once(harness):
    """SPEC BATCH-02."""
    from django_xjobs import InputInvalidError

    with pytest.raises(InputInvalidError):
        Batch(on_complete=jobs.ok)  # ok() takes no `batch`
    with pytest.raises(Exception, match="may not name 'batch'"):
        Batch(on_complete=jobs.batch_report, input={"batch": 1})


def test_a_retried_member_is_counted_once(harness):
    """An operator's retry of a dead member takes its count back: the batch waits for it again
    and counts its next end once (not dead and then done: 2 ends of 1 member). SPEC BATCH-03."""
    driver = harness.driver
    with Batch(on_complete=jobs.batch_report) as batch:
        jobs.ok.enqueue(n=1)
        jobs.ok.enqueue(n=2)
    first, second = claim(driver, limit=2)
    assert driver.runs().finish(Finish(first.id, first.lease_token, "dead"))
    assert driver.batches().get(batch.id).dead == 1
    driver.jobs().requeue(first.id, from_step=None, force=False)
    record = driver.batches().get(batch.id)
    assert (record.pending, record.dead) == (2, 0)
    driver.runs().complete([Complete(second.id, second.lease_token)])
    assert _callbacks(driver) == []  # the retried member is still to end
    [again] = claim(driver)
    driver.runs().complete([Complete(again.id, again.lease_token)])
    [callback] = _callbacks(driver)
    assert callback.input["batch"]["done"] == 2 and callback.input["batch"]["dead"] == 0


@pytest.fixture
def outbox_on(live_harness):
    with override_settings(XJOBS={"QUEUES": ["other"], "OUTBOX": "auto"}):
        yield live_harness


def test_a_batch_made_inside_atomic_vanishes_with_a_rollback(outbox_on):
    """SPEC BATCH-06."""
    driver = outbox_on.driver
    with pytest.raises(RuntimeError), transaction.atomic():
        with Batch(on_complete=jobs.batch_report) as batch:
            jobs.ok.enqueue(n=1)
            batch.add(jobs.ok, n=2)
        raise RuntimeError("the import could not be saved")
    assert driver.batches().get(batch.id) is None
    assert driver.reads().list_jobs() == []


def test_a_batch_made_inside_atomic_lands_with_the_commit(outbox_on):
    """SPEC BATCH-06."""
    driver = outbox_on.driver
    with transaction.atomic(), Batch(on_complete=jobs.batch_report) as batch:
        member = jobs.ok.enqueue(n=1)
    record = driver.batches().get(batch.id)
    assert (record.total, record.pending, record.closed_at is not None) == (1, 1, True)
    assert driver.reads().get_job(member.id).batch_id == batch.id
    run_until_idle(queues=["default"])
    assert [r.id for r in _callbacks(driver)] == [batch.callbacks[0].id]


def test_cancelling_a_batch_cancels_its_live_members_and_nothing_above_or_beside(harness):
    """SPEC BATCH-08."""
    from django_xjobs import cancel_batch

    driver = harness.driver
    outsider = jobs.ok.enqueue(n=99)
    with Batch(
        on_complete=jobs.batch_report, on_success=jobs.batch_report.using(priority=5)
    ) as batch:
        for n in range(3):
            jobs.ok.enqueue(n=n)
    done, running, _ = [h for h in claim(driver, limit=4) if h.id != outsider.id]
    driver.runs().complete([Complete(done.id, done.lease_token)])
    answer = cancel_batch(batch.id, reason="import aborted")
    assert answer["cancelled_now"] == 2 and answer["state"] == "completed"
    assert (answer["done"], answer["cancelled"], answer["pending"]) == (1, 2, 0)
    # the running member's late settle is refused by its fence, and counts nothing more
    assert driver.runs().complete([Complete(running.id, running.lease_token)]) == set()
    assert driver.reads().get_job(running.id).last_error == "import aborted"
    assert driver.reads().get_job(outsider.id).state == "running"  # not a member: untouched
    [callback] = _callbacks(driver)  # on_complete only: not every member is done
    assert callback.id == batch.callbacks[0].id
    assert cancel_batch(batch.id)["cancelled_now"] == 0  # a second cancel finds none live


def test_one_ack_counts_members_of_many_batches(harness):
    """A worker acks many runs in one statement: members of different batches are each
    counted in their own batch (the batch rows are locked in one order: no deadlock). SPEC
    BATCH-07."""
    driver = harness.driver
    batches = []
    for b in range(3):
        with Batch(on_complete=jobs.batch_report, input={"tag": str(b)}) as batch:
            jobs.ok.enqueue(n=2 * b)
            jobs.ok.enqueue(n=2 * b + 1)
        batches.append(batch)
    held = claim(driver, limit=6)
    assert len(driver.runs().complete([Complete(h.id, h.lease_token) for h in held])) == 6
    assert [driver.batches().get(b.id).done for b in batches] == [2, 2, 2]
    assert sorted(r.input["tag"] for r in _callbacks(driver)) == ["0", "1", "2"]
