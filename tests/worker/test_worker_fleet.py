"""Real ``manage.py xjobs_worker`` processes, real signals, a ledger the jobs write themselves.

Waits are polls with a deadline on the ledger or the job row, never a fixed sleep.
"""

from __future__ import annotations

import signal
import time
import uuid

import pytest

from django_xjobs.models import Job, JobStep
from tests import jobs
from tests.support.database import unmigrated_database
from tests.support.process import ledger, run_manage, wait_for, worker_env

pytestmark = pytest.mark.process


def test_sigterm_drains_in_flight_work_and_exits_0(workers):
    token = f"term-{uuid.uuid4()}"
    job_id = jobs.ledger.enqueue(token=token, hold=1.0, heed_signal=False).id
    worker = workers("--queues", "default", "--concurrency", "2")
    wait_for(lambda: ledger(token, "start"), what="the job to start")
    worker.send(signal.SIGTERM)
    code, _, err = worker.finish()
    assert code == 0, err
    assert "xjobs.worker.draining" in err
    assert len(ledger(token, "done")) == 1
    assert Job.objects.get(id=job_id).state == "done"


def test_sigint_drains_too(workers):
    token = f"int-{uuid.uuid4()}"
    job_id = jobs.ledger.enqueue(token=token, hold=0.5, heed_signal=False).id
    worker = workers("--queues", "default")
    wait_for(lambda: ledger(token, "start"), what="the job to start")
    worker.send(signal.SIGINT)
    code, _, err = worker.finish()
    assert code == 0, err
    assert Job.objects.get(id=job_id).state == "done"


def test_sigkill_mid_job_is_reclaimed_after_the_visibility_timeout_and_done_once(workers):
    token = f"kill-{uuid.uuid4()}"
    job_id = jobs.ledger.enqueue(token=token, hold=60).id
    first = workers("--queues", "default", "--visibility-timeout", "2s")
    [started] = wait_for(lambda: ledger(token, "start"), what="the first attempt")
    assert started.pid == first.proc.pid
    first.send(signal.SIGKILL)
    first.finish()
    assert Job.objects.get(id=job_id).state == "running"  # orphaned until its lease lapses

    second = workers("--queues", "default", "--visibility-timeout", "2s")
    wait_for(lambda: Job.objects.get(id=job_id).state == "done", what="the re-claimed run")
    second.send(signal.SIGTERM)
    code, _, err = second.finish()
    assert code == 0, err

    # its first run died with its worker: the second runs alone, in a child process of the
    # worker that took it (SPEC LEASE-19), whose pid the run wrote
    [done] = ledger(token, "done")
    assert done.attempt == 2 and done.pid not in (first.proc.pid, second.proc.pid)
    assert second.saw("xjobs.worker.isolating") and f"pid={done.pid}" in err
    row = Job.objects.get(id=job_id)
    assert (row.attempt, row.result) == (2, {"pid": done.pid, "attempt": 2})


def test_q_01_a_worker_whose_lease_lapsed_cannot_ack(workers):
    """Freeze worker A mid-job until its lease lapses; B re-claims and finishes; A then
    finishes too, but its ack is refused by the lease-token fence."""
    token = f"fence-{uuid.uuid4()}"
    job_id = jobs.ledger.enqueue(token=token, hold=2.0, heed_signal=False).id
    a = workers("--queues", "default", "--visibility-timeout", "1s")
    wait_for(lambda: ledger(token, "start"), what="A to start")
    a.send(signal.SIGSTOP)
    try:
        b = workers("--queues", "default", "--visibility-timeout", "1s")
        wait_for(lambda: Job.objects.get(id=job_id).state == "done", what="B to finish")
    finally:
        a.send(signal.SIGCONT)
    wait_for(
        lambda: [r for r in ledger(token, "done") if r.pid == a.proc.pid], what="A's late finish"
    )
    for process in (a, b):
        process.send(signal.SIGTERM)
    code_a, _, err_a = a.finish()
    code_b, _, err_b = b.finish()
    assert (code_a, code_b) == (0, 0), err_a + err_b
    assert "xjobs.job.settle_refused" in err_a
    row = Job.objects.get(id=job_id)
    # A stalled past its lease: B ran the job as a suspect, alone in a child (SPEC LEASE-19)
    [b_done] = [r for r in ledger(token, "done") if r.pid != a.proc.pid]
    assert (row.state, row.attempt, row.result) == ("done", 2, {"pid": b_done.pid, "attempt": 2})


