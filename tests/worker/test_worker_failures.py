"""The worker's failure and shutdown SPEC ids that had no test of their own (issue 16 item 7):
WORK-09/SE-09, WORK-11, WORK-13, WORK-14, SE-49 and SE-50. Real ``Worker.run()`` loops on
threads, against both drivers with committed rows; faults are injected at the driver's verbs."""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import OperationalError, connections
from django.test import override_settings

from django_xjobs import log
from django_xjobs.declarations.job import job
from django_xjobs.run.execution import Outcome
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.support.process import wait_for

BASE = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "off"}
#: gated handlers block on this until the test opens it
GATE = threading.Event()
STARTED = threading.Event()


@job(name="test_spec_worker.gated", idempotency_key="gated:{token}")
def gated(ctx, token: str):
    STARTED.set()
    GATE.wait(20)  # bounded: a broken test ends rather than hangs
    return token


@pytest.fixture(autouse=True)
def _reset():
    GATE.clear()
    STARTED.clear()
    yield
    GATE.set()  # never leave a handler blocked past its test


def token() -> str:
    return f"spec-worker-{uuid.uuid4()}"


@contextmanager
def running(worker: Worker) -> Iterator[threading.Thread]:
    """``worker.run()`` on a thread for the block; after it, the gate opens and the worker
    stops (asserted), whatever the block raised."""
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        GATE.set()
        worker.stop()
        thread.join(20)
        assert not thread.is_alive(), "the worker did not stop"


def lines(caplog, event: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(event + " ")]


