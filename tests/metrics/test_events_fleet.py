"""The events' latency series from a real worker process (issue 43 item 4, SPEC EVT-16): a run
parked on ``wait_for_event`` in ``manage.py xjobs_worker`` resumes when the event is published,
and the worker's ``--metrics-port`` serves one ``xjobs_event_wait_seconds`` observation for it."""

from __future__ import annotations

import signal
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from django_xjobs import publish_event
from django_xjobs.models import Job
from tests import jobs
from tests.support.database import free_port
from tests.support.process import WorkerProcess, wait_for

pytestmark = pytest.mark.process


def _waits(port: int) -> float | None:
    """The worker's ``xjobs_event_wait_seconds`` count for queue default, None before it serves."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "xjobs_event_wait_seconds_count" and sample.labels == {
                "queue": "default"
            }:
                return sample.value
    return 0.0


def test_evt_16_a_worker_serves_the_wait_of_the_waiter_it_resumed(transactional_db):
    port = free_port()
    job_id = jobs.waiter.enqueue(order_id=1616).id
    worker = WorkerProcess("--queues", "default", "--metrics-port", str(port))
    try:
        wait_for(
            lambda: Job.objects.get(id=job_id).state == "suspended",
            what="the waiter to park on its event",
        )
        served = wait_for(lambda: _waits(port) is not None, what="the worker's metrics endpoint")
        assert served and _waits(port) == 0  # parked: nothing received yet
        publish_event("order.shipped", {"order_id": 1616})
        wait_for(lambda: Job.objects.get(id=job_id).state == "done", what="the waiter to resume")
        wait_for(lambda: _waits(port) == 1, what="the worker to serve one event wait")
        worker.send(signal.SIGTERM)
        code, _, err = worker.finish()
        assert code == 0, err
    finally:
        worker.kill()
