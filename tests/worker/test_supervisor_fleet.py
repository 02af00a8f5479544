"""Bounded resources across real processes (issue 12 item 5): ``xjobs_worker --processes N``
supervises children that are replaced when they die or pass a ``--max-*-per-child`` limit, and a
timed-out body's connection is closed when it ends. The handlers' ledger rows decide; every wait
is a poll with a deadline."""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
from collections import Counter

import pytest
from django.db import connection

from django_xjobs.models import Job
from tests import jobs
from tests.models import Ledger
from tests.support.process import WorkerProcess, wait_for

pytestmark = pytest.mark.process

FLEET = ("--queues", "default", "--poll-interval", "100ms", "--visibility-timeout", "2s")


def spawned(process: WorkerProcess) -> list[int]:
    """The pids of the children the supervisor said it started, in order."""
    return [
        int(m.group(1))
        for line in list(process.err)
        if (m := re.search(r"xjobs\.supervisor\.spawned .*pid=(\d+)", line))
    ]


def replaced(process: WorkerProcess) -> list[str]:
    return [
        m.group(1)
        for line in list(process.err)
        if (m := re.search(r"xjobs\.supervisor\.replaced .*reason=('[^']*'|\S+)", line))
    ]


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for a parent that is gone to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def sockets(pid: int) -> list[str]:
    """The sockets a process holds open (a database connection is one, TCP or Unix)."""
    fds = f"/proc/{pid}/fd"
    links = []
    for fd in os.listdir(fds):
        try:
            links.append(os.readlink(f"{fds}/{fd}"))
        except FileNotFoundError:  # closed while listed
            continue
    return [link for link in links if link.startswith("socket:")]


@pytest.fixture
def supervisors(workers):
    """Start ``xjobs_worker --processes ...``; at teardown its children are killed with it."""
    started: list[WorkerProcess] = []

    def start(*args: str) -> WorkerProcess:
        process = workers(*args)
        started.append(process)
        return process

    yield start
    for process in started:
        for pid in spawned(process):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def done_once(tokens: list[str]) -> Counter[str]:
    """How many times each token's handler reached its end (1 each: nothing lost, no rerun)."""
    rows = Ledger.objects.filter(token__in=tokens, phase="done").values_list("token", flat=True)
    counts = Counter(rows)
    return Counter({token: counts[token] for token in tokens})


def test_two_children_share_the_work_and_a_sigkilled_child_is_replaced(supervisors):
    supervisor = supervisors(*FLEET, "--processes", "2", "--concurrency", "2")
    first = wait_for(lambda: len(spawned(supervisor)) == 2 and spawned(supervisor), timeout=30)
    wait_for(
        lambda: sum("xjobs.worker.started" in line for line in list(supervisor.err)) == 2,
        timeout=30,
        what="both children to be claiming",
    )
    tokens = [f"sup-two-{i}-{uuid.uuid4()}" for i in range(8)]
    for token in tokens:
        jobs.ledger.enqueue(token=token, hold=0.4, heed_signal=False)
    wait_for(lambda: sum(done_once(tokens).values()) == 8, timeout=60, what="the eight jobs")
    pids = set(Ledger.objects.filter(token__in=tokens, phase="done").values_list("pid", flat=True))
    assert pids == set(first), "each child is a worker that runs jobs"

    # SIGKILL the child holding a job: it is replaced, and its job completes once, elsewhere
    victim_token = f"sup-kill-{uuid.uuid4()}"
    victim_id = jobs.ledger.enqueue(token=victim_token, hold=30, heed_signal=False).id
    [start] = wait_for(lambda: Ledger.objects.filter(token=victim_token, phase="start"), timeout=30)
    os.kill(start.pid, signal.SIGKILL)
    wait_for(lambda: "'killed by SIGKILL'" in replaced(supervisor), what="the replacement")
    wait_for(lambda: len(spawned(supervisor)) == 3, what="a third child")
    wait_for(lambda: Job.objects.get(id=victim_id).state == "done", timeout=60, what="the re-run")
    assert done_once([victim_token]) == {victim_token: 1}
    rerun = Ledger.objects.get(token=victim_token, phase="done")
    assert rerun.pid != start.pid and rerun.attempt == 2
    assert start.pid not in {p for p in spawned(supervisor)[2:]}

    supervisor.send(signal.SIGTERM)
    code, _, err = supervisor.finish(timeout=60)
    assert code == 0, err


def test_max_jobs_per_child_replaces_children_and_loses_nothing(supervisors):
    supervisor = supervisors(
        *FLEET, "--processes", "1", "--concurrency", "1", "--max-jobs-per-child", "3"
    )
    tokens = [f"sup-max-{i}-{uuid.uuid4()}" for i in range(8)]
    ids = [jobs.ledger.enqueue(token=token, hold=0.2, heed_signal=False).id for token in tokens]
    wait_for(
        lambda: Job.objects.filter(id__in=ids, state="done").count() == 8,
        timeout=60,
        what="all eight jobs to be settled",
    )
    assert done_once(tokens) == dict.fromkeys(tokens, 1)
    pids = Ledger.objects.filter(token__in=tokens, phase="done").values_list("pid", flat=True)
    assert len(set(pids)) >= 2, "the first child was replaced after its runs"
    assert "max_jobs" in replaced(supervisor)
    assert Ledger.objects.filter(token__in=tokens, phase="start").count() == 8, "nothing re-ran"

    supervisor.send(signal.SIGTERM)
    code, _, err = supervisor.finish(timeout=60)
    assert code == 0, err