def once(real, fault: BaseException):
    """``real``, except that its first call raises ``fault``."""
    calls = []

    def call(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise fault
        return real(*args, **kwargs)

    call.calls = calls  # type: ignore[attr-defined]
    return call


# --- WORK-09 / SE-09: a fleet-slot acquire that raises ---------------------------------------


def test_work_09_se_09_a_raising_slot_acquire_sheds_the_job_and_leaks_no_process_slot(
    live_harness, caplog
):
    """Deliberately not "the error propagates out of the pass and the row comes back
    through visibility expiry" (WORK-09 in docs/reference/behaviour.md): the worker sheds the job, so it is ready again after a
    poll with no attempt spent and no lease to wait out. What SE-09 is about holds: the process
    limit is handed back (with ``global: 1`` a leak would block every later run), and the
    worker keeps claiming."""
    driver = live_harness.driver
    leases = driver.limits()
    acquire = once(leases.acquire_slot, OperationalError("lease table away (a test fault)"))
    leases.acquire_slot = acquire
    try:
        with (
            override_settings(XJOBS={**BASE, "LIMITS": {"global": 1}}),
            caplog.at_level(logging.DEBUG, logger="django_xjobs"),
        ):
            capped = jobs.exclusive.enqueue(token=token(), hold=0).id
            worker = Worker(queues=["default"], driver=driver, poll_interval=0.05)
            with running(worker):
                wait_for(
                    lambda: live_harness.row(capped).state == "done", what="the shed job to run"
                )
                later = jobs.ok.enqueue(n=9).id
                wait_for(lambda: live_harness.row(later).state == "done", what="a later job")
    finally:
        del leases.acquire_slot
    assert len(acquire.calls) == 2  # the one that raised, then the one that took the slot
    assert len(lines(caplog, "xjobs.worker.slot_failed")) == 1
    [shed] = lines(caplog, "xjobs.worker.shed")
    assert "the concurrency slot could not be taken" in shed
    assert worker.stats().outcomes == {"shed": 1, Outcome.COMPLETED: 2}
    assert worker.limiter.in_flight() == 0
    row = live_harness.row(capped)
    assert (row.attempt, row.last_error) == (1, None)  # the shed spent no attempt
    assert leases.held_slots("job:tests.jobs.exclusive") == 0


# --- WORK-11: a settle or a pass that raises ------------------------------------------------


def test_work_11_a_settle_that_raises_logs_settle_failed_and_the_worker_carries_on(
    live_harness, caplog
):
    """Never an unhandled error (a settler thread that died would fail this test through
    pytest's unhandled-thread-exception warning): the failed ack is logged, its row waits for
    its lease, and the next job is claimed and settled."""
    driver = live_harness.driver
    driver.runs().complete = once(
        driver.runs().complete, ValueError("the ack broke (a test fault)")
    )
    try:
        with caplog.at_level(logging.INFO, logger="django_xjobs"):
            first = jobs.ok.enqueue(n=1).id
            worker = Worker(queues=["default"], driver=driver, poll_interval=0.05)
            with running(worker):
                wait_for(lambda: lines(caplog, "xjobs.worker.settle_failed"), what="settle_failed")
                later = jobs.ok.enqueue(n=2).id
                wait_for(lambda: live_harness.row(later).state == "done", what="a later job")
    finally:
        del driver.runs().complete
    [failed] = lines(caplog, "xjobs.worker.settle_failed")
    assert f"id={first}" in failed and "the ack broke" in failed
    assert live_harness.row(first).state == "running"  # its lease hands it back later
    assert worker.stats().outcomes == {Outcome.LEASE_LOST: 1, Outcome.COMPLETED: 1}
    assert worker.state == "stopped"


def test_work_11_a_pass_that_raises_is_logged_and_the_loop_rearms(
    live_harness, caplog, monkeypatch
):
    """A failed pass logs ``xjobs.worker.claim_failed`` (WORK-11): the claim is the one
    step of a pass that can raise (a failed admission sheds, WORK-09; a failed settle is the
    settler's, above). The loop backs off and claims again."""
    monkeypatch.setattr(log, "_throttled", OrderedDict())  # an earlier test's line may hold it
    driver = live_harness.driver
    driver.runs().claim = once(
        driver.runs().claim, OperationalError("claim refused (a test fault)")
    )
    try:
        with caplog.at_level(logging.INFO, logger="django_xjobs"):
            job_id = jobs.ok.enqueue(n=1).id
            worker = Worker(queues=["default"], driver=driver, poll_interval=0.05)
            with running(worker):
                wait_for(lambda: live_harness.row(job_id).state == "done", what="the job")
    finally:
        del driver.runs().claim
    [failed] = lines(caplog, "xjobs.worker.claim_failed")
    assert "claim refused" in failed
    assert len(lines(caplog, "xjobs.worker.claim_resumed")) == 1
    assert worker.stats().outcomes == {Outcome.COMPLETED: 1}


# --- WORK-13: stop() is idempotent and tears down once ----------------------------------------


class Counting:
    """The driver, counting ``close()`` calls."""

    def __init__(self, driver) -> None:
        self._driver = driver
        self.closed = 0

    def __getattr__(self, name):
        return getattr(self._driver, name)

    def close(self) -> None:
        self.closed += 1
        self._driver.close()


def test_work_13_concurrent_stops_share_one_teardown_and_a_stopped_worker_ignores_stop(
    live_harness, caplog
):
    """Eight ``stop()`` calls at once (a manual stop and signals) drain once. The worker never
    closes its driver: it may be the process's shared one; it closes only its own connection.
    ``stop()`` on a stopped worker changes nothing, and the worker can run again."""
    driver = Counting(live_harness.driver)
    worker = Worker(queues=["default"], driver=driver, poll_interval=0.05)
    with caplog.at_level(logging.INFO, logger="django_xjobs"):
        held = gated.enqueue(token=token()).id
        with running(worker):
            assert STARTED.wait(10), "the gated run never started"
            barrier = threading.Barrier(8)

            def stop() -> None:
                barrier.wait(5)
                worker.stop()

            stoppers = [threading.Thread(target=stop) for _ in range(8)]
            for stopper in stoppers:
                stopper.start()
            for stopper in stoppers:
                stopper.join(10)
            wait_for(lambda: worker.state == "draining", what="the drain")
        assert len(lines(caplog, "xjobs.worker.draining")) == 1
        assert len(lines(caplog, "xjobs.worker.stopped")) == 1
        assert (worker.state, driver.closed) == ("stopped", 0)
        assert live_harness.row(held).state == "done"  # the running job finished first

        caplog.clear()
        worker.stop()
        worker.stop()
        assert worker.state == "stopped" and caplog.records == []
    worker.burst = True
    again = jobs.ok.enqueue(n=3).id
    assert worker.run().outcomes == {Outcome.COMPLETED: 2}
    assert live_harness.row(again).state == "done"


# --- WORK-14 / SE-49: a drain and a pass in flight ------------------------------------------


def test_work_14_se_49_a_stop_during_a_pass_waits_for_it_and_then_claims_nothing(
    live_harness, caplog
):
    """``stop()`` lands while a claim is on the wire. The drain waits for that pass (the
    claim loop and the drain share one thread), then for the running job, and no pass
    starts after the stop. What the interrupted pass claimed is handed back unstarted with
    no attempt spent: deliberately not "runs to completion before close()" (WORK-14; a drain
    starts nothing new, WORK-12 as issue 13 built it)."""
    driver = live_harness.driver
    real_claim = driver.runs().claim
    in_claim, release = threading.Event(), threading.Event()
    claims: list[str] = []
    state_at_return: list[str] = []
    blocking = threading.Event()

    def claim(**kwargs):
        claims.append("draining" if worker.draining else "running")
        if blocking.is_set():
            blocking.clear()
            in_claim.set()
            release.wait(10)
        rows = real_claim(**kwargs)
        state_at_return.append(worker.state)
        return rows

    driver.runs().claim = claim
    try:
        with caplog.at_level(logging.INFO, logger="django_xjobs"):
            busy = gated.enqueue(token=token()).id
            worker = Worker(queues=["default"], driver=driver, poll_interval=0.05, prefetch=0)
            with running(worker) as thread:
                assert STARTED.wait(10), "the gated run never started"
                blocking.set()
                raced = jobs.ok.enqueue(n=4).id
                assert in_claim.wait(10), "no pass claimed the second job"
                worker.stop()
                release.set()
                wait_for(lambda: live_harness.row(raced).state == "ready", what="the hand-back")
                wait_for(lambda: worker.state == "draining", what="the drain")
                assert thread.is_alive() and not GATE.is_set()  # the running job holds it
    finally:
        del driver.runs().claim
    assert state_at_return[-1] == "running"  # the drain had not begun under the pass
    assert "draining" not in claims  # no pass started after the stop
    assert live_harness.row(busy).state == "done"
    row = live_harness.row(raced)
    assert (row.state, row.attempt, row.last_error, row.lease_token) == ("ready", 0, None, None)
    assert worker.stats().outcomes == {Outcome.COMPLETED: 1, "shed": 1}


def test_work_14_a_pass_checks_for_a_drain_again_before_each_pool(live_harness):
    """With per-queue pools a pass claims queue by queue: a stop that lands during the first
    pool's claim leaves the second pool unclaimed."""
    driver = live_harness.driver
    real_claim = driver.runs().claim
    asked: list[tuple[str, ...]] = []
    in_claim, release = threading.Event(), threading.Event()

    def claim(**kwargs):
        asked.append(tuple(kwargs["queues"]))
        if len(asked) == 1:
            in_claim.set()
            release.wait(10)
        return real_claim(**kwargs)

    driver.runs().claim = claim
    try:
        worker = Worker(
            queues=["default", "other"],
            concurrency={"default": 1, "other": 1},
            driver=driver,
            poll_interval=0.05,
            prefetch=0,
        )
        with running(worker):
            assert in_claim.wait(10), "no pass claimed"
            worker.stop()
            release.set()
    finally:
        del driver.runs().claim
    assert asked == [("default",)], asked


# --- SE-50: a close that raises still leaves the worker stopped -----------------------------


def test_se_50_a_close_that_raises_still_leaves_the_worker_stopped_and_restartable(
    transactional_db, monkeypatch
):
    """PostgreSQL only: the memory driver holds no connection for the worker to close. The
    error reaches the caller of ``run()``; the worker is ``stopped``, not stuck ``draining``."""
    from django_xjobs.drivers import install, uninstall
    from django_xjobs.drivers.postgres import PostgresDriver

    driver = PostgresDriver("default")
    install(driver)
    try:
        worker = Worker(queues=["default"], driver=driver, burst=True)
        wrapper_class = type(connections["default"])
        real_close = wrapper_class.close
        failed: list[str] = []
        caller = threading.current_thread()

        def close(self) -> None:
            real_close(self)  # really closed: only the report of it fails
            runs_the_worker = threading.current_thread() is caller  # run() is called here
            if worker.state == "draining" and runs_the_worker and not failed:
                failed.append(threading.current_thread().name)
                raise OperationalError("the close failed (a test fault)")

        monkeypatch.setattr(wrapper_class, "close", close)
        jobs.ok.enqueue(n=1)
        with pytest.raises(OperationalError, match="the close failed"):
            worker.run()
        assert worker.state == "stopped" and failed
        monkeypatch.undo()
        jobs.ok.enqueue(n=2)
        assert worker.run().outcomes == {Outcome.COMPLETED: 2}
        assert worker.state == "stopped"
    finally:
        uninstall(driver)
