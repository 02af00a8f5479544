"""Lease renewal rules (SPEC LEASE-03..12, SE-11..15) with a scripted driver and a clock the test
moves: no database and no real waiting."""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import UTC, datetime

import pytest

from django_xjobs import metrics
from django_xjobs.drivers.contract import ClaimedJob, DriverFeatures
from django_xjobs.worker.heartbeat import Heartbeat
from django_xjobs.worker.run import Run

VIS = 30.0


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class ScriptedDriver:
    """``heartbeat`` answers from a script: True, False, None, an exception, or a callable."""

    name = "scripted"
    features = DriverFeatures(supports_fleet_slots=False)

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = 0
        self.state = "running"

    def runs(self):
        return self

    def reads(self):
        return self

    def heartbeat(self, job_id, lease_token, visibility_timeout):
        self.calls += 1
        answer = self.answers.pop(0) if self.answers else True
        if callable(answer):
            answer = answer()
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def get_job(self, job_id):
        return type("Row", (), {"state": self.state, "last_error": "stop it"})()


def make_run(clock):
    job = ClaimedJob(
        id=uuid.uuid4(),
        run_id=uuid.uuid4(),
        name="tests.jobs.ok",
        queue="default",
        input={},
        attempt=1,
        max_attempts=3,
        lease_token=uuid.uuid4(),
        priority=0,
        tenant_id=None,
        enqueued_by=None,
        idempotency_key="k",
        created_at=datetime.now(UTC),
    )
    return Run(job, "w1", VIS, renewed_at=clock(), monotonic=clock)


def heartbeat(driver, run, clock, submit=None):
    return Heartbeat(
        driver,
        lambda: [run],
        interval=VIS / 3,
        visibility_timeout=VIS,
        worker_id="w1",
        database=None,
        monotonic=clock,
        submit=submit or (lambda renew, run: renew(run)),
    )


@pytest.fixture
def clock():
    return Clock()


def test_lease_04_the_window_runs_from_the_last_renewal_that_landed(clock):
    """SPEC SE-12: the window is measured on the worker's clock from the last renewal that
    landed, never by the database's clock against the worker's."""
    driver = ScriptedDriver(True, True)
    run = make_run(clock)
    beat = heartbeat(driver, run, clock)
    clock.now += 20
    beat.beat()
    assert run.renewed_at == clock.now
    clock.now += 25  # 45 s after the claim, 25 s after the renewal: still held
    beat.beat()
    assert not run.lost and driver.calls == 2


def test_lease_05_a_failed_renewal_with_room_left_is_a_warning(clock, caplog):
    """SPEC SE-11: a failed renewal is a warning."""
    driver = ScriptedDriver(ConnectionError("blip"))
    run = make_run(clock)
    clock.now += 10
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        heartbeat(driver, run, clock).beat()
    assert not run.lost and not run.signal.is_set()
    assert "xjobs.heartbeat.failed" in caplog.text and "blip" in caplog.text


def test_lease_06_a_lapsed_window_is_lost_without_calling_the_driver(clock, caplog):
    """SPEC SE-11: a lapse is an error."""
    driver = ScriptedDriver()
    run = make_run(clock)
    clock.now += VIS
    with caplog.at_level(logging.ERROR, logger="django_xjobs"):
        heartbeat(driver, run, clock).beat()
    assert run.lost and driver.calls == 0
    assert "reason=expired" in caplog.text


def test_lease_07_se_14_a_hung_renewal_is_not_doubled_and_the_lapse_is_still_seen(clock):
    release = threading.Event()
    driver = ScriptedDriver(lambda: release.wait(10))
    run = make_run(clock)
    threads = []

    def in_background(renew, target):
        thread = threading.Thread(target=renew, args=(target,))
        threads.append(thread)
        thread.start()

    beat = heartbeat(driver, run, clock, submit=in_background)
    clock.now += 10
    beat.beat()
    clock.now += 10
    beat.beat()  # the first call is still in flight: no second call
    assert driver.calls == 1
    clock.now += 10
    beat.beat()  # 30 s since the claim: lapsed, reported while the call hangs
    assert run.lost
    release.set()
    for thread in threads:
        thread.join(10)
    assert driver.calls == 1


