"""A result that cannot be settled during an outage is retried while its lease may hold, and a
renewal racing an ack is no lost lease (issue 12 items 2 and 8). Real workers on both drivers;
the outage is a driver whose settle and renewal calls fail with a connection error."""

from __future__ import annotations

import logging
import threading
import uuid

from django.db import OperationalError

from django_xjobs import metrics
from django_xjobs.run.execution import Outcome
from django_xjobs.worker.heartbeat import Heartbeat
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.models import Ledger
from tests.support.process import wait_for


class Outage:
    """The installed driver, except that the calls named in ``failing`` raise a connection error
    while ``down(call)`` says so."""

    def __init__(self, driver, failing, down) -> None:
        self._driver, self._failing, self._down = driver, failing, down

    def runs(self):  # its settles, heartbeats and claims stand in for the driver's
        return self

    def __getattr__(self, name):
        real = getattr(self._driver, name)
        if name not in self._failing:
            return real

        def call(*args, **kwargs):
            if self._down(name, args):
                raise OperationalError("connection refused (an outage in the test)")
            return real(*args, **kwargs)

        return call


def done_once(token: str) -> bool:
    return Ledger.objects.filter(token=token, phase="done").count() == 1


def test_a_settle_failing_through_a_short_outage_lands_when_it_ends(live_harness, caplog):
    token = f"outage-{uuid.uuid4()}"
    job_id = jobs.ledger.enqueue(token=token).id
    acks = []

    def down(name, args):
        acks.append(name)
        return len(acks) <= 3  # three tries fail, the fourth lands

    driver = Outage(live_harness.driver, {"complete"}, down)
    worker = Worker(queues=["default"], driver=driver, burst=True, visibility_timeout=30)
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        stats = worker.run()
    assert stats.outcomes == {Outcome.COMPLETED: 1}
    assert len(acks) == 4
    row = live_harness.row(job_id)
    assert (row.state, row.attempt, row.lease_expiries) == ("done", 1, 0)
    assert done_once(token)
    assert "settle_failed" not in caplog.text and "settle_refused" not in caplog.text


def test_an_outage_longer_than_the_lease_still_lands_the_result_when_it_ends(live_harness, caplog):
    """The ack and the renewals fail for longer than the lease: nobody re-claimed the job
    meanwhile, so the fenced ack still lands once the database answers, and the job runs once
    (make chaos, outage: completed twice before this)."""
    import time

    token = f"outage-{uuid.uuid4()}"
    job_id = jobs.ledger.enqueue(token=token).id
    back_at: list[float] = []

    def down(name, args):
        if name == "complete" and not back_at:
            back_at.append(time.monotonic() + 2.5)  # the outage starts at the first ack
        return bool(back_at) and time.monotonic() < back_at[0]

    driver = Outage(live_harness.driver, {"complete", "heartbeat", "claim"}, down)  # all of it down
    worker = Worker(
        queues=["default"], driver=driver, burst=True, visibility_timeout=1.5, stall_timeout=20
    )
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        stats = worker.run()
    assert stats.outcomes == {Outcome.COMPLETED: 1}
    row = live_harness.row(job_id)
    assert (row.state, row.attempt) == ("done", 1)
    assert done_once(token)
    assert "settle_failed" not in caplog.text


def test_a_settle_that_outlives_its_lease_is_logged_as_failed_not_refused(live_harness, caplog):
    """Every try of the first run's ack and renewals fails until its lease is gone: the guard
    gives up as settle_failed, the lease hands the job back, and the second run settles it. The
    holder stayed present, so the lapse is no crash."""
    token = f"outage-{uuid.uuid4()}"
    job_id = jobs.ledger.enqueue(token=token).id
    first: list[uuid.UUID] = []

    def down(name, args):
        token_arg = args[1] if name == "heartbeat" else args[0][0].lease_token
        first[:] = first or [token_arg]
        return token_arg == first[0]

    driver = Outage(live_harness.driver, {"complete", "heartbeat"}, down)
    worker = Worker(
        queues=["default"], driver=driver, burst=True, visibility_timeout=1.5, stall_timeout=4
    )
    unsettled = metrics.value("xjobs_jobs_total", queue="default", outcome="unsettled")
    lost = metrics.value("xjobs_jobs_total", queue="default", outcome="lease_lost")
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        stats = worker.run()
    assert stats.outcomes == {Outcome.LEASE_LOST: 1, Outcome.COMPLETED: 1}
    assert caplog.text.count("xjobs.worker.settle_failed") == 1
    assert "settle_refused" not in caplog.text
    # counted as a result that could not reach the database, not as a lost lease
    assert metrics.value("xjobs_jobs_total", queue="default", outcome="unsettled") == unsettled + 1
    assert metrics.value("xjobs_jobs_total", queue="default", outcome="lease_lost") == lost
    row = live_harness.row(job_id)
    assert (row.state, row.attempt) == ("done", 2)
    assert Ledger.objects.filter(token=token, phase="done").count() == 2  # it ran twice


def test_a_renewal_between_an_ack_and_the_settled_mark_is_no_lost_lease(live_harness, caplog):
    """Item 8: the ack lands, then a renewal finds the job gone before the worker marks the run
    settled. Before the fix that renewal reported xjobs.lease.lost and bumped the metric."""
    token = f"race-{uuid.uuid4()}"
    jobs.ledger.enqueue(token=token)
    real = live_harness.driver
    raced = threading.Event()
    worker: Worker

    class AckThenRenew:
        def __getattr__(self, name):
            return getattr(real, name)

        def runs(self):  # its complete stands in for the driver's
            return self

        def complete(self, completes):
            landed = real.runs().complete(completes)
            renewal = Heartbeat(
                real,
                worker.in_flight,
                interval=1,
                visibility_timeout=30,
                worker_id=worker.worker_id,
                database=None,
                submit=lambda renew, run: renew(run),  # inline, inside the race window
            )
            assert [r.job.id for r in worker.in_flight()] == [c.job_id for c in completes]
            renewal.beat()
            raced.set()
            return landed

    worker = Worker(queues=["default"], driver=AckThenRenew(), burst=True, visibility_timeout=30)
    before = metrics.value("xjobs_job_leases_lost_total", queue="default")
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        stats = worker.run()
    assert raced.is_set()
    assert stats.outcomes == {Outcome.COMPLETED: 1}
    assert "xjobs.lease.lost" not in caplog.text
    assert metrics.value("xjobs_job_leases_lost_total", queue="default") == before
    assert done_once(token)


def test_a_running_worker_is_present_and_a_clean_stop_removes_it(live_harness):
    token = f"present-{uuid.uuid4()}"
    job_id = jobs.ledger.enqueue(token=token, hold=60.0).id  # heeds its signal
    worker = Worker(queues=["default"], driver=live_harness.driver, visibility_timeout=3)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(
            lambda: [w.in_flight for w in live_harness.driver.reads().workers()] == [1],
            timeout=30,
            what="the worker to report its run in flight",
        )
        [row] = live_harness.driver.reads().workers()
        assert (row.id, row.queues, row.alive) == (worker.worker_id, ("default",), True)
    finally:
        live_harness.driver.jobs().cancel(job_id, "test over")  # its next renewal stops the body
        worker.stop()
        thread.join(60)
    assert not thread.is_alive()
    assert live_harness.driver.reads().workers() == []
