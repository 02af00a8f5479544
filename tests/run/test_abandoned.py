"""A body that passes its timeout holds its capacity until it really ends (SPEC EXEC-05,
issue 11 item 2), on both drivers. The handlers write their own start and end to the ledger;
those rows decide whether two runs overlapped."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from django_xjobs import metrics
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.models import Ledger
from tests.support.process import wait_for

ABANDONED = "xjobs_worker_abandoned_bodies"


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(30)
        assert not thread.is_alive()


def intervals(tokens: list[str]) -> list[tuple[str, int, datetime, datetime]]:
    """(token, attempt, start, end) of every run that reached its end, in start order."""
    rows = Ledger.objects.filter(token__in=tokens, phase__in=("start", "end")).order_by("at", "id")
    starts: dict[tuple[str, int], datetime] = {}
    ends: dict[tuple[str, int], datetime] = {}
    for row in rows:
        (starts if row.phase == "start" else ends)[row.token, row.attempt] = row.at
    return sorted(((*key, starts[key], end) for key, end in ends.items()), key=lambda r: r[2])


def most_at_once(runs: list[tuple[str, int, datetime, datetime]]) -> int:
    """The most runs whose [start, end] covers one instant (each run's own start)."""
    return max(sum(1 for r in runs if r[2] <= at[2] < r[3]) for at in runs)


def test_exec_05_a_capped_body_past_its_timeout_never_overlaps_its_retry(live_harness, caplog):
    token = f"capped-{uuid.uuid4()}"
    # busy 1.5 s against a 1 s slot TTL: only the heartbeat's renewals keep the slot held
    job_id = jobs.overrun_capped.enqueue(token=token, hold=1.5).id
    baseline = metrics.gauge_value(ABANDONED)
    worker = Worker(
        queues=["default"],
        concurrency=4,
        driver=live_harness.driver,
        poll_interval=0.05,
        heartbeat_interval=0.1,
        visibility_timeout=1,
    )
    with caplog.at_level(logging.INFO, logger="django_xjobs"), running(worker):
        # the row is already retried while the first body still runs: it holds its capacity
        wait_for(lambda: worker.stats().abandoned == 1, what="the body to be abandoned")
        assert metrics.gauge_value(ABANDONED) == baseline + 1
        assert live_harness.driver.limits().held_slots("job:tests.jobs.overrun_capped") == 1
        assert live_harness.row(job_id).last_error.startswith("X_JOB_TIMEOUT")
        wait_for(lambda: live_harness.row(job_id).state == "done", what="the retry to complete")
        wait_for(lambda: len(intervals([token])) == 2, what="both attempts to reach their end")
        assert worker.stats().abandoned == 0
    assert metrics.gauge_value(ABANDONED) == baseline
    [(_, first, _, end_1), (_, second, start_2, _)] = intervals([token])
    assert (first, second) == (1, 2)
    assert end_1 <= start_2, "the retry started while the timed-out body still ran"
    assert "xjobs.worker.body_abandoned" in caplog.text
    assert "xjobs.worker.body_ended" in caplog.text
    row = live_harness.row(job_id)
    assert (row.attempt, row.result) == (2, 2)
    assert (
        live_harness.driver.limits().held_slots("job:tests.jobs.overrun_capped") == 0
    )  # released at the end


def test_exec_05_a_worker_never_runs_more_bodies_than_its_concurrency(live_harness):
    tokens = [f"busy-{i}-{uuid.uuid4()}" for i in range(4)]
    ids = [jobs.overrun_busy.enqueue(token=token, hold=1.0).id for token in tokens]
    jobs.live_bodies.update(now=0, max=0)
    worker = Worker(
        queues=["default"], concurrency=2, driver=live_harness.driver, poll_interval=0.05
    )
    with running(worker):
        wait_for(lambda: len(intervals(tokens)) == 4, what="all four bodies to end", timeout=60)
        wait_for(lambda: worker.stats().abandoned == 0, what="the worker to release them")
    assert jobs.live_bodies["max"] == 2  # counted by the handlers themselves
    assert most_at_once(intervals(tokens)) <= 2
    rows = [live_harness.row(i) for i in ids]
    assert {(r.state, r.stop_reason) for r in rows} == {("dead", "timeout")}
