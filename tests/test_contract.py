"""The driver contract (SPEC DRV-04 table, DRV-05 gaps closed): every case runs on the memory
driver AND the PostgreSQL driver through the ``harness`` fixture, asserting the same answers."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from django_xjobs.drivers.contract import (
    Complete,
    EnqueueRequest,
    Finish,
    RetryAt,
    Shed,
    SuspendUntil,
)
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.errors import InvariantError, JobDuplicateError
from tests import jobs

VIS = 30.0


def request(name="tests.jobs.ok", key="k", queue="default", tenant=None, delay=None, priority=0):
    payload = {"n": 1}
    return EnqueueRequest(
        name=name,
        queue=queue,
        input=payload,
        input_json=json.dumps(payload),
        idempotency_key=key,
        max_attempts=3,
        priority=priority,
        delay=delay,
        tenant_id=tenant,
    )


def claim(driver, limit=10, queues=("default",), worker="w1", vis=VIS, lapsed=True):
    return driver.claim(
        queues=list(queues), limit=limit, visibility_timeout=vis, worker_id=worker, lapsed=lapsed
    )


# --- (a) live set and dedupe namespace -------------------------------------------------------


def test_enq_06_live_key_dedupes_to_the_live_row(harness):
    first = jobs.ok.enqueue(n=1)
    again = jobs.ok.enqueue(n=1)
    assert not first.deduped
    assert again.deduped and (again.id, again.run_id) == (first.id, first.run_id)
    assert len(harness.driver.list_jobs()) == 1


@pytest.mark.parametrize("state_change", ["claimed", "suspended"])
def test_enq_06_running_and_suspended_rows_are_live(harness, state_change):
    first = jobs.ok.enqueue(n=1)
    [held] = claim(harness.driver)
    if state_change == "suspended":
        assert harness.driver.suspend(SuspendUntil(held.id, held.lease_token))
    assert jobs.ok.enqueue(n=1).id == first.id


def test_enq_07_on_conflict_error_names_the_live_job(harness):
    first = jobs.ok.enqueue(n=1)
    with pytest.raises(JobDuplicateError) as caught:
        jobs.ok.using(on_conflict="error").enqueue(n=1)
    assert str(first.id) in str(caught.value)
    assert caught.value.code == "X_JOB_DUPLICATE"


def test_enq_08_a_terminal_row_frees_the_key(harness):
    first = jobs.ok.enqueue(n=1)
    [held] = claim(harness.driver)
    assert harness.driver.ack([Complete(held.id, held.lease_token)]) == {held.id}
    second = jobs.ok.enqueue(n=1)
    assert not second.deduped and second.id != first.id


def test_enq_09_se_01_the_namespace_includes_the_job_name(harness):
    a = harness.driver.enqueue(request(name="tests.jobs.ok", key="same"))
    b = harness.driver.enqueue(request(name="tests.jobs.fails", key="same"))
    assert not b.deduped and a.id != b.id


def test_enq_10_se_02_the_namespace_includes_the_tenant(harness):
    a = harness.driver.enqueue(request(tenant="acme", key="same"))
    b = harness.driver.enqueue(request(tenant="globex", key="same"))
    none_1 = harness.driver.enqueue(request(tenant=None, key="same"))
    none_2 = harness.driver.enqueue(request(tenant=None, key="same"))
    assert len({a.id, b.id, none_1.id}) == 3
    assert none_2.deduped and none_2.id == none_1.id


# --- (b) initial state -----------------------------------------------------------------------


def test_enq_05_initial_state_ready_or_delayed(harness):
    now_row = harness.row(jobs.ok.enqueue(n=1).id)
    later_row = harness.row(jobs.ok.using(delay="1h").enqueue(n=2).id)
    assert (now_row.state, now_row.attempt) == ("ready", 0)
    assert (later_row.state, later_row.attempt) == ("delayed", 0)
    assert later_row.run_at - now_row.run_at >= timedelta(minutes=59)
    assert now_row.run_id != later_row.run_id


def test_enq_03_the_row_carries_the_declaration(harness):
    handle = jobs.important.using(enqueued_by="user:7", tenant_id="acme")
    row = harness.row(handle.enqueue(n=3).id)
    assert row.name == "tests.jobs.important"
    assert row.queue == "default"
    assert row.input == {"n": 3}
    assert row.idempotency_key == "prio:3"
    assert row.max_attempts == 3
    assert row.priority == 5
    assert (row.tenant_id, row.enqueued_by) == ("acme", "user:7")


def test_run_at_schedules_at_that_instant(harness):
    when = timezone.now() + timedelta(days=2)
    row = harness.row(jobs.ok.using(run_at=when).enqueue(n=1).id)
    assert row.state == "delayed"
    assert abs((row.run_at - when).total_seconds()) < 0.001


# --- (c) claim: predicate, order, re-claim, attempt + 1 -------------------------------------


def test_state_04_claim_takes_due_rows_in_order_up_to_the_limit(harness):
    ids = [jobs.ok.enqueue(n=i).id for i in range(5)]
    jobs.ok.using(delay="1h").enqueue(n=99)
    first = claim(harness.driver, limit=3)
    assert [j.id for j in first] == ids[:3]
    assert all(j.attempt == 1 for j in first)
    assert [j.id for j in claim(harness.driver, limit=10)] == ids[3:]
    assert claim(harness.driver) == []


def test_claim_prefers_higher_priority(harness):
    low = jobs.ok.enqueue(n=1).id
    high = jobs.important.enqueue(n=1).id
    assert [j.id for j in claim(harness.driver, limit=2)] == [high, low]


def test_claim_only_takes_the_named_queues(harness):
    jobs.on_other_queue.enqueue(n=1)
    assert claim(harness.driver, queues=("default",)) == []
    [job] = claim(harness.driver, queues=("default", "other"))
    assert job.queue == "other"


def test_drv_05_an_empty_queue_list_is_refused_by_both(harness):
    jobs.ok.enqueue(n=1)
    with pytest.raises(InvariantError):
        claim(harness.driver, queues=())


def test_a_delayed_row_is_claimable_once_due(harness):
    jobs.ok.using(delay="10s").enqueue(n=1)
    assert claim(harness.driver) == []
    harness.advance(10)
    assert len(claim(harness.driver)) == 1


def test_claim_marks_the_row_running_with_a_fresh_token(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver, worker="w-7")
    row = harness.row(job.id)
    assert (row.state, row.claimed_by, row.lease_token) == ("running", "w-7", job.lease_token)
    assert row.visible_at is not None


def test_lease_01_t4_a_lapsed_running_row_is_claimed_again_with_a_new_token(harness):
    jobs.ok.enqueue(n=1)
    [first] = claim(harness.driver, vis=5)
    assert claim(harness.driver, worker="w2") == []  # the lease holds
    harness.advance(5)
    [second] = claim(harness.driver, worker="w2")
    assert second.id == first.id
    assert second.attempt == 2
    assert second.lease_token != first.lease_token


# How the first attempt ends before the job is claimed again: the plain claim takes a retried
# or resumed row, claim_lapsed (its waiting half first, then its lapsed half) a lapsed one.
@pytest.mark.parametrize("ending", ["retried", "suspended", "lapsed"])
def test_started_at_is_the_first_claim_and_last_attempted_at_the_latest(harness, ending):
    job_id = jobs.ok.enqueue(n=1).id
    fresh = harness.row(job_id)
    assert (fresh.started_at, fresh.last_attempted_at) == (None, None)
    sweep = ending == "lapsed"
    [job] = claim(harness.driver, vis=5, lapsed=sweep)
    first = harness.row(job_id)
    assert first.started_at is not None
    assert first.last_attempted_at == first.started_at
    assert first.attempted_by == first.claimed_by is not None
    if ending == "retried":
        assert harness.driver.retry(RetryAt(job.id, job.lease_token, delay=60, error="x"))
    elif ending == "suspended":
        assert harness.driver.suspend(SuspendUntil(job.id, job.lease_token, delay=60))
    settled = harness.row(job_id)
    assert (settled.started_at, settled.last_attempted_at) == (first.started_at, first.started_at)
    if ending != "lapsed":  # a settled run lets go of the job, and its worker stays named
        assert (settled.claimed_by, settled.attempted_by) == (None, first.attempted_by)
    harness.advance(60)
    started = harness.row(job_id).started_at  # the first claim, 60 s further in the past
    [again] = claim(harness.driver, worker="w2", lapsed=sweep)
    assert again.id == job_id
    second = harness.row(job_id)
    assert second.started_at == started
    assert second.last_attempted_at > started
    assert second.attempted_by == "w2"


def test_an_operator_retry_clears_the_attempt_times_and_the_next_claim_starts_over(harness):
    job_id = jobs.ok.enqueue(n=1).id
    [job] = claim(harness.driver)
    assert harness.driver.finish(Finish(job.id, job.lease_token, "dead", error="E"))
    harness.advance(60)
    before = harness.row(job_id)
    requeued = harness.driver.requeue(job_id, from_step=None, force=False)
    assert (requeued.started_at, requeued.last_attempted_at, requeued.attempted_by) == (
        None,
        None,
        None,
    )
    assert requeued == harness.row(job_id)
    claim(harness.driver)
    again = harness.row(job_id)
    assert again.started_at == again.last_attempted_at
    assert again.started_at > before.started_at


def test_a_cancel_keeps_the_attempt_times_and_returns_them(harness):
    job_id = jobs.ok.enqueue(n=1).id
    claim(harness.driver)
    claimed = harness.row(job_id)
    cancelled = harness.driver.cancel(job_id, "stop")
    assert cancelled == harness.row(job_id)
    assert (cancelled.started_at, cancelled.last_attempted_at) == (
        claimed.started_at,
        claimed.last_attempted_at,
    )


@pytest.mark.parametrize("final", ["done", "dead", "failed"])
def test_state_04_settled_rows_are_never_claimed(harness, final):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    if final == "done":
        harness.driver.ack([Complete(job.id, job.lease_token)])
    else:
        harness.driver.finish(Finish(job.id, job.lease_token, final))
    harness.advance(3600)
    assert claim(harness.driver) == []


# --- (d) every settle fenced on running and the lease token --------------------------------


def test_ack_stores_the_result_and_clears_the_claim(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    assert harness.driver.ack([Complete(job.id, job.lease_token, '{"x": [1, 2]}')]) == {job.id}
    row = harness.row(job.id)
    assert (row.state, row.result) == ("done", {"x": [1, 2]})
    assert (row.claimed_by, row.visible_at, row.lease_token) == (None, None, None)


def test_ack_settles_a_batch_each_on_its_own_token(harness):
    for i in range(3):
        jobs.ok.enqueue(n=i)
    a, b, c = claim(harness.driver)
    stale = Complete(c.id, uuid.uuid4())
    done = harness.driver.ack([Complete(a.id, a.lease_token), Complete(b.id, b.lease_token), stale])
    assert done == {a.id, b.id}
    assert harness.row(c.id).state == "running"


def test_state_01_q_01_a_lapsed_claim_cannot_settle_its_successors_run(harness):
    jobs.ok.enqueue(n=1)
    [old] = claim(harness.driver, vis=5)
    harness.advance(5)
    [new] = claim(harness.driver, worker="w2")
    assert harness.driver.ack([Complete(old.id, old.lease_token)]) == set()
    assert not harness.driver.finish(Finish(old.id, old.lease_token, "dead", error="x"))
    row = harness.row(new.id)
    assert (row.state, row.lease_token, row.last_error) == ("running", new.lease_token, None)
    assert harness.driver.ack([Complete(new.id, new.lease_token)]) == {new.id}


def test_state_01_se_03_settling_a_row_that_is_not_running_changes_nothing(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    assert harness.driver.retry(RetryAt(job.id, job.lease_token, delay=60, error="first"))
    before = harness.row(job.id)
    assert harness.driver.ack([Complete(job.id, job.lease_token)]) == set()
    assert not harness.driver.retry(RetryAt(job.id, job.lease_token, error="second"))
    after = harness.row(job.id)
    assert (after.state, after.attempt, after.last_error) == (before.state, before.attempt, "first")


def test_drv_01_a_retry_goes_back_to_ready_after_the_delay(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    assert harness.driver.retry(RetryAt(job.id, job.lease_token, delay=60, error="ValueError: x"))
    row = harness.row(job.id)
    assert (row.state, row.attempt, row.last_error) == ("ready", 1, "ValueError: x")
    assert (row.claimed_by, row.visible_at, row.lease_token) == (None, None, None)
    assert claim(harness.driver) == []
    harness.advance(60)
    [again] = claim(harness.driver)
    assert again.attempt == 2


@pytest.mark.parametrize("final", ["dead", "failed"])
def test_drv_01_a_finish_with_a_final_state_ends_the_job(harness, final):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    finish = Finish(job.id, job.lease_token, final, error="E", stop_reason="terminal")
    assert harness.driver.finish(finish)
    row = harness.row(job.id)
    assert (row.state, row.stop_reason, row.last_error) == (final, "terminal", "E")


def test_state_02_a_retry_without_error_keeps_the_previous_one(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    harness.driver.retry(RetryAt(job.id, job.lease_token, error="first"))
    [job] = claim(harness.driver)
    harness.driver.suspend(SuspendUntil(job.id, job.lease_token))
    assert harness.row(job.id).last_error == "first"


# --- (e) the attempt given back, floored at 0 -----------------------------------------------


def test_state_03_a_parked_retry_gives_the_attempt_back(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    assert harness.driver.suspend(SuspendUntil(job.id, job.lease_token, delay=5))
    row = harness.row(job.id)
    assert (row.state, row.attempt) == ("suspended", 0)
    harness.advance(5)
    [again] = claim(harness.driver)
    assert again.attempt == 1


def set_attempt(harness, job_id, attempt):
    """Write a held row's attempt as SQL or an older release could (SPEC STATE-03's attempt 0)."""
    if isinstance(harness.driver, MemoryDriver):
        rows = harness.driver._rows
        rows[job_id] = replace(rows[job_id], attempt=attempt)
        return
    with connection.cursor() as cursor:
        cursor.execute("UPDATE x_jobs SET attempt = %s WHERE id = %s", [attempt, job_id])


@pytest.mark.parametrize(
    "give_back",
    [
        lambda job: SuspendUntil(job.id, job.lease_token, delay=5),
        lambda job: RetryAt(job.id, job.lease_token, delay=5, counts_as_attempt=False),
        lambda job: Shed(job.id, job.lease_token, delay=5),
    ],
    ids=["suspend", "retry-not-counted", "shed"],
)
def test_state_03_se_07_a_retry_at_attempt_0_stays_at_0(harness, give_back):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver)
    set_attempt(harness, job.id, 0)  # held at attempt 0: a row requeued under its holder
    release = give_back(job)
    verb = {SuspendUntil: "suspend", RetryAt: "retry", Shed: "shed"}[type(release)]
    assert getattr(harness.driver, verb)(release)
    assert harness.row(job.id).attempt == 0  # floored, never -1
    harness.advance(5)
    [again] = claim(harness.driver)
    assert again.attempt == 1


# --- (f) heartbeat predicate ----------------------------------------------------------------


def test_lease_02_heartbeat_renews_only_the_holders_lease(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver, vis=5)
    harness.advance(4)
    assert harness.driver.heartbeat(job.id, job.lease_token, 5) is True
    harness.advance(4)
    assert claim(harness.driver, worker="w2") == []  # renewed: 5 s from the heartbeat
    assert harness.driver.heartbeat(job.id, uuid.uuid4(), 5) is False
    assert harness.driver.heartbeat(uuid.uuid4(), job.lease_token, 5) is False


def test_lease_02_heartbeat_after_settle_or_reclaim_is_false(harness):
    jobs.ok.enqueue(n=1)
    jobs.ok.enqueue(n=2)
    a, b = claim(harness.driver, vis=5)
    harness.driver.ack([Complete(a.id, a.lease_token)])
    assert harness.driver.heartbeat(a.id, a.lease_token, 5) is False
    harness.advance(5)
    [b2] = claim(harness.driver, worker="w2")
    assert b2.id == b.id
    assert harness.driver.heartbeat(b.id, b.lease_token, 5) is False
    assert harness.driver.heartbeat(b2.id, b2.lease_token, 5) is True


# --- (h) list newest first, limit after the sort --------------------------------------------


def test_insp_04_se_06_list_is_newest_first_and_limited_after_sorting(harness):
    ids = [jobs.ok.enqueue(n=i).id for i in range(5)]
    assert [r.id for r in harness.driver.list_jobs()] == ids[::-1]
    assert [r.id for r in harness.driver.list_jobs(limit=2)] == ids[:2:-1]
    assert [r.id for r in harness.driver.list_jobs(state="ready", name="tests.jobs.ok")] == ids[
        ::-1
    ]
    assert harness.driver.list_jobs(queue="other") == []


def test_insp_04_list_defaults_to_100_rows(harness):
    for i in range(105):
        jobs.ok.enqueue(n=i)
    assert len(harness.driver.list_jobs()) == 100


# --- (i) dead letters by updated_at, newest first -------------------------------------------


def test_insp_05_dead_letters_newest_first(harness):
    jobs.ok.enqueue(n=1)
    jobs.ok.enqueue(n=2)
    jobs.ok.enqueue(n=3)
    a, b, c = claim(harness.driver)
    harness.driver.finish(Finish(b.id, b.lease_token, "dead"))
    harness.advance(10)
    harness.driver.finish(Finish(a.id, a.lease_token, "dead"))
    harness.driver.ack([Complete(c.id, c.lease_token)])
    assert [r.id for r in harness.driver.dead_letters()] == [a.id, b.id]
    assert [r.id for r in harness.driver.dead_letters(limit=1)] == [a.id]


# --- (j) exclusive stats buckets ------------------------------------------------------------


def test_met_03_q_05_stats_buckets_are_exclusive(harness):
    jobs.ok.enqueue(n=1)  # ready
    jobs.ok.using(delay="1h").enqueue(n=2)  # delayed
    jobs.ok.using(delay="10s").enqueue(n=3)  # delayed, due after the advance: counts ready
    harness.advance(20)
    jobs.ok.enqueue(n=4)
    jobs.ok.enqueue(n=5)
    jobs.on_other_queue.enqueue(n=1)
    running = claim(harness.driver, limit=2)  # the two oldest due: n=1 and n=3
    assert {j.input["n"] for j in running} == {1, 3}
    jobs.ok.enqueue(n=6)
    jobs.ok.enqueue(n=7)
    [dead, parked] = claim(harness.driver, limit=2)
    harness.driver.finish(Finish(dead.id, dead.lease_token, "dead"))
    harness.driver.suspend(SuspendUntil(parked.id, parked.lease_token, delay=60))
    due = jobs.ok.using(delay="10s").enqueue(n=8)  # still 'delayed' when read, but due
    harness.advance(20)
    stats = {s.queue: s for s in harness.driver.stats()}
    assert list(stats) == ["default", "other"]
    default = stats["default"]
    assert harness.row(due.id).state == "delayed"  # counted below as ready, not delayed
    assert (default.ready, default.delayed, default.running, default.suspended, default.dead) == (
        3,
        1,
        2,
        1,
        1,
    )
    assert stats["other"].ready == 1
    assert default.oldest_ready_seconds >= 0.0
    assert stats["other"].oldest_ready_seconds >= 0.0


def test_stats_oldest_ready_is_measured_from_run_at(harness):
    jobs.ok.enqueue(n=1)
    harness.advance(90)
    [default] = harness.driver.stats()
    assert 90 <= default.oldest_ready_seconds < 120
