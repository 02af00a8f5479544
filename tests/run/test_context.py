"""The context a run's handler gets (``django_xjobs.run.context``), on both drivers."""

from __future__ import annotations

from django_xjobs.testing import run_until_idle
from tests import jobs


def test_exec_08_a_run_gets_its_whole_context(harness):
    """SPEC EXEC-08: the worker builds the whole ``JobContext`` for every run (ids, name, queue,
    attempt of how many, inputs, tenant, who enqueued it, the signal, the steps, the logger):
    no field is left for a stand-in to fill."""
    result = jobs.describes_its_context.using(tenant_id="acme", enqueued_by="user:9").enqueue(n=3)
    [run] = run_until_idle()
    assert run.outcome == "completed"
    row = harness.row(result.id)
    assert row.result == {
        "job_id": str(result.id),
        "run_id": str(row.run_id),
        "name": "tests.jobs.describes_its_context",
        "queue": "other",
        "attempt": 1,
        "max_attempts": 4,
        "inputs": {"n": 3},
        "tenant_id": "acme",
        "enqueued_by": "user:9",
        "signal_set": False,
        "step": True,
        "logger": True,
    }
