"""``Worker.tick()``: one claim-admit-run-settle pass of the real worker in the calling
thread (SPEC WORK-06), on both drivers, inside the test's transaction."""

from __future__ import annotations

import logging
import threading
import uuid

import pytest
from django.db import OperationalError
from django.test import override_settings

from django_xjobs.clock import FrozenClock
from django_xjobs.conf.limits import parse_limits
from django_xjobs.errors import InvariantError
from django_xjobs.limits.worker import Limiter
from django_xjobs.run.execution import Outcome
from django_xjobs.testing import memory_driver, run_until_idle
from django_xjobs.worker.run import Run
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.support.process import wait_for

BASE = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "off"}
EXCLUSIVE = "job:tests.jobs.exclusive"


# The memory-driver cases take ``db`` too: a role bounds the open connections of the thread it
# runs on, and an earlier test may have left this thread's connection open.


def worker(harness, **options) -> Worker:
    return Worker(queues=["default"], driver=harness.driver, burst=True, **options)


def test_work_06_one_tick_runs_at_most_limit_jobs(harness):
    ids = [jobs.ok.enqueue(n=i).id for i in range(5)]
    done = worker(harness, concurrency=4).tick(limit=2)
    assert [e.outcome for e in done.executions] == [Outcome.COMPLETED] * 2
    assert done.shed == []
    states = sorted(harness.row(i).state for i in ids)
    assert states == ["done", "done", "ready", "ready", "ready"]


def test_work_06_the_default_limit_is_the_concurrency(harness):
    for i in range(5):
        jobs.ok.enqueue(n=i)
    assert len(worker(harness, concurrency=3).tick().executions) == 3


def test_work_06_a_tick_on_an_empty_queue_returns_nothing(harness):
    done = worker(harness).tick()
    assert (done.executions, done.shed) == ([], [])


def test_work_06_settle_outcomes_are_on_the_rows_after_the_tick(harness):
    done_id = jobs.ok.enqueue(n=1).id
    failed_id = jobs.fails.enqueue(n=2).id
    done = worker(harness).tick()
    outcomes = {e.job.id: e.outcome for e in done.executions}
    assert outcomes == {done_id: Outcome.COMPLETED, failed_id: Outcome.RETRIED}
    row = harness.row(done_id)
    assert (row.state, row.attempt, row.result) == ("done", 1, {"n": 1, "attempt": 1})
    row = harness.row(failed_id)
    assert (row.state, row.attempt, row.last_error) == ("ready", 1, "ValueError: boom 2")


def test_work_06_a_job_over_a_per_queue_limit_is_shed_and_stays_ready(harness):
    with override_settings(XJOBS={**BASE, "LIMITS": {"per_queue": 1}}):
        first = jobs.ok.enqueue(n=1).id
        second = jobs.ok.enqueue(n=2).id
        ticker = worker(harness)
        done = ticker.tick()
    assert [e.job.id for e in done.executions] == [first]
    assert [(s.job_id, s.reason) for s in done.shed] == [(second, "limited: per-queue")]
    row = harness.row(second)
    assert (row.state, row.attempt, row.last_error) == ("ready", 0, None)  # no attempt spent
    assert ticker.limiter.in_flight() == 0  # the first run's limit went back at its settle
    assert ticker.stats().outcomes["shed"] == 1


def test_work_06_a_capped_job_is_shed_while_its_slot_is_held(harness):
    leases = harness.driver.limits()
    assert leases.acquire_slot(EXCLUSIVE, 1, 30, "elsewhere:1") == 0
    job_id = jobs.exclusive.enqueue(token="held", hold=0).id
    done = worker(harness).tick()
    assert done.executions == []
    assert [(s.job_id, s.reason) for s in done.shed] == [(job_id, "job concurrency (1)")]
    row = harness.row(job_id)
    assert (row.state, row.attempt) == ("ready", 0)

    assert leases.release_slot(EXCLUSIVE, 0, "elsewhere:1")
    harness.advance(1)  # past the shed's delay of one poll interval
    done = worker(harness).tick()
    assert [e.outcome for e in done.executions] == [Outcome.COMPLETED]
    # the tick's run gave its slot back when it settled: another holder can take it
    assert leases.acquire_slot(EXCLUSIVE, 1, 30, "elsewhere:2") == 0


