"""The ``django-health-check`` check (issue 29, SPEC HEALTH-05), on both drivers: it fails
while a watched queue has no live worker, passes once one is registered, and warns on a queue
whose oldest ready job waits too long."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.test import RequestFactory
from health_check.exceptions import ServiceUnavailable, ServiceWarning
from health_check.views import HealthCheckView

from django_xjobs.health_check import Queues
from django_xjobs.worker.presence import WorkerPresence
from tests import jobs


def present(driver, *queues: str, ttl: float = 60.0) -> WorkerPresence:
    presence = WorkerPresence(
        driver, worker_id=f"worker-{'-'.join(queues)}", queues=queues, ttl=ttl, in_flight=lambda: 0
    )
    presence.renew()
    return presence


def test_health_05_no_live_worker_for_a_watched_queue_is_unavailable(harness):
    with pytest.raises(ServiceUnavailable) as caught:
        Queues(queues=("default", "emails")).run()
    assert "default, emails" in caught.value.message
    present(harness.driver, "default")
    with pytest.raises(ServiceUnavailable) as caught:
        Queues(queues=("default", "emails")).run()
    assert caught.value.message.endswith("queue(s) emails")
    present(harness.driver, "emails")
    Queues(queues=("default", "emails")).run()


def test_health_05_a_lapsed_worker_serves_nothing(harness):
    present(harness.driver, "default", ttl=5.0)
    Queues(queues=("default",)).run()
    harness.advance(60)  # its presence went a ttl without a beat
    with pytest.raises(ServiceUnavailable):
        Queues(queues=("default",)).run()


def test_health_05_a_ready_job_waiting_too_long_warns(harness):
    present(harness.driver, "default")
    jobs.ok.enqueue(n=1)
    Queues(queues=("default",), max_oldest_ready=300).run()
    harness.advance(600)
    present(harness.driver, "default")  # beats again after the shift
    with pytest.raises(ServiceWarning) as caught:
        Queues(queues=("default",), max_oldest_ready=300).run()
    assert "default (" in caught.value.message


def test_health_05_the_view_answers_500_then_200(live_harness):
    view = HealthCheckView.as_view(checks=[(Queues, {"queues": ("default",)})])
    request = RequestFactory().get("/health/", HTTP_ACCEPT="application/json")
    assert async_to_sync(view)(request).status_code == 500
    present(live_harness.driver, "default")
    answer = async_to_sync(view)(request)
    assert answer.status_code == 200, answer.content
