"""The pipelined worker (issue 13): a thread is free when its handler returns, and claimed runs
wait in a bounded prefetch, leased and renewed, handed back unstarted on a drain. Both drivers."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.test import override_settings

from django_xjobs import conf
from django_xjobs.declarations.job import job
from django_xjobs.errors import ConfigInvalidError
from django_xjobs.run.execution import Outcome
from django_xjobs.worker.prefetch import AUTO_CAP, Prefetch
from django_xjobs.worker.worker import Worker
from tests.support.process import wait_for

#: runs of one test share it; a new one per process keeps their keys apart
TOKEN = f"pipeline-{uuid.uuid4()}"
#: the ``n`` of each gated run, in the order their handlers started
STARTED: list[int] = []
#: gated handlers block on this until the test opens it
GATE = threading.Event()
#: set once two handlers have started
TWO_STARTED = threading.Event()


@job(name="test_pipeline.gated", idempotency_key="gated:{token}:{n}")
def gated(ctx, token: str, n: int = 0):
    STARTED.append(n)
    if len(STARTED) == 2:
        TWO_STARTED.set()
    GATE.wait(20)  # bounded: a broken test ends rather than hangs
    return {"n": n}


@pytest.fixture(autouse=True)
def _reset():
    STARTED.clear()
    GATE.clear()
    TWO_STARTED.clear()
    yield
    GATE.set()  # never leave a handler blocked past its test


def _in_thread(worker: Worker) -> threading.Thread:
    thread = threading.Thread(target=worker.run)
    thread.start()
    return thread


def test_work_05_a_thread_is_free_once_its_handler_returns_not_once_its_ack_lands(live_harness):
    """SPEC SE-51: the thread is refilled as soon as its own run ends."""
    GATE.set()  # the handlers return at once; it is the first ack that is held back
    ids = [gated.enqueue(token=TOKEN, n=n).id for n in range(2)]
    real_ack = live_harness.driver.runs().complete
    seen_while_held: list[bool] = []

    def held_ack(completes):
        if not seen_while_held:  # the first ack waits for the second handler to start
            seen_while_held.append(TWO_STARTED.wait(10))
        return real_ack(completes)

    live_harness.driver.runs().complete = held_ack
    try:
        worker = Worker(
            queues=["default"], concurrency=1, prefetch=0, driver=live_harness.driver, burst=True
        )
        stats = worker.run()
    finally:
        del live_harness.driver.runs().complete
    assert seen_while_held == [True]  # one thread: the second run started while the ack waited
    assert stats.outcomes == {Outcome.COMPLETED: 2}
    assert {live_harness.row(i).state for i in ids} == {"done"}


def test_work_12_a_drain_hands_queued_runs_back_unstarted_without_spending_an_attempt(
    live_harness,
):
    ids = {n: gated.enqueue(token=TOKEN, n=n).id for n in range(3)}
    before = {n: live_harness.row(i).run_at for n, i in ids.items()}
    worker = Worker(queues=["default"], concurrency=1, prefetch=2, driver=live_harness.driver)
    thread = _in_thread(worker)
    try:
        wait_for(lambda: STARTED and len(worker.in_flight()) == 3, what="one run, two queued")
        worker.stop()
        queued = [n for n in ids if n not in STARTED]
        # back at once, while the running handler still holds the only thread
        wait_for(
            lambda: all(live_harness.row(ids[n]).state == "ready" for n in queued),
            what="the queued runs to be handed back",
        )
        assert len(STARTED) == 1 and not GATE.is_set()
    finally:
        GATE.set()
        thread.join(20)
    assert not thread.is_alive() and worker.state == "stopped"
    assert worker.stats().outcomes == {Outcome.COMPLETED: 1, "shed": 2}
    assert live_harness.row(ids[STARTED[0]]).state == "done"
    for n in queued:
        row = live_harness.row(ids[n])
        # no attempt spent, no error, its place in the queue kept
        assert (row.state, row.attempt, row.last_error, row.lease_token) == (
            "ready",
            0,
            None,
            None,
        )
        assert row.run_at == before[n]


def test_lease_04_the_heartbeat_renews_a_run_queued_for_a_thread(live_harness):
    ids = {n: gated.enqueue(token=TOKEN, n=n).id for n in range(2)}
    worker = Worker(
        queues=["default"],
        concurrency=1,
        prefetch=1,
        driver=live_harness.driver,
        visibility_timeout=3,
        heartbeat_interval=0.2,
    )
    thread = _in_thread(worker)
    try:
        wait_for(lambda: STARTED and len(worker.in_flight()) == 2, what="one run, one queued")
        [queued] = [r for r in worker.in_flight() if r.job.id != ids[STARTED[0]]]
        claimed_at = queued.renewed_at
        wait_for(lambda: queued.renewed_at > claimed_at, what="a renewal of the queued run")
        assert len(STARTED) == 1  # it was renewed while it waited, not while it ran
        row = live_harness.row(queued.job.id)
        assert (row.state, row.lease_token) == ("running", queued.job.lease_token)
        GATE.set()
        wait_for(lambda: not worker.in_flight(), what="both runs to settle")
    finally:
        GATE.set()
        worker.stop()
        thread.join(20)
    assert not thread.is_alive()
    assert worker.stats().outcomes == {Outcome.COMPLETED: 2}
    assert not queued.lost
    assert {(live_harness.row(i).state, live_harness.row(i).attempt) for i in ids.values()} == {
        ("done", 1)
    }


def test_auto_prefetch_queues_what_the_threads_finish_in_two_claims():
    prefetch = Prefetch("auto", concurrency=4)
    assert prefetch.ahead() == 0  # nothing ran yet: claims are sized to the threads alone
    prefetch.claimed(0.005)
    prefetch.ran(1.0)  # slow jobs: none queued, so other workers can take them meanwhile
    assert prefetch.ahead() == 1
    fast = Prefetch("auto", concurrency=4)
    fast.claimed(0.005)
    fast.ran(0.001)  # 4 threads x 5 ms / 1 ms, twice over
    assert fast.ahead() == 40
    for _ in range(20):
        fast.ran(0.0001)  # faster still: capped, a claim's own cost grows with its size
    assert fast.ahead() == AUTO_CAP
    assert Prefetch(3, concurrency=4).ahead() == 3


@pytest.mark.parametrize("value", [-1, "deep", 2.5, True])
def test_a_bad_prefetch_setting_is_refused_with_a_hint(value):
    with override_settings(XJOBS={"PREFETCH": value}), pytest.raises(ConfigInvalidError) as caught:
        conf.get()
    assert "PREFETCH" in caught.value.message and caught.value.hint


@pytest.mark.parametrize(("value", "ahead"), [("auto", 0), (0, 0), (7, 7)])
def test_the_prefetch_setting_reaches_the_worker(value, ahead):
    with override_settings(XJOBS={"PREFETCH": value}):
        worker = Worker(queues=["default"], concurrency=2)
    assert worker.prefetch.ahead() == ahead
