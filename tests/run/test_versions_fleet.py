"""Two real worker processes declaring two versions of the same code (issue 44, SPEC VER-05,
VER-08): a worker never runs a run of a newer version than its own, and a worker of a newer
version that parks old runs parks each once and then passes it by, until a worker of the run's
version finishes it. ``XJOBS_TEST_JOB_VERSION`` makes ``tests/versioned.py`` declare a version;
the ledger the handlers write (with the pid that wrote it) says which worker ran what."""

from __future__ import annotations

import signal
import uuid

import pytest

from django_xjobs.drivers import get_driver
from django_xjobs.models import Job
from tests import jobs, versioned
from tests.models import Ledger
from tests.support.process import wait_for, worker_env

pytestmark = pytest.mark.process

RUNS = 6
ARGS = ("--queues", "default", "--concurrency", "2", "--poll-interval", "100ms")


def worker_of(workers, version: int):
    return workers(*ARGS, env={**worker_env(), "XJOBS_TEST_JOB_VERSION": str(version)})


def stop(worker) -> None:
    worker.send(signal.SIGTERM)
    code, _, err = worker.finish(timeout=60)
    assert code == 0, err


def ledger(prefix: str, phase: str) -> list[tuple[str, int]]:
    rows = Ledger.objects.filter(token__startswith=prefix, phase=phase)
    return list(rows.values_list("token", "pid"))


def suspended_under(workers, handle, version: int, prefix: str) -> list:
    """``RUNS`` runs of ``handle`` started by a worker of ``version``: each did its first
    step and sleeps; the worker is stopped and their naps made due."""
    ids = [handle.enqueue(token=f"{prefix}-{n}").id for n in range(RUNS)]
    worker = worker_of(workers, version)
    wait_for(
        lambda: Job.objects.filter(id__in=ids, state="suspended", version=version).count() == RUNS,
        timeout=60,
        what=f"{RUNS} runs suspended under version {version}",
    )
    stop(worker)
    get_driver().jobs().age(3601)  # every nap is over: each run is due now
    return ids


def markers_done(prefix: str, count: int) -> list:
    """Jobs every worker runs, enqueued after the old runs fell due: once a worker has run them
    all, it has claimed past the old runs (due earlier, so first in claim order) many times."""
    ids = [jobs.ok.enqueue(n=uuid.uuid4().int % 10**9).id for _ in range(count)]
    wait_for(
        lambda: Job.objects.filter(id__in=ids, state="done").count() == count,
        timeout=60,
        what="the marker jobs done",
    )
    return ids


@pytest.mark.timeout(240)
def test_ver_05_a_worker_of_version_1_never_runs_a_run_of_version_2(workers):
    prefix = f"newer-{uuid.uuid4().hex[:8]}"
    ids = suspended_under(workers, versioned.replays, 2, prefix)
    old = worker_of(workers, 1)
    markers_done(prefix, 20)
    rows = Job.objects.filter(id__in=ids)
    assert {(r.state, r.attempt, r.version) for r in rows} == {("suspended", 0, 2)}
    assert ledger(prefix, "after@v1") == []  # version 1 never ran one
    new = worker_of(workers, 2)  # a worker of their version finishes every one
    wait_for(
        lambda: Job.objects.filter(id__in=ids, state="done").count() == RUNS,
        timeout=60,
        what="the version 2 runs done by a worker of version 2",
    )
    assert {pid for _, pid in ledger(prefix, "after@v2")} == {new.proc.pid}
    assert len(ledger(prefix, "after@v2")) == RUNS
    stop(old)
    stop(new)


@pytest.mark.timeout(240)
def test_ver_08_a_worker_of_version_2_parks_old_runs_once_and_one_of_version_1_ends_them(
    workers,
):
    prefix = f"park-{uuid.uuid4().hex[:8]}"
    ids = suspended_under(workers, versioned.parks, 1, prefix)
    new = worker_of(workers, 2)
    wait_for(
        lambda: Job.objects.filter(id__in=ids, parked=True).count() == RUNS,
        timeout=60,
        what="the version 1 runs parked by the worker of version 2",
    )
    parked_at = dict(Job.objects.filter(id__in=ids).values_list("id", "last_attempted_at"))
    markers_done(prefix, 20)  # it claims on, and passes the parked runs by
    rows = Job.objects.filter(id__in=ids)
    assert {(r.state, r.parked, r.attempt, r.version) for r in rows} == {("suspended", True, 0, 1)}
    assert dict(rows.values_list("id", "last_attempted_at")) == parked_at  # claimed once only
    assert all(r.last_error.startswith("X_JOB_VERSION: ") for r in rows)
    assert ledger(prefix, "after@v2") == []
    old = worker_of(workers, 1)
    wait_for(
        lambda: Job.objects.filter(id__in=ids, state="done").count() == RUNS,
        timeout=60,
        what="the parked runs done by a worker of version 1",
    )
    assert {pid for _, pid in ledger(prefix, "after@v1")} == {old.proc.pid}
    assert len(ledger(prefix, "before")) == RUNS  # their first step replayed, never redone
    stop(old)
    stop(new)
