"""A run that loses its fleet concurrency slot (SPEC SLOT-04, SLOT-05, SE-10), on both drivers:
the slot row is really taken over in the lease table, so the renewal really answers False."""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import timedelta

import pytest
from django.db import OperationalError, connection

from django_xjobs import Retry, job
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.errors import SlotLostError
from django_xjobs.run.execution import Outcome
from django_xjobs.worker.heartbeat import Heartbeat
from django_xjobs.worker.run import Run
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.support.process import wait_for

KEY = "job:tests.jobs.exclusive"
VIS = 30.0


def take_over(driver, key: str, holder: str = "elsewhere:1") -> int:
    """Let every slot of ``key`` lapse (expiries moved into the past, not waited for), then
    grant slot 0 to ``holder``: the run that held it no longer does."""
    if isinstance(driver, MemoryDriver):
        driver._lease_store.shift(VIS * 2)
    else:
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE x_job_leases SET expires_at = expires_at - %s WHERE lease_key = %s",
                [timedelta(seconds=VIS * 2), key],
            )
    granted = driver.limits().acquire_slot(key, 1, VIS, holder)
    assert granted == 0
    return granted


def held_run(harness) -> tuple[Run, Heartbeat]:
    """A claimed ``exclusive`` job holding its real fleet slot, and a heartbeat that renews it
    in the calling thread."""
    jobs.exclusive.enqueue(token=f"slot-{uuid.uuid4()}", hold=0)
    [claimed] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=VIS, worker_id="w1"
    )
    holder = f"w1:{claimed.id}"  # SPEC SLOT-02
    slot = harness.driver.limits().acquire_slot(KEY, 1, VIS, holder)
    assert slot == 0
    run = Run(claimed, "w1", VIS, slot=(KEY, slot, holder))
    beat = Heartbeat(
        harness.driver,
        lambda: [run],
        interval=VIS / 3,
        visibility_timeout=VIS,
        worker_id="w1",
        database=None,
        submit=lambda renew, run: renew(run),
    )
    return run, beat


def slot_lost_lines(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "xjobs.worker.slot_lost" in r.getMessage()]


def test_slot_04_se_10_a_slot_renewal_answering_false_stops_the_run(harness, caplog):
    run, beat = held_run(harness)
    beat.beat()  # still ours: renewed, nothing said
    assert not run.signal.is_set()
    take_over(harness.driver, KEY)
    leases = harness.driver.limits()
    renewals = []
    renew = leases.renew_slot
    leases.renew_slot = lambda *args: renewals.append(args) or renew(*args)
    try:
        with caplog.at_level(logging.ERROR, logger="django_xjobs"):
            beat.beat()
            beat.beat()  # the slot is not renewed again, and nothing more is said
    finally:
        del leases.renew_slot
    assert len(renewals) == 1, renewals
    reason = run.signal.reason
    assert isinstance(reason, SlotLostError) and reason.code == "X_JOB_SLOT_LOST"
    [line] = slot_lost_lines(caplog)
    text = line.getMessage()
    for field in ("worker=w1", f"id={run.job.id}", f"lease_key={KEY}", "slot=0"):
        assert field in text
    assert not run.lost  # the job's own lease is still held: it is the slot that went
    assert harness.driver.limits().held_slots(KEY) == 1  # the new holder's, untouched


def test_slot_04_a_body_past_its_timeout_stops_renewing_a_lost_slot(harness, caplog):
    """A settled body left running past its timeout keeps its slot renewed (EXEC-05); once a
    renewal answers False it asks no more and says so once, not at every heartbeat."""
    abandoned, beat = held_run(harness)
    take_over(harness.driver, KEY)
    leases = harness.driver.limits()
    renewals = []
    renew = leases.renew_slot
    leases.renew_slot = lambda *args: renewals.append(args) or renew(*args)
    try:
        with caplog.at_level(logging.ERROR, logger="django_xjobs"):
            beat.renew_held_slot(abandoned)
            beat.renew_held_slot(abandoned)
    finally:
        del leases.renew_slot
    assert len(renewals) == 1, renewals
    [line] = slot_lost_lines(caplog)
    assert "abandoned=True" in line.getMessage()


def test_slot_04_a_slot_renewal_that_raises_is_ignored(harness, caplog):
    """The slot's TTL covers a renewal that failed; the next one decides."""
    run, beat = held_run(harness)
    leases = harness.driver.limits()
    calls = []

    def unavailable(*args):
        calls.append(args)
        raise OperationalError("the lease table is unavailable (a test outage)")

    leases.renew_slot = unavailable
    try:
        with caplog.at_level(logging.DEBUG, logger="django_xjobs"):
            beat.beat()
    finally:
        del leases.renew_slot
    assert len(calls) == 1
    assert not run.signal.is_set() and slot_lost_lines(caplog) == []
    beat.beat()  # the store answers again: still ours
    assert not run.signal.is_set()


def test_slot_05_a_false_that_lands_after_the_run_settled_reports_nothing(harness, caplog):
    run, beat = held_run(harness)
    take_over(harness.driver, KEY)
    leases = harness.driver.limits()
    real_renew = leases.renew_slot

    def settles_meanwhile(*args):
        run.settled.set()  # the run settled while its slot renewal was on the wire
        return real_renew(*args)

    leases.renew_slot = settles_meanwhile
    try:
        with caplog.at_level(logging.DEBUG, logger="django_xjobs"):
            beat.beat()
    finally:
        del leases.renew_slot
    assert real_renew(KEY, 0, VIS, run.slot[2]) is False  # it did answer False
    assert not run.signal.is_set() and slot_lost_lines(caplog) == []

    calls = []
    leases.renew_slot = lambda *args: calls.append(args)
    try:
        beat.beat()  # settled: no renewal is even sent
    finally:
        del leases.renew_slot
    assert calls == []


# --- end to end: a worker whose run loses its slot -------------------------------------------

STARTED = threading.Event()


@job(
    name="test_spec_slots.capped",
    idempotency_key="capped:{token}",
    concurrency=1,
    retry=Retry(attempts=3, delay="1s", jitter=False),
)
def capped(ctx, token: str):
    STARTED.set()
    ctx.signal.wait(20)  # bounded: a broken test ends rather than hangs
    ctx.signal.raise_if_set()
    return "ran to the end"


@pytest.fixture(autouse=True)
def _reset():
    STARTED.clear()


def test_slot_04_se_10_a_worker_run_that_loses_its_slot_ends_with_x_job_slot_lost(
    live_harness, caplog
):
    """Two runs never share a cap of 1: the run whose slot was taken over stops, is retried
    like a failure, and its settle leaves the new holder's slot alone."""
    driver = live_harness.driver
    job_id = capped.enqueue(token=f"e2e-{uuid.uuid4()}").id
    worker = Worker(queues=["default"], driver=driver, visibility_timeout=3, heartbeat_interval=0.1)
    thread = threading.Thread(target=worker.run)
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        thread.start()
        try:
            assert STARTED.wait(10), "the capped run never started"
            take_over(driver, "job:test_spec_slots.capped")
            wait_for(lambda: worker.stats().outcomes, what="the run to settle")
        finally:
            worker.stop()
            thread.join(20)
    assert not thread.is_alive()
    assert worker.stats().outcomes == {Outcome.RETRIED: 1}
    row = live_harness.row(job_id)
    assert row.state in ("ready", "delayed") and row.attempt == 1
    assert (row.last_error or "").startswith("X_JOB_SLOT_LOST")
    assert len(slot_lost_lines(caplog)) == 1
    assert driver.limits().held_slots("job:test_spec_slots.capped") == 1  # the new holder keeps it
