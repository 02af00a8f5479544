"""A user's test module, as the guide writes it, under the DEFAULT settings.

The project's own settings turn the outbox off for the driver tests; a user's project does not.
With ``OUTBOX="auto"`` every enqueue in a test runs inside the test's transaction, so it is
staged and never commits: the testing helpers must publish it and find it by the id
``enqueue()`` returned.
"""

from __future__ import annotations

import pytest
from django.test import TestCase, override_settings

from django_xjobs import conf
from django_xjobs.operations import inspect_job
from django_xjobs.testing import FrozenClock, memory_driver, run_to_completion, run_until_idle
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.models import Ledger


@pytest.fixture(autouse=True)
def default_settings():
    with override_settings(XJOBS={}):
        assert conf.get().outbox == "auto"
        yield


def test_invoice_is_sent(db):
    result = jobs.ok.enqueue(n=7)
    assert result.staged  # the default: inside the test's transaction
    [execution] = run_until_idle()
    assert execution.outcome == "completed" and execution.job.id == result.id


def test_work_06_a_timed_body_sees_and_writes_in_the_tests_transaction(db):
    """The guide's promise, "the jobs run on the test's connection, so they see the test's
    uncommitted rows", holds for a job with ``timeout=`` too, whose body runs on a thread of its
    own: that thread borrows the test's connection, and what it writes is rolled back with the
    test."""
    Ledger.objects.create(token="guide-timed", phase="test", attempt=0, pid=0)
    result = jobs.timed_reader.enqueue(token="guide-timed")
    [execution] = run_until_idle()
    assert execution.outcome == "completed" and execution.job.id == result.id
    assert inspect_job(result.id)["result"] == ["body", "test"]
    assert Ledger.objects.filter(token="guide-timed", phase="body").count() == 1


def test_fulfilment_survives_a_week(db):
    job_id = jobs.waiter.enqueue(order_id=7).id
    runs = run_to_completion(
        job_id, clock=FrozenClock(), events={"order.shipped": {"order_id": 7, "carrier": "ups"}}
    )
    assert runs[-1].outcome == "completed"
    assert runs[-1].job.id == job_id


def test_one_pass_of_the_real_worker(db):
    """SPEC WORK-06: ``Worker.tick()`` publishes what the test staged, as the helpers do."""
    result = jobs.ok.enqueue(n=10)
    assert result.staged
    done = Worker(queues=["default"]).tick()
    assert [(e.outcome, e.job.id) for e in done.executions] == [("completed", result.id)]
    assert done.shed == []


def test_with_the_memory_driver(db):
    """SPEC ENQ-02: the driver is looked up at the enqueue, so one installed after the jobs were
    imported takes it."""
    with memory_driver() as driver:
        job_id = jobs.ok.enqueue(n=8).id
        [execution] = run_until_idle()
        assert execution.outcome == "completed"
        assert driver.reads().get_job(job_id).state == "done"


@override_settings(XJOBS={})
class InvoiceTests(TestCase):
    def test_run_to_completion_in_a_test_case(self):
        job_id = jobs.flaky.enqueue(n=9, failures=1).id
        runs = run_to_completion(job_id, clock=FrozenClock())
        self.assertEqual([r.outcome for r in runs], ["retried", "completed"])
        self.assertEqual({r.job.id for r in runs}, {job_id})