def test_work_06_run_until_idle_admits_through_the_same_fleet_slot(harness):
    """``run_until_idle()`` ticks the worker's own parts: a held slot sheds the job there too,
    no attempt spent, and the run that follows gives its slot back at its settle."""
    leases = harness.driver.limits()
    assert leases.acquire_slot(EXCLUSIVE, 1, 30, "elsewhere:1") == 0
    job_id = jobs.exclusive.enqueue(token="held", hold=0).id
    assert run_until_idle(driver=harness.driver) == []
    row = harness.row(job_id)
    assert (row.state, row.attempt) == ("ready", 0)

    assert leases.release_slot(EXCLUSIVE, 0, "elsewhere:1")
    harness.advance(1)  # past the shed's delay of one poll interval
    [execution] = run_until_idle(driver=harness.driver)
    assert execution.outcome == Outcome.COMPLETED
    assert leases.acquire_slot(EXCLUSIVE, 1, 30, "elsewhere:2") == 0


def test_work_06_a_tick_starts_no_thread_and_leaves_nothing_held(harness):
    with override_settings(XJOBS={**BASE, "LIMITS": {"global": 5}}):
        for i in range(3):
            jobs.ok.enqueue(n=i)
        ticker = worker(harness)
        before = set(threading.enumerate())
        done = ticker.tick()
    assert len(done.executions) == 3
    assert set(threading.enumerate()) == before
    assert (ticker.in_flight(), ticker.limiter.in_flight(), ticker.state) == ([], 0, "idle")


def test_work_06_tick_refuses_a_running_worker(db):
    with memory_driver() as driver:
        running = Worker(queues=["default"], driver=driver, poll_interval=0.05)
        thread = threading.Thread(target=running.run)
        thread.start()
        try:
            wait_for(lambda: running.state == "running", timeout=10, what="the worker to run")
            with pytest.raises(InvariantError) as refused:
                running.tick()
            assert refused.value.hint
        finally:
            running.stop()
            thread.join(10)
    assert running.state == "stopped"


def test_work_06_a_body_past_its_timeout_is_waited_for_before_the_tick_returns(db):
    """SPEC EXEC-05: the run settles at its timeout, but its body still holds capacity; the
    tick returns only once it has ended, so nothing it started outlives it."""
    with memory_driver() as driver:
        job_id = jobs.overruns.enqueue(token="tick", late_step=False).id
        ticker = Worker(queues=["default"], driver=driver)
        done = ticker.tick()
        [execution] = done.executions
        assert "X_JOB_TIMEOUT" in (execution.error or "")
        assert execution.abandoned is not None and execution.abandoned.ended
        assert (ticker.abandoned(), ticker.in_flight()) == ([], [])
        assert driver.reads().get_job(job_id).state in ("dead", "failed")


# --- WORK-03: run() from idle or stopped only -----------------------------------------------


def test_work_03_a_stopped_worker_runs_again(db):
    """A drain leaves its stop marker behind; a second run() must not hand it to its threads."""
    with memory_driver() as driver:
        again = Worker(queues=["default"], driver=driver, burst=True, concurrency=2)
        jobs.ok.enqueue(n=1)
        assert again.run().outcomes == {Outcome.COMPLETED: 1}
        second = jobs.ok.enqueue(n=2).id
        thread = threading.Thread(target=again.run, daemon=True)
        thread.start()
        thread.join(10)
        alive = thread.is_alive()
        if alive:
            again.stop()
            thread.join(10)
        assert not alive, "the second run() never went idle"
        assert (again.state, driver.reads().get_job(second).state) == ("stopped", "done")
        assert again.outcomes == {Outcome.COMPLETED: 2}


def test_work_03_a_stop_asked_before_the_first_run_is_kept(db):
    """A SIGTERM or a recycle can reach a worker while its process is still starting, before
    run() began: the run that follows ends at once, claiming nothing, instead of wiping the
    stop and running on (a child recycled for its memory at birth ran forever)."""
    with memory_driver() as driver:
        worker = Worker(queues=["default"], driver=driver, poll_interval=0.05)
        waiting = jobs.ok.enqueue(n=3).id
        worker.stop()
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        thread.join(10)
        alive = thread.is_alive()
        if alive:
            worker.stop()
            thread.join(10)
        assert not alive, "run() wiped the stop asked before it and ran on"
        assert (worker.state, driver.reads().get_job(waiting).state) == ("stopped", "ready")


