"""Suspects on real worker processes (issue 39 items 2 and 3): a run whose worker died runs next
alone in a child process, while its worker keeps claiming; a run whose worker was told to stop is
no suspect; a poison job is dead-lettered at exactly ``MAX_LEASE_EXPIRIES`` deaths of its own,
and no job that merely shared a process with it is counted or dead-lettered for it.

Each test starts real ``manage.py xjobs_worker`` processes, sends real signals and judges from
the ledger the jobs write (with the pid of the process each run ran in) and from the rows. Waits
are polls on a condition with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import signal
import urllib.request
import uuid

import pytest

from django_xjobs.models import Job
from tests import jobs
from tests.management.test_health_fleet import probe
from tests.models import Ledger
from tests.support.database import free_port
from tests.support.process import WorkerProcess, ledger, wait_for, worker_env
from tests.worker.test_failures_fleet import Supervisor, stop_all

pytestmark = pytest.mark.process

#: short leases: a lapse shows within a test; three threads: room beside a held run
ARGS = ("--queues", "default", "--poll-interval", "100ms", "--visibility-timeout", "2s")


def all_done(ids: list[uuid.UUID]) -> bool:
    return Job.objects.filter(id__in=ids, state="done").count() == len(ids)


def release(token: str) -> None:
    Ledger.objects.create(token=token, phase="release", attempt=0, pid=0)


def gauge(port: int, name: str) -> float | None:
    """The value of the unlabelled gauge ``name`` on the worker's ``--metrics-port``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[1])
    return None


def test_lease_16_a_run_whose_worker_was_told_to_stop_is_no_suspect_and_stalls_nothing(workers):
    """Issue 39 item 2, the deploy: worker A is sent SIGTERM while a run holds past its
    ``--shutdown-timeout``; it exits 75 and marks its presence stopped. The run comes back to
    worker B as any run (in B's own process, no child), counted as nothing, and B goes on
    claiming: four jobs enqueued while it holds all finish before it does."""
    token = f"deploy-{uuid.uuid4()}"
    a = workers(*ARGS, "--concurrency", "3", "--shutdown-timeout", "1s")
    held_id = jobs.gated.enqueue(token=token).id
    wait_for(lambda: ledger(token, "start"), timeout=60, what="A's run to start")
    a.send(signal.SIGTERM)
    code, _, err = a.finish(timeout=60)
    assert code == 75, err  # past --shutdown-timeout with the run in flight
    b = workers(*ARGS, "--concurrency", "3")
    wait_for(lambda: len(ledger(token, "start")) == 2, timeout=60, what="B to take the run back")
    first, second = ledger(token, "start")
    assert (first.pid, second.pid) == (a.proc.pid, b.proc.pid)  # not isolated: B runs it
    beside = [f"beside-{i}-{token}" for i in range(4)]
    beside_ids = [jobs.ledger.enqueue(token=t).id for t in beside]
    wait_for(lambda: all_done(beside_ids), timeout=60, what="B to run jobs beside the re-run")
    assert ledger(token, "done") == [], "the re-run must still hold while the others finished"
    row = Job.objects.get(id=held_id)
    assert (row.state, row.attempt, row.lease_expiries, row.lapsed_holder) == (
        "running",
        2,
        0,
        None,
    )
    assert "told to stop" in row.errors[-1]["message"]
    release(token)
    wait_for(lambda: all_done([held_id]), timeout=60, what="the re-run to finish")
    [err_b] = stop_all(b)
    assert "xjobs.worker.isolating" not in err_b