def test_an_abandoned_body_past_the_bound_gets_its_child_replaced(supervisors):
    """A hard time limit: the body ignores its signal 30 s past a 300 ms timeout; with
    ``--max-abandoned-per-child 0`` its child drains and exits, which ends the body with it."""
    supervisor = supervisors(
        *FLEET, "--processes", "1", "--concurrency", "2", "--max-abandoned-per-child", "0"
    )
    [first] = wait_for(lambda: spawned(supervisor), timeout=30)
    stuck = f"sup-stuck-{uuid.uuid4()}"
    stuck_id = jobs.overrun_busy.enqueue(token=stuck, hold=30).id
    wait_for(lambda: "max_abandoned" in replaced(supervisor), timeout=30, what="the recycle")
    assert not alive(first), "the child and its runaway body are gone"
    assert Job.objects.get(id=stuck_id).state == "dead"  # its attempt was settled first
    assert not Ledger.objects.filter(token=stuck, phase="end").exists()

    after = f"sup-after-{uuid.uuid4()}"
    jobs.ledger.enqueue(token=after)
    [row] = wait_for(lambda: Ledger.objects.filter(token=after, phase="done"), timeout=30)
    assert row.pid not in (first,) and row.pid in spawned(supervisor)

    supervisor.send(signal.SIGTERM)
    code, _, err = supervisor.finish(timeout=60)
    assert code == 0, err
    assert "xjobs.worker.recycle" in err and "reason=max_abandoned" in err


@pytest.mark.timeout(300)  # the waits below add up past the suite's 120 s on a loaded machine
def test_a_child_above_its_memory_bound_is_replaced_after_a_growing_pause(supervisors):
    """A bound below a fresh child's own size: each child recycles at once, and the supervisor
    slows its restarts down instead of spinning.

    A death is quick (and paused after) only within 5 s of the child's start, and on a loaded
    machine Django's start alone can take longer: then no pause is due, and the restarts are
    slowed by the start-up itself. So this test pins what a log shows on any machine: every
    child is replaced for its memory, and the pauses logged follow the ladder (0.5 s after a
    death that follows a slow one, the next step after a death that follows a quick one). Which
    deaths are quick, and the ladder's growth, are pinned with a clock of the test's own in
    tests/worker/test_supervisor.py."""
    supervisor = supervisors(*FLEET, "--processes", "1", "--max-memory-per-child", "1MB")
    # each child starts Django before it can recycle: minutes of slack on a loaded machine
    try:
        wait_for(lambda: len(replaced(supervisor)) >= 3, timeout=200, what="three recycles")
    except AssertionError as timed_out:  # what the supervisor and its children logged, to see why
        raise AssertionError(
            f"{timed_out}; stderr:\n" + "\n".join(list(supervisor.err)[-60:])
        ) from None
    supervisor.send(signal.SIGTERM)
    code, _, err = supervisor.finish(timeout=60)
    assert code == 0, err

    assert set(replaced(supervisor)) == {"max_memory"}, replaced(supervisor)
    lines = [line for line in err.splitlines() if "xjobs.supervisor.replaced" in line]
    # each replacement's pause (None: restarted at once), in order
    pauses = [
        float(m.group(1)) if (m := re.search(r"restart_in=([\d.]+)", line)) else None
        for line in lines
    ]
    ladder = [0.5, 1.0, 2.0, 5.0, 10.0, 30.0]
    for before, pause in zip([None, *pauses], pauses, strict=False):
        if pause is not None:  # a quick death: the first of a streak, or the next step up
            step = 0 if before is None else min(ladder.index(before) + 1, len(ladder) - 1)
            assert pause == ladder[step], pauses
    assert "xjobs.worker.recycle" in err and "reason=max_memory" in err


def test_sigterm_to_the_supervisor_drains_every_child(supervisors):
    supervisor = supervisors(*FLEET, "--processes", "2", "--concurrency", "1")
    children = wait_for(lambda: len(spawned(supervisor)) == 2 and spawned(supervisor), timeout=30)
    tokens = [f"sup-term-{i}-{uuid.uuid4()}" for i in range(2)]
    for token in tokens:
        jobs.ledger.enqueue(token=token, hold=1.5, heed_signal=False)
    wait_for(
        lambda: Ledger.objects.filter(token__in=tokens, phase="start").count() == 2,
        timeout=30,
        what="one job in each child",
    )
    assert sockets(supervisor.proc.pid) == [], "the supervisor holds no database connection"
    assert all(sockets(pid) for pid in children), "each child is a worker with its connections"
    signalled = time.monotonic()
    supervisor.send(signal.SIGTERM)
    code, _, err = supervisor.finish(timeout=40)  # the children's drain bound and a grace
    assert code == 0, err
    assert time.monotonic() - signalled < 35
    assert done_once(tokens) == dict.fromkeys(tokens, 1), "in-flight runs finished"
    assert not any(alive(pid) for pid in children)
    assert err.count("xjobs.supervisor.exited") == 2 and "reason=drained" in err
    assert "xjobs.supervisor.replaced" not in err