def test_work_03_run_while_running_is_a_no_op(db):
    with memory_driver() as driver:
        running = Worker(queues=["default"], driver=driver, poll_interval=0.05)
        thread = threading.Thread(target=running.run)
        thread.start()
        try:

            def threads() -> tuple[int, int]:
                names = [t.name for t in threading.enumerate()]
                return names.count("xjobs-settler"), names.count("xjobs-job")

            started = (1, running.concurrency)
            wait_for(lambda: threads() == started, timeout=10, what="its threads to start")
            stats = running.run()  # returns at once: no second loop, no second set of threads
            assert stats.state == "running"
            assert threads() == started
        finally:
            running.stop()
            thread.join(10)
    assert running.state == "stopped"


# --- EXEC-03 / SE-16: a failed ack is never turned into a retry -----------------------------


class AckFails:
    """The installed driver, except that ``complete`` raises ``error``; every settle verb is
    recorded, so a test can see that no other one was called in its place."""

    VERBS = ("complete", "retry", "suspend", "shed", "finish")

    def runs(self):  # its settles stand in for the driver's
        return self

    def __init__(self, driver, error: Exception) -> None:
        self._driver, self._error = driver, error
        self.calls: list[str] = []

    def __getattr__(self, name):
        real = getattr(self._driver, name)
        if name not in self.VERBS:
            return real

        def call(*args, **kwargs):
            self.calls.append(name)
            if name == "complete":
                raise self._error
            return real(*args, **kwargs)

        return call


@pytest.mark.parametrize(
    "error",
    [ValueError("the ack broke"), OperationalError("connection refused (a test outage)")],
    ids=["gives-up-at-once", "transient-retried-then-given-up"],
)
def test_exec_03_se_16_a_failed_ack_is_never_retried(harness, caplog, error):
    """SPEC EXEC-03, SE-16: the ack sits outside the retry decision. The guard retries a
    transient failure and then gives up; nothing is retried, the finished work is not run again
    or counted as failed, the completed steps stay, and the lease hands the row back later."""
    token = f"ack-{uuid.uuid4()}"
    job_id = jobs.five_steps.enqueue(token=token).id
    driver = AckFails(harness.driver, error)
    # a short lease: a transient failure is retried only while the lease may still hold; an
    # error given up at once needs none, and a short one lapses under a loaded machine's run
    lease = 0.6 if isinstance(error, OperationalError) else 5.0
    ticker = Worker(queues=["default"], driver=driver, visibility_timeout=lease, stall_timeout=1.0)
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        done = ticker.tick()
    assert set(driver.calls) == {"complete"}  # no retry, suspend, shed or finish in its place
    if isinstance(error, OperationalError):
        assert len(driver.calls) > 1  # retried before it gave up
    assert caplog.text.count("xjobs.worker.settle_failed") == 1
    [execution] = done.executions
    assert execution.outcome == Outcome.LEASE_LOST  # its result never reached the row
    row = harness.row(job_id)
    assert (row.state, row.attempt, row.last_error) == ("running", 1, None)
    steps = harness.driver.steps().list(row.run_id)
    assert [(s.name, s.status) for s in steps] == [(f"step{i}", "completed") for i in range(1, 6)]
    assert ticker.stats().outcomes == {Outcome.LEASE_LOST: 1}


# --- LEASE-13/14, SE-56/57: what a run takes is handed back however it ends -----------------
# One heartbeat thread per worker renews every run in ``in_flight()``; a run is in it from its
# admission until its settle. These pin that a run failing while it is wired up leaves nothing
# renewed or held.