def test_burst_drains_what_is_due_then_exits(workers):
    ids = [jobs.ok.enqueue(n=i).id for i in range(10)]
    code, out, err = workers("--burst", "--concurrency", "3").finish()
    assert code == 0, err
    assert "completed 10" in out
    assert set(Job.objects.filter(id__in=ids).values_list("state", flat=True)) == {"done"}


def test_unknown_queue_on_the_command_line_is_refused(workers):
    code, _, err = workers("--queues", "default,nope", "--burst").finish()
    assert code == 1
    assert "X_QUEUE_UNKNOWN" in err and "nope" in err and "default" in err


def test_a_database_url_that_does_not_connect_is_one_clear_line(workers):
    env = worker_env("postgres://nobody:wrong@127.0.0.1:9/nowhere")
    code, _, err = workers("--burst", env=env).finish()
    assert code == 1
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "X_DRIVER_UNAVAILABLE" in lines[0] and "cannot connect" in lines[0]


def test_a_database_without_the_tables_names_migrate(workers):
    with unmigrated_database("xjobs_empty") as url:
        code, _, err = workers("--burst", env=worker_env(url)).finish()
    assert code == 1
    assert "X_DRIVER_UNAVAILABLE" in err and "migrate" in err


def test_a_sigkill_in_step_3_reruns_step_3_only(workers):
    """Steps 1-2 never run again, step 3 re-runs, steps 4-5 run once (the ledger counts)."""
    token = f"steps-{uuid.uuid4()}"
    job_id = jobs.five_steps.enqueue(token=token, hold=60).id
    first = workers("--queues", "default", "--visibility-timeout", "2s")
    wait_for(lambda: ledger(token, "step3"), what="step 3 to start")
    first.send(signal.SIGKILL)
    first.finish()
    second = workers("--queues", "default", "--visibility-timeout", "2s")
    wait_for(lambda: Job.objects.get(id=job_id).state == "done", what="the resumed run")
    second.send(signal.SIGTERM)
    assert second.finish()[0] == 0
    counts = {f"step{i}": len(ledger(token, f"step{i}")) for i in range(1, 6)}
    assert counts == {"step1": 1, "step2": 1, "step3": 2, "step4": 1, "step5": 1}
    assert Job.objects.get(id=job_id).attempt == 2


def test_an_event_from_another_process_reaches_a_waiting_job_within_one_event_poll(workers):
    """tests.jobs.waiter polls every 5 s (event_poll="5s"); a web process publishes. SPEC EVT-05,
    SE-53: events are stored in the database, so a run waiting in one process sees an event
    published in another."""
    order = int(uuid.uuid4().int % 1_000_000)
    job_id = jobs.waiter.enqueue(order_id=order).id
    worker = workers("--queues", "default")

    def waiting():
        row = Job.objects.get(id=job_id)
        return (
            row.state == "suspended"
            and JobStep.objects.filter(run_id=row.run_id, name="shipped", status="waiting").exists()
        )

    wait_for(waiting, what="the job to wait for its event")
    publisher = run_manage(
        "shell",
        "--settings=tests.settings",
        "-c",
        "from django_xjobs import publish_event; "
        f"publish_event('order.shipped', {{'order_id': {order}, 'carrier': 'ups'}})",
    )
    assert publisher.returncode == 0, publisher.stderr
    published = time.monotonic()
    wait_for(lambda: Job.objects.get(id=job_id).state == "done", timeout=5 + 3, what="delivery")
    assert time.monotonic() - published <= 5 + 3  # one event_poll, plus a claim and a run
    worker.send(signal.SIGTERM)
    assert worker.finish()[0] == 0
    assert Job.objects.get(id=job_id).result == {"got": {"order_id": order, "carrier": "ups"}}
