"""The settler counts and logs a batch of acks as it did run by run (issue 13: the counter is
added to once per batch, and the completed line is built only when INFO is on). Both drivers."""

from __future__ import annotations

import logging

import pytest

from django_xjobs import metrics
from django_xjobs.worker.worker import Worker
from tests import jobs


def _done() -> float:
    return metrics.value("xjobs_jobs_total", queue="default", outcome="ok")


@pytest.mark.parametrize("level", [logging.INFO, logging.WARNING])
def test_met_02_a_batch_of_acks_counts_and_logs_each_run(live_harness, caplog, level):
    before = _done()
    for n in range(12):
        jobs.ok.enqueue(n=n)
    with caplog.at_level(level, logger="django_xjobs"):
        stats = Worker(
            queues=["default"], concurrency=4, driver=live_harness.driver, burst=True
        ).run()
    assert stats.outcomes["completed"] == 12
    assert _done() - before == 12
    completed = [r for r in caplog.records if getattr(r, "event", None) == "xjobs.job.completed"]
    assert len(completed) == (12 if level == logging.INFO else 0)
