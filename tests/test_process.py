"""Real ``manage.py xjobs_worker`` processes, real signals, a ledger the jobs write themselves.

Waits are polls with a deadline on the ledger or the job row, never a fixed sleep.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connection

from django_xjobs.models import Job, JobStep
from django_xjobs.testing.postgres import database_url, url_for_database
from tests import jobs
from tests.models import Ledger

pytestmark = pytest.mark.process
ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "example_project" / "manage.py"


def worker_env(url: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["DATABASE_URL"] = url or url_for_database(database_url(), connection.settings_dict["NAME"])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


class WorkerProcess:
    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        command = [sys.executable, str(MANAGE), "xjobs_worker", "--settings=tests.settings", *args]
        self.proc = subprocess.Popen(
            command,
            env=env or worker_env(),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def send(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def finish(self, timeout: float = 30) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def workers(transactional_db) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(*args: str, **kwargs) -> WorkerProcess:
        process = WorkerProcess(*args, **kwargs)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def wait_for(condition: Callable[[], object], timeout: float = 30, what: str = "") -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")


def ledger(token: str, phase: str) -> list[Ledger]:
    return list(Ledger.objects.filter(token=token, phase=phase))


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

    done = ledger(token, "done")
    assert [(row.pid, row.attempt) for row in done] == [(second.proc.pid, 2)]
    row = Job.objects.get(id=job_id)
    assert (row.attempt, row.result) == (2, {"pid": second.proc.pid, "attempt": 2})


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
    assert (row.state, row.attempt, row.result) == ("done", 2, {"pid": b.proc.pid, "attempt": 2})


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
    name = f"xjobs_empty_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name}")
    try:
        env = worker_env(url_for_database(database_url(), name))
        code, _, err = workers("--burst", env=env).finish()
        assert code == 1
        assert "X_DRIVER_UNAVAILABLE" in err and "migrate" in err
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


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
    """tests.jobs.waiter polls every 5 s (event_poll="5s"); a web process publishes."""
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
    publisher = subprocess.run(
        [
            sys.executable,
            str(MANAGE),
            "shell",
            "--settings=tests.settings",
            "-c",
            "from django_xjobs import publish_event; "
            f"publish_event('order.shipped', {{'order_id': {order}, 'carrier': 'ups'}})",
        ],
        env=worker_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert publisher.returncode == 0, publisher.stderr
    published = time.monotonic()
    wait_for(lambda: Job.objects.get(id=job_id).state == "done", timeout=5 + 3, what="delivery")
    assert time.monotonic() - published <= 5 + 3  # one event_poll, plus a claim and a run
    worker.send(signal.SIGTERM)
    assert worker.finish()[0] == 0
    assert Job.objects.get(id=job_id).result == {"got": {"order_id": order, "carrier": "ups"}}