def test_lease_19_a_suspect_runs_alone_in_a_child_while_its_worker_keeps_claiming(workers):
    """Issue 39 item 2, a real suspect: worker A is SIGKILLed while a run holds. Worker B takes
    the run back as a suspect and runs it in a child process (its ledger pid is neither A's nor
    B's), on one of its three threads: four jobs enqueued meanwhile all finish while it holds.
    The operator sees it: the INFO line ``xjobs.worker.isolating``, ``/readyz`` (200, the run
    named), and the gauge ``xjobs_worker_isolated_runs`` at 1, then 0 once it ended. Its
    end is the child's; the row is done at attempt 2, counted as nothing."""
    token = f"suspect-{uuid.uuid4()}"
    a = workers(*ARGS, "--concurrency", "3")
    held_id = jobs.gated.enqueue(token=token).id
    wait_for(lambda: ledger(token, "start"), timeout=60, what="A's run to start")
    a.kill()
    metrics = free_port()
    b = workers(*ARGS, "--concurrency", "3", "--health-port", "0", "--metrics-port", str(metrics))
    wait_for(lambda: len(ledger(token, "start")) == 2, timeout=60, what="B to isolate the run")
    first, second = ledger(token, "start")
    assert first.pid == a.proc.pid
    assert second.pid not in (a.proc.pid, b.proc.pid), "the suspect ran in B's own process"
    wait_for(lambda: b.saw("xjobs.worker.isolating"), what="the INFO line")
    status, body = probe(b, "/readyz")
    assert status == 200, body
    assert [(run["id"], run["pid"]) for run in body["isolated"]] == [(str(held_id), second.pid)]
    assert "alone in a child process" in body["reason"]
    wait_for(lambda: gauge(metrics, "xjobs_worker_isolated_runs") == 1.0, what="the gauge at 1")
    beside = [f"beside-{i}-{token}" for i in range(4)]
    beside_ids = [jobs.ledger.enqueue(token=t).id for t in beside]
    wait_for(lambda: all_done(beside_ids), timeout=60, what="B to run jobs beside the suspect")
    assert ledger(token, "done") == [], "the suspect must still hold while the others finished"
    assert {r.pid for t in beside for r in ledger(t, "done")} == {b.proc.pid}
    release(token)
    wait_for(lambda: all_done([held_id]), timeout=60, what="the suspect to finish")
    [done] = ledger(token, "done")
    assert done.pid == second.pid
    row = Job.objects.get(id=held_id)
    assert (row.attempt, row.lease_expiries, row.lapsed_holder) == (2, 0, None)
    wait_for(lambda: gauge(metrics, "xjobs_worker_isolated_runs") == 0.0, what="the gauge at 0")
    assert probe(b, "/readyz")[1]["isolated"] == []
    stop_all(b)


@pytest.mark.parametrize("bound", [1, 2])
def test_lease_17_18_a_poison_dies_at_the_bound_and_no_job_beside_it_is_blamed(workers, bound):
    """Issue 39 item 3, with one worker (restarted under a new id each time it dies, as a
    supervisor would: no other worker witnesses a death). A poison job SIGKILLs whatever process
    runs it, once three healthy jobs are in flight beside it. Its first death takes the worker
    and every run in it; nothing says which one caused it, so all four come back as suspects,
    each run alone in a child: the healthy ones finish there, counted as nothing, and the
    poison's children die. It is dead-lettered ``X_JOB_CRASHED`` after exactly ``bound``
    (``MAX_LEASE_EXPIRIES``) deaths of its own, and one worker process died in all."""
    poison = f"poison-{uuid.uuid4()}"
    healthy = [f"healthy-{i}-{uuid.uuid4()}" for i in range(3)]
    # claimed first (higher priority), in flight when the poison strikes
    healthy_ids = [jobs.ledger.using(priority=10).enqueue(token=t, hold=60.0).id for t in healthy]
    poison_id = jobs.kills_its_process.enqueue(token=poison, after=healthy).id
    env = {**worker_env(), "XJOBS_MAX_LEASE_EXPIRIES": str(bound)}
    args = (*ARGS, "--concurrency", "4", "--settings=tests.settings_crashes")

    def start(*more: str) -> WorkerProcess:
        return workers(*more, env=env)

    fleet = Supervisor(start, args, size=1)
    fleet.run_until(
        lambda: Job.objects.get(id=poison_id).state == "dead",
        timeout=120,
        max_started=4,
        what="the poison to be dead-lettered",
    )
    wait_for(lambda: all_done(healthy_ids), timeout=60, what="the healthy jobs to finish")
    fleet.reap()
    fleet.stop()

    assert fleet.deaths == [-signal.SIGKILL], "one worker process died, no more"
    row = Job.objects.get(id=poison_id)
    assert (row.state, row.stop_reason) == ("dead", "terminal"), row.last_error
    assert row.last_error.startswith("X_JOB_CRASHED") and "died alone" in row.last_error
    starts = ledger(poison, "start")
    workers_pids = {process.proc.pid for process in fleet.started}
    assert starts[0].pid in workers_pids  # its first run died with the worker ...
    alone = starts[1:]  # ... each later one alone, in a child: exactly the bound
    assert len(alone) == bound and not {r.pid for r in alone} & workers_pids, starts
    for token, job_id in zip(healthy, healthy_ids, strict=True):
        [done] = ledger(token, "done")
        assert done.pid not in workers_pids  # it ran alone too, and was cleared
        assert (Job.objects.get(id=job_id).state, Job.objects.get(id=job_id).lease_expiries) == (
            "done",
            0,
        )
    assert not Job.objects.filter(id__in=healthy_ids, state="dead").exists()