def test_lease_08_only_an_explicit_false_is_a_loss(clock, caplog):
    """SPEC DRV-02: a renewal answers a bool, and only an explicit False is a loss."""
    run = make_run(clock)
    with caplog.at_level(logging.ERROR, logger="django_xjobs"):
        heartbeat(ScriptedDriver(None), run, clock).beat()
        assert not run.lost
        heartbeat(ScriptedDriver(False), run, clock).beat()
    assert run.lost and "reason=not-ours" in caplog.text
    assert run.signal.reason.code == "X_JOB_LEASE_LOST"


def test_lease_09_se_13_a_renewal_that_lands_after_the_lapse_is_a_loss(clock):
    run = make_run(clock)

    def late_success():
        clock.now += VIS  # the call took the whole window
        return True

    before = run.renewed_at
    heartbeat(ScriptedDriver(late_success), run, clock).beat()
    assert run.lost and run.renewed_at == before  # not revived


def test_lease_10_a_renewal_that_fails_after_the_lapse_reports_its_error(clock, caplog):
    run = make_run(clock)

    def late_failure():
        clock.now += VIS
        return ConnectionError("server went away")

    with caplog.at_level(logging.ERROR, logger="django_xjobs"):
        heartbeat(ScriptedDriver(late_failure), run, clock).beat()
    assert run.lost and "server went away" in caplog.text


def test_lease_11_a_loss_is_reported_once_counted_and_then_final(clock, caplog):
    """SPEC SE-11: a loss is counted."""
    before = metrics.value("xjobs_job_leases_lost_total", queue="default")
    driver = ScriptedDriver(False, True, True)
    run = make_run(clock)
    beat = heartbeat(driver, run, clock)
    with caplog.at_level(logging.ERROR, logger="django_xjobs"):
        beat.beat()
        beat.beat()
        beat.beat()
    assert caplog.text.count("xjobs.lease.lost") == 1
    assert driver.calls == 1  # renewal stops for good
    assert metrics.value("xjobs_job_leases_lost_total", queue="default") == before + 1
    assert run.signal.is_set()


def test_lease_12_se_15_a_false_after_the_run_settled_reports_nothing(clock, caplog):
    run = make_run(clock)

    def settles_meanwhile():
        run.settled.set()  # the job was acked while the renewal was on the wire
        return False

    with caplog.at_level(logging.ERROR, logger="django_xjobs"):
        heartbeat(ScriptedDriver(settles_meanwhile), run, clock).beat()
    assert not run.lost and not run.signal.is_set()
    assert "xjobs.lease.lost" not in caplog.text


def test_cancel_05_q_08_a_cancelled_job_is_not_a_lost_lease(clock, caplog):
    """SPEC SE-04: the renewal's refusal is acted on: the run is stopped as cancelled."""
    driver = ScriptedDriver(False)
    driver.state = "cancelled"
    run = make_run(clock)
    with caplog.at_level(logging.INFO, logger="django_xjobs"):
        heartbeat(driver, run, clock).beat()
    assert run.cancelled and not run.lost
    assert run.signal.reason.code == "X_JOB_CANCELLED"
    assert "xjobs.job.cancelled" in caplog.text and "xjobs.lease.lost" not in caplog.text


def test_lease_20_a_renewal_the_database_did_not_answer_marks_the_loss_as_the_outages(clock):
    """A renewal refused for its connection marks the run unanswered: lost at its deadline,
    its settle is a hand-back in its old place, recorded as cut short (``cut_short``); a renewal
    that failed otherwise, or a deadline with no failed renewal, keeps the settle."""
    from django.db import OperationalError

    from django_xjobs import history
    from django_xjobs.drivers.contract import RetryAt
    from django_xjobs.run.execution import Execution, Outcome
    from django_xjobs.run.verdicts import cut_short

    outage, other = make_run(clock), make_run(clock)
    clock.now += 10
    heartbeat(ScriptedDriver(OperationalError("no server")), outage, clock).beat()
    heartbeat(ScriptedDriver(ValueError("not a connection")), other, clock).beat()
    assert (outage.unanswered, other.unanswered) == (True, False)
    job = outage.job
    lost = Execution(Outcome.LEASE_LOST, job, 1.0, RetryAt(job.id, job.lease_token, error="x"))
    back = cut_short(lost).settle
    assert back == RetryAt(
        job.id, job.lease_token, error="x", failure=history.CUT_SHORT, keep_place=True
    )
    ended = Execution(Outcome.COMPLETED, job, 1.0, RetryAt(job.id, job.lease_token))
    assert cut_short(ended) is ended  # only a lost run is handed back