def test_lease_13_se_56_a_context_that_cannot_be_built_releases_everything(harness, monkeypatch):
    """The context is built inside the run's ``try``: its failure is an ordinary attempt
    failure, and the renewal, the fleet slot, the limit and the run signal all end with it."""
    signals_seen = []

    def broken(**fields):
        signals_seen.append(fields["signal"])
        raise RuntimeError("the context could not be built")

    monkeypatch.setattr("django_xjobs.run.execute.JobContext", broken)
    with override_settings(XJOBS={**BASE, "LIMITS": {"global": 5}}):
        job_id = jobs.exclusive.enqueue(token=f"ctx-{uuid.uuid4()}", hold=0).id
        ticker = worker(harness)
        done = ticker.tick()
    [execution] = done.executions
    assert execution.outcome == Outcome.RETRIED
    assert "the context could not be built" in (execution.error or "")
    [signal] = signals_seen
    assert signal.is_set()  # the run signal ended with the run
    assert ticker.in_flight() == []  # the heartbeat has nothing left to renew
    assert ticker.limiter.in_flight() == 0
    assert harness.driver.limits().held_slots(EXCLUSIVE) == 0
    row = harness.row(job_id)
    assert (row.state, row.attempt) == ("ready", 1)


def test_lease_14_se_57_a_failure_while_wiring_the_run_leaves_nothing_renewed(harness):
    """The fleet slot's acquire raises after the limit was taken: the limit goes back, the run
    is never registered for renewal, and the job is shed without spending an attempt."""
    leases = harness.driver.limits()

    def unavailable(*args):
        raise OperationalError("the lease table is unavailable (a test outage)")

    leases.acquire_slot = unavailable
    try:
        with override_settings(XJOBS={**BASE, "LIMITS": {"global": 5}}):
            job_id = jobs.exclusive.enqueue(token=f"wire-{uuid.uuid4()}", hold=0).id
            ticker = worker(harness)
            done = ticker.tick()
    finally:
        del leases.acquire_slot
    assert done.executions == []
    assert [(s.job_id, s.reason) for s in done.shed] == [
        (job_id, "the concurrency slot could not be taken")
    ]
    assert (ticker.in_flight(), ticker.limiter.in_flight()) == ([], 0)
    row = harness.row(job_id)
    assert (row.state, row.attempt) == ("ready", 0)


def test_lease_14_each_hand_back_is_idempotent_and_tolerates_never_taken(harness):
    ticker = worker(harness)
    jobs.exclusive.enqueue(token=f"hand-back-{uuid.uuid4()}", hold=0)
    [job] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id=ticker.worker_id
    )
    ticker.settler.release(Run(job, ticker.worker_id))  # took nothing: handing back is a no-op

    leases = harness.driver.limits()
    holder = f"{ticker.worker_id}:{job.id}"
    slot = leases.acquire_slot(EXCLUSIVE, 1, 30, holder)
    limit = Limiter(parse_limits({"global": 1}), FrozenClock())
    run = Run(
        job, ticker.worker_id, slot=(EXCLUSIVE, slot, holder), limit_lease=limit.acquire("q", None)
    )
    ticker.settler.release(run)
    assert (leases.held_slots(EXCLUSIVE), limit.in_flight()) == (0, 0)
    assert leases.acquire_slot(EXCLUSIVE, 1, 30, "elsewhere:1") == slot  # a new holder has it now
    ticker.settler.release(
        run
    )  # again: frees neither the new holder's slot nor a limit it never had
    assert (leases.held_slots(EXCLUSIVE), limit.in_flight()) == (1, 0)
    assert limit.acquire("q", None) is not None and limit.acquire("q", None) is None


def test_work_06_a_tick_that_raises_midway_still_holds_nothing(harness, monkeypatch):
    with override_settings(XJOBS={**BASE, "LIMITS": {"global": 5}}):
        job_id = jobs.exclusive.enqueue(token=f"raises-{uuid.uuid4()}", hold=0).id
        ticker = worker(harness)

        def broken(batch):
            raise RuntimeError("the settle broke")

        monkeypatch.setattr(ticker.settler, "settle_batch", broken)
        with pytest.raises(RuntimeError, match="the settle broke"):
            ticker.tick()
    assert (ticker.in_flight(), ticker.limiter.in_flight()) == ([], 0)
    assert harness.driver.limits().held_slots(EXCLUSIVE) == 0
    assert harness.row(job_id).state == "running"  # its lease hands the row back later
