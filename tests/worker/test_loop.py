"""A job above the priority a worker has been claiming (SPEC PRIO-01): enqueued while the pool's
threads have runs queued ahead, it is claimed at once beside the claim loop and runs before
those. Both drivers, a real worker on threads."""

from __future__ import annotations

import threading
import uuid

from django.db import DEFAULT_DB_ALIAS, connection

from django_xjobs.declarations.job import job
from django_xjobs.drivers.postgres import CHANNEL
from django_xjobs.drivers.postgres.listener import Listener
from django_xjobs.run.execution import Outcome
from django_xjobs.worker.worker import Worker
from tests.support.process import wait_for

#: runs of one test share it; a new one per process keeps their keys apart
TOKEN = f"priority-{uuid.uuid4()}"
#: the ``n`` of each run, in the order their handlers started
STARTED: list[int] = []
#: the handlers block on this until the test opens it
GATE = threading.Event()


@job(name="test_priority.gated", idempotency_key="prio:{token}:{n}")
def gated(ctx, token: str, n: int = 0):
    STARTED.append(n)
    GATE.wait(20)  # bounded: a broken test ends rather than hangs
    return {"n": n}


def _backlog(harness) -> tuple[Worker, threading.Thread, dict[int, object]]:
    """One thread running ``n=0`` behind the gate, three more runs claimed and queued ahead
    of it (prefetch 3: the claim loop claims again only once they are down to one)."""
    STARTED.clear()
    GATE.clear()
    ids = {n: gated.enqueue(token=TOKEN, n=n).id for n in range(4)}
    worker = Worker(queues=["default"], concurrency=1, prefetch=3, driver=harness.driver)
    thread = threading.Thread(target=worker.run)
    thread.start()
    wait_for(lambda: STARTED == [0] and len(worker.in_flight()) == 4, what="one run, three queued")
    return worker, thread, ids


def test_prio_01_a_higher_priority_job_is_claimed_at_once_and_runs_before_the_queued(
    live_harness,
):
    worker, thread, ids = _backlog(live_harness)
    try:
        urgent = gated.using(priority=10).enqueue(token=TOKEN, n=99).id
        # claimed though three runs are queued ahead, which would otherwise hold the claim back
        wait_for(lambda: len(worker.in_flight()) == 5, what="the urgent run to be claimed")
        GATE.set()
        wait_for(lambda: len(STARTED) == 5, what="every run to start")
    finally:
        GATE.set()
        worker.stop()
        thread.join(20)
    assert STARTED == [0, 99, 1, 2, 3]  # next after the one running, not after the queue
    assert not thread.is_alive() and worker.stats().outcomes == {Outcome.COMPLETED: 5}
    assert {live_harness.row(i).state for i in [*ids.values(), urgent]} == {"done"}


def test_prio_01_a_drain_hands_back_an_urgent_run_queued_unstarted(live_harness):
    worker, thread, ids = _backlog(live_harness)
    try:
        urgent = gated.using(priority=10).enqueue(token=TOKEN, n=99).id
        wait_for(lambda: len(worker.in_flight()) == 5, what="the urgent run to be claimed")
        worker.stop()
        queued = [ids[1], ids[2], ids[3], urgent]
        # back at once, no attempt spent, while the first run still holds the only thread
        wait_for(
            lambda: all(live_harness.row(i).state == "ready" for i in queued),
            what="the queued runs, the urgent one among them, to be handed back",
        )
        assert STARTED == [0]
    finally:
        GATE.set()
        thread.join(20)
    assert not thread.is_alive()
    assert [live_harness.row(i).attempt for i in queued] == [0, 0, 0, 0]
    assert live_harness.row(ids[0]).state == "done"


def test_prio_01_a_job_of_the_backlog_priority_waits_its_turn(live_harness):
    """Only a job above what the pool has been claiming jumps it: one of the same priority is
    claimed and run in order, as before."""
    worker, thread, _ = _backlog(live_harness)
    try:
        later = gated.enqueue(token=TOKEN, n=4).id
        GATE.set()
        wait_for(lambda: len(STARTED) == 5, what="every run to start")
    finally:
        GATE.set()
        worker.stop()
        thread.join(20)
    assert STARTED == [0, 1, 2, 3, 4]
    assert live_harness.row(later).state == "done"


def test_prio_01_an_enqueue_above_priority_0_tells_its_queue_and_priority(live_harness):
    """The wake-up the urgent claim hangs on, from both drivers: a ready row above priority 0
    tells ``on_urgent(queue, priority)`` besides the plain wake-up; one at 0 tells only that."""
    told: list[tuple[str, int]] = []
    woken = threading.Event()
    runs = live_harness.driver.runs()
    notifier = runs.notify_on_ready(
        ["default"], woken.set, on_urgent=lambda queue, priority: told.append((queue, priority))
    )
    try:
        if live_harness.driver.name == "postgres":
            wait_for(woken.is_set, timeout=10, what="the listener to start")  # told on listening
        gated.enqueue(token=TOKEN, n=1)
        gated.using(priority=7).enqueue(token=TOKEN, n=2)
        gated.using(priority=3).enqueue_many([{"token": TOKEN, "n": 3}, {"token": TOKEN, "n": 4}])
        gated.using(priority=7, queue="other").enqueue(token=TOKEN, n=5)  # not its queue
        gated.using(priority=5).enqueue(token=TOKEN, n=6)
        wait_for(lambda: told and told[-1] == ("default", 5), timeout=10, what="the last one")
    finally:
        notifier.stop()
    # in order; the bulk insert's two rows at one priority may tell once (PostgreSQL folds
    # them, once per statement) or twice (the memory driver enqueues them row by row)
    distinct = [entry for i, entry in enumerate(told) if i == 0 or told[i - 1] != entry]
    assert distinct == [("default", 7), ("default", 3), ("default", 5)]


def test_prio_01_the_listener_reads_the_urgent_form_of_its_own_queues_only(transactional_db):
    """What another process's NOTIFY may carry: ``"<queue> <priority>"`` of a listened queue
    reaches ``urgent``; another queue's, or a payload that is not that form, does not. The
    PostgreSQL driver's wire; the memory driver has none (its wake-ups: the test above)."""
    told: list[tuple[str, int]] = []
    plain = threading.Event()
    listener = Listener(
        DEFAULT_DB_ALIAS,
        CHANNEL,
        plain.set,
        {"default"},
        urgent=lambda queue, priority: told.append((queue, priority)),
    )
    listener.start()
    try:
        wait_for(plain.is_set, timeout=10, what="the listener to start")
        with connection.cursor() as cursor:  # autocommit: each NOTIFY goes out at once
            for payload in ["other 9", "default x", "default 2 3", "default 4"]:
                cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, payload])
        wait_for(lambda: told, timeout=10, what="the urgent payload")
    finally:
        listener.stop()
    # notifications arrive in the order sent: the three before it were read and passed over
    assert told == [("default", 4)]
