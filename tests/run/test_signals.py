"""Django signals for a run's lifecycle (issue 14): ``job_started``, ``job_finished``,
``job_lease_lost``, sent with the job's handle as sender, never failing a run."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from django_xjobs.conf import get as settings
from django_xjobs.run.execution import Outcome
from django_xjobs.run.signals import job_finished, job_lease_lost, job_started
from django_xjobs.testing import run_until_idle
from django_xjobs.worker.run import Run
from django_xjobs.worker.worker import Worker
from tests import jobs


@contextlib.contextmanager
def received(signal, sender=None) -> Iterator[list[dict]]:
    """The keyword arguments (and ``sender``) of every send of ``signal`` inside the block."""
    seen: list[dict] = []

    def receiver(sender, **kwargs):
        kwargs.pop("signal")
        seen.append({"sender": sender, **kwargs})

    signal.connect(receiver, sender=sender, weak=False)
    try:
        yield seen
    finally:
        signal.disconnect(receiver, sender=sender)


def test_a_run_sends_started_then_finished_with_its_handle_job_and_outcome(harness):
    job_id = jobs.ok.enqueue(n=7).id
    with received(job_started) as started, received(job_finished) as finished:
        run_until_idle()
    [start] = started
    assert start["sender"] is jobs.ok and start["job"].id == job_id
    assert start["context"].attempt == 1 and start["context"].inputs == {"n": 7}
    [end] = finished
    assert end["sender"] is jobs.ok and end["job"].id == job_id
    assert (end["outcome"], end["stop_reason"], end["error"]) == ("completed", None, None)
    assert end["duration"] >= 0


def test_finished_says_how_a_failed_run_ended(harness):
    retried, terminal = jobs.flaky.enqueue(n=1).id, jobs.terminal.enqueue(n=1).id
    with received(job_finished) as finished:
        run_until_idle()
    by_id = {f["job"].id: f for f in finished}
    assert (
        by_id[retried]["outcome"] == Outcome.RETRIED
        and "attempt 1 failed" in by_id[retried]["error"]
    )
    assert by_id[terminal]["outcome"] == Outcome.DEAD_LETTERED
    assert by_id[terminal]["stop_reason"] == "terminal"


def test_a_receiver_can_listen_to_one_job(harness):
    jobs.ok.enqueue(n=1)
    jobs.fails.enqueue(n=1)
    with received(job_finished, sender=jobs.ok) as finished:
        run_until_idle()
    assert [f["job"].name for f in finished] == ["tests.jobs.ok"]


def test_a_receiver_that_raises_is_logged_and_the_run_still_settles(harness, caplog):
    def broken(sender, **kwargs):
        raise RuntimeError("receiver bug")

    job_id = jobs.ok.enqueue(n=2).id
    job_started.connect(broken, weak=False)
    job_finished.connect(broken, weak=False)
    try:
        with caplog.at_level(logging.ERROR, logger="django_xjobs"):
            [execution] = run_until_idle()
    finally:
        job_started.disconnect(broken)
        job_finished.disconnect(broken)
    assert execution.outcome == Outcome.COMPLETED
    assert harness.row(job_id).state == "done"
    failures = [r.getMessage() for r in caplog.records if "receiver_failed" in r.getMessage()]
    assert len(failures) == 2 and all("receiver bug" in m for m in failures)


def test_the_worker_sends_finished_once_per_settled_run(live_harness):
    ids = {jobs.ok.enqueue(n=i).id for i in range(5)}
    with received(job_finished) as finished:
        Worker(queues=["default"], concurrency=2, driver=live_harness.driver, burst=True).run()
    assert sorted(f["job"].id for f in finished) == sorted(ids)
    assert {f["outcome"] for f in finished} == {Outcome.COMPLETED}


def test_a_lost_lease_is_sent_once_with_the_worker_and_reason(harness):
    jobs.ok.enqueue(n=3)
    [claimed] = harness.driver.runs().claim(
        queues=["default"],
        limit=1,
        visibility_timeout=settings().visibility_timeout,
        worker_id="w-9",
    )
    run = Run(job=claimed, worker_id="w-9", handle=jobs.ok)  # as admission resolves it
    with received(job_lease_lost) as lost:
        run.lose("expired")
        run.lose("expired")  # reported once
    [event] = lost
    assert event["sender"] is jobs.ok and event["job"].id == claimed.id
    assert (event["worker_id"], event["reason"]) == ("w-9", "expired")
    assert run.signal.is_set()
