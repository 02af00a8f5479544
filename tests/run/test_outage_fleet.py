"""A database outage is not a worker crash (issue 12 item 2), with real worker processes.

The workers reach PostgreSQL through a TCP proxy this test runs on 127.0.0.1; cutting it closes
every connection and refuses new ones at once, so every statement of every worker fails with a
connection error until it is restored: the same for the settler, the heartbeat and the claim.
The ledger (written by the handlers) is the proof: lost = 0, completed twice = 0, stuck = 0,
and no healthy job dead-lettered as X_JOB_CRASHED.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator

import pytest

from django_xjobs.models import Job, Worker
from tests import jobs
from tests.models import Ledger
from tests.support.process import WorkerProcess, ledger, wait_for, worker_env
from tests.support.proxy import CuttableProxy

pytestmark = pytest.mark.process


@pytest.fixture
def proxy() -> Iterator[CuttableProxy]:
    front = CuttableProxy()
    yield front
    front.close()


def hold_outage(proxy: CuttableProxy, seconds: float, *fleet: WorkerProcess) -> None:
    """Keep the database cut off for ``seconds``, and see every worker notice it."""
    cut_at = time.monotonic()
    wait_for(
        lambda: (
            time.monotonic() - cut_at >= seconds
            and all(w.saw("xjobs.worker.claim_failed") for w in fleet)
        ),
        timeout=seconds + 30,
        what="the outage to be seen by every worker",
    )
    proxy.restore()


def start_fleet(workers, proxy: CuttableProxy, visibility: str) -> list[WorkerProcess]:
    args = ("--queues", "default", "--poll-interval", "100ms", "--concurrency", "4")
    env = worker_env(proxy.url())
    fleet = [workers(*args, "--visibility-timeout", visibility, env=env) for _ in range(2)]
    wait_for(
        lambda: Worker.objects.filter(expires_at__isnull=False).count() == 2,
        timeout=60,
        what="both workers to be present",
    )
    return fleet


def stop_fleet(fleet: list[WorkerProcess]) -> list[str]:
    for process in fleet:
        assert process.proc.poll() is None, "".join(process.err)  # no worker died
        process.send(signal.SIGTERM)
    logs = []
    for process in fleet:
        code, _, err = process.finish(timeout=60)
        assert code == 0, err
        logs.append(err)
    assert not Worker.objects.exists()  # a clean stop removes its presence
    return logs


def test_results_finished_before_an_outage_land_after_it_and_nothing_runs_twice(workers, proxy):
    """Three times: jobs record their work, then the database is cut off for 4 s while their
    results wait to be settled (longer than the settle's old fixed retries, shorter than the
    12 s lease). Each result lands once the database is back: done once, never re-run, never
    counted as a crash."""
    fleet = start_fleet(workers, proxy, "12s")
    ids, tokens, straddled = [], [], 0
    for round_ in range(3):
        batch = [f"late-{uuid.uuid4()}-{round_}-{i}" for i in range(3)]
        ids += [jobs.settles_late.enqueue(token=t, linger=1.5).id for t in batch]
        tokens += batch
        wait_for(
            lambda batch=batch: (
                Ledger.objects.filter(token__in=batch, phase="done").count() == len(batch)
            ),
            timeout=60,
            what="the round's jobs to record their work",
        )
        proxy.cut()
        # the runs whose result must now wait for the database (the test's own connection
        # does not go through the proxy)
        straddled += Job.objects.filter(id__in=ids, state="running").count()
        hold_outage(proxy, 4.0, *fleet)
        wait_for(
            lambda ids=tuple(ids): (
                not Job.objects.filter(id__in=ids).exclude(state="done").exists()
            ),
            timeout=60,
            what="every job to settle after the outage",
        )
    logs = stop_fleet(fleet)

    assert straddled >= 3, "the outages must fall between work done and its settle"
    rows = list(Job.objects.filter(id__in=ids).values_list("state", "attempt", "lease_expiries"))
    assert rows == [("done", 1, 0)] * len(ids)  # lost = 0, stuck = 0, never re-claimed
    twice = [t for t in tokens if len(ledger(t, "done")) != 1]
    assert twice == []  # completed twice = 0
    for log in logs:
        assert "xjobs.worker.settle_failed" not in log and "settle_refused" not in log
        assert "xjobs.lease.lost" not in log


def test_leases_lapsed_in_outages_never_dead_letter_a_healthy_job_as_crashed(workers, proxy):
    """Three outages of 6 s against a 3 s lease: the long job in flight lapses each time and is
    re-claimed after the database comes back. Its holder was alive all along, so no lapse counts
    towards MAX_LEASE_EXPIRIES (3): it completes on its fourth attempt instead of being
    dead-lettered as X_JOB_CRASHED. Short jobs enqueued after each outage all complete once."""
    fleet = start_fleet(workers, proxy, "3s")
    token = f"long-{uuid.uuid4()}"
    long_id = jobs.ledger.enqueue(token=token, hold=60.0, hold_attempts=3).id
    short = [f"short-{uuid.uuid4()}-{i}" for i in range(6)]
    short_ids = []
    for attempt in (1, 2, 3):
        wait_for(
            lambda attempt=attempt: [r.attempt for r in ledger(token, "start")][-1:] == [attempt],
            timeout=60,
            what=f"the long job's attempt {attempt} to run",
        )
        proxy.cut()
        hold_outage(proxy, 6.0, *fleet)
        # work enqueued after the outage flows beside the re-claimed job (a result finished
        # before an outage longer than its lease is lost by design: that run goes again)
        batch = [jobs.ledger.enqueue(token=t).id for t in short[2 * (attempt - 1) :][:2]]
        short_ids += batch
        wait_for(
            lambda batch=batch: Job.objects.filter(id__in=batch, state="done").count() == 2,
            timeout=60,
            what="the jobs enqueued after the outage to complete",
        )
    wait_for(
        lambda: (
            not Job.objects.filter(id__in=[long_id, *short_ids])
            .exclude(state="done")
            .exclude(state="dead")
            .exists()
        ),
        timeout=60,
        what="every job to settle",
    )
    logs = stop_fleet(fleet)

    row = Job.objects.get(id=long_id)
    assert (row.state, row.attempt) == ("done", 4), row.last_error
    assert [r.attempt for r in ledger(token, "done")] == [4]
    crashed = Job.objects.filter(last_error__startswith="X_JOB_CRASHED")
    assert not crashed.exists()
    assert not any("xjobs.job.crash_loop" in log for log in logs)
    assert [len(ledger(t, "done")) for t in short] == [1] * len(short)
    assert set(Job.objects.filter(id__in=short_ids).values_list("state", flat=True)) == {"done"}


def test_runs_an_outage_cut_short_start_again_soon_after_it_without_spending_an_attempt(
    workers, proxy
):
    """Issue 25 item 1. Four runs hold their threads when the database goes away for 14 s,
    longer than their 3 s lease: their worker's local deadline stops them, and the settle guard
    gives up handing them back within one window per batch, inside the 4 s stall timeout (a
    window per run added up past it, and the watchdog ended the worker). Once the database
    answers, the first presence renewal that lands ends the claim backoff and the worker sends
    the hand-backs it owes, fenced on their tokens: each run starts again within two visibility
    timeouts of the database being back (not at the end of a 10 s backoff), its cut-short
    attempt counted as a lapse would count it (SPEC T4). Ledger: every job done once, none
    lost, none counted as a crash, the worker never restarted."""
    args = ("--queues", "default", "--concurrency", "4", "--stall-timeout", "4s")
    env = worker_env(proxy.url())
    worker = workers(*args, "--visibility-timeout", "3s", env=env)
    wait_for(lambda: Worker.objects.exists(), timeout=60, what="the worker to be present")
    tokens = [f"cut-{uuid.uuid4()}-{i}" for i in range(4)]
    ids = [jobs.cut_short.enqueue(token=t).id for t in tokens]
    wait_for(
        lambda: Ledger.objects.filter(token__in=tokens, phase="start").count() == len(tokens),
        timeout=60,
        what="the four runs to start",
    )
    proxy.cut()
    hold_outage(proxy, 14.0, worker)
    back = time.time()
    wait_for(
        lambda: Job.objects.filter(id__in=ids, state="done").count() == len(ids),
        timeout=60,
        what="the cut-short runs to complete",
    )
    logs = stop_fleet([worker])

    starts = [sorted(ledger(t, "start"), key=lambda r: r.at) for t in tokens]
    # each run was cut short and started again: a run that never saw the cut ends on attempt 1
    assert [[r.attempt for r in s] for s in starts] == [[1, 2]] * len(tokens), starts
    restarted = [s[1].at.timestamp() - back for s in starts]
    assert max(restarted) <= 2 * 3.0, restarted  # within 2 x the visibility timeout
    rows = list(Job.objects.filter(id__in=ids).values_list("state", "attempt", "lease_expiries"))
    assert rows == [("done", 2, 0)] * len(ids), rows
    crashes = [
        entry
        for errors in Job.objects.filter(id__in=ids).values_list("errors", flat=True)
        for entry in errors or ()
        if entry.get("outcome") == "crashed"
    ]
    assert crashes == []
    assert [[r.attempt for r in ledger(t, "done")] for t in tokens] == [[2]] * len(tokens)
    assert "xjobs.worker.settled_after_outage" in logs[0]
