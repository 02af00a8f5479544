"""A worker's run is freed by reference counting alone once the worker lets go of it (issue 28):
a run and its signal holding each other made a cycle per job that only the garbage collector
could free, and its passes cost the claim loop more than a no-op job. Its signal still reads the
local deadline while the run is held (SPEC LEASE-15)."""

from __future__ import annotations

import gc
import uuid
import weakref
from datetime import UTC, datetime

from django_xjobs.drivers.contract import ClaimedJob
from django_xjobs.worker.run import DEADLINE_MARGIN, Run

VIS = 10.0


def _run(now: list[float]) -> Run:
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
    return Run(job, "w1", VIS, renewed_at=now[0], monotonic=lambda: now[0])


def test_a_dropped_run_is_freed_without_the_garbage_collector():
    now = [100.0]
    enabled = gc.isenabled()
    gc.disable()
    try:
        run = _run(now)
        signal = run.signal
        gone = weakref.ref(run)
        del run
        assert gone() is None  # freed at once: nothing but the collector could free a cycle
        now[0] += VIS  # past where its deadline was: a signal that outlived its run never asks
        assert not signal.is_set()
    finally:
        if enabled:
            gc.enable()


def test_the_signal_still_reads_the_runs_deadline_while_the_run_is_held():
    now = [100.0]
    run = _run(now)
    now[0] = 100.0 + VIS * (1 - DEADLINE_MARGIN) - 0.01
    assert not run.signal.is_set()
    run.renewed_at = now[0]  # a renewal landed: the deadline moves on with it
    now[0] += VIS * (1 - DEADLINE_MARGIN) - 0.01
    assert not run.signal.is_set()
    now[0] += 0.02
    assert run.signal.is_set() and run.lost and run.lost_reason == "deadline"