def test_children_of_a_sigkilled_supervisor_drain_and_exit(supervisors):
    """No one would replace them: a child whose supervisor vanished finishes its run and exits."""
    supervisor = supervisors(*FLEET, "--processes", "1", "--concurrency", "1")
    [child] = wait_for(lambda: spawned(supervisor), timeout=30)
    token = f"sup-orphan-{uuid.uuid4()}"
    job_id = jobs.ledger.enqueue(token=token, hold=1.0, heed_signal=False).id
    wait_for(lambda: Ledger.objects.filter(token=token, phase="start"), timeout=30)
    supervisor.kill()
    wait_for(lambda: not alive(child), timeout=30, what="the orphaned child to exit")
    assert any("reason=orphaned" in line for line in list(supervisor.err))
    assert done_once([token]) == {token: 1}
    assert Job.objects.get(id=job_id).state == "done"


def backends() -> int:
    """Connections to the test database other than this test's own."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def test_timed_out_bodies_close_their_connections_when_they_end(workers):
    """40 timeouts once left ~37 idle connections behind; now each body closes its own, so the
    worker's backends stay at its fixed threads' (claim loop, listener, heartbeat, settler) plus
    one per job thread, however many bodies timed out."""
    concurrency = 2
    worker = workers(*FLEET, "--concurrency", str(concurrency))
    bound = concurrency + 4

    def ended() -> int:
        return sum("xjobs.worker.body_ended" in line for line in list(worker.err))

    def round_of(n: int) -> int:
        seen = ended()
        tokens = [f"conn-{i}-{uuid.uuid4()}" for i in range(n)]
        for token in tokens:
            jobs.overrun_busy.enqueue(token=token, hold=0.5)
        wait_for(
            lambda: Ledger.objects.filter(token__in=tokens, phase="end").count() == n,
            timeout=60,
            what=f"{n} bodies to end",
        )
        wait_for(lambda: ended() == seen + n, what="the worker to see them end")
        # a closed connection leaves pg_stat_activity a moment after its close: poll
        [count] = wait_for(
            lambda: (c := backends()) <= bound and [c], timeout=20, what=f"<= {bound} backends"
        )
        return count

    # each round waits for the level; 8 leaked connections would keep it above the bound
    assert round_of(2) <= bound
    assert round_of(8) <= bound, "connections of ended bodies accumulated"
    worker.send(signal.SIGTERM)
    code, _, err = worker.finish()
    assert code == 0, err


def test_one_metrics_port_covers_every_child(supervisors):
    """Issue 30: --processes 2 --metrics-port P serves the runs of both children on P, as one
    count, with their run-time and wait histograms; the children bind no port of their own."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from tests.support.database import free_port

    port = free_port()
    supervisor = supervisors(
        *FLEET, "--processes", "2", "--concurrency", "2", "--metrics-port", str(port)
    )
    children = wait_for(lambda: len(spawned(supervisor)) == 2 and spawned(supervisor), timeout=30)
    wait_for(
        lambda: sum("xjobs.worker.started" in line for line in list(supervisor.err)) == 2,
        timeout=30,
        what="both children to be claiming",
    )
    tokens = [f"sup-metrics-{i}-{uuid.uuid4()}" for i in range(8)]
    for token in tokens:
        jobs.ledger.enqueue(token=token, hold=0.4, heed_signal=False)
    wait_for(lambda: sum(done_once(tokens).values()) == 8, timeout=60, what="the eight jobs")
    ran = set(Ledger.objects.filter(token__in=tokens, phase="done").values_list("pid", flat=True))

    def scraped() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return None
        series = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        ok = series.get(("xjobs_jobs_total", (("outcome", "ok"), ("queue", "default"))))
        return series if ok == 8 else None

    series = wait_for(scraped, timeout=30, what="the supervisor's port to count all eight runs")
    assert isinstance(series, dict)
    assert series[("xjobs_job_duration_seconds_count", (("queue", "default"),))] == 8
    assert series[("xjobs_job_wait_seconds_count", (("queue", "default"),))] == 8
    assert ("xjobs_queue_depth", (("queue", "default"),)) in series  # the database's, too
    assert ran == set(children), "both children ran jobs: the one count is their sum"
    supervisor.send(signal.SIGTERM)
    code, _, err = supervisor.finish(timeout=60)
    assert code == 0, err
