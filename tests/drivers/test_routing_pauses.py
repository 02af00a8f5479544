"""A job's pause (``pause_jobs``, issue 45) with jobs in several databases (issue 48): the
routing driver keeps it once, in the jobs database, like the fleet's slots, and hands it to
each database's claim, so a paused job runs in none of them until it is resumed. The
``shard`` alias is a second database on the suite's server (tests/settings.py)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from django_xjobs import operations
from django_xjobs.drivers import get_driver
from django_xjobs.limits.operator import pause_jobs, resume_jobs
from django_xjobs.testing import run_until_idle
from tests import jobs

BOTH = ["default", "shard"]


@pytest.mark.django_db(databases=BOTH, transaction=True)
def test_shard_35_a_paused_job_runs_in_no_database_until_resumed():
    xjobs = {
        **settings.XJOBS,
        "QUEUES": ["other", "reports"],
        "QUEUE_DATABASES": {"reports": "shard"},
    }
    with override_settings(XJOBS=xjobs):
        pause_jobs(name="tests.jobs.ok", by="ops:alice")
        there = jobs.ok.using(queue="reports").enqueue(n=1).id
        here = jobs.ok.enqueue(n=2).id
        driver = get_driver()
        told = frozenset(p.target for p in driver.limits().job_pauses())
        assert told == {"tests.jobs.ok"}
        # the routing driver hands the set to each database's claim (the worker's paused=)
        held = driver.runs().claim(
            queues=["default", "reports"],
            limit=10,
            visibility_timeout=30,
            worker_id="w1",
            paused=told,
        )
        assert held == []
        resume_jobs(name="tests.jobs.ok")
        assert driver.limits().job_pauses() == []
        done = run_until_idle(queues=["default", "reports"], driver=driver)
        assert {run.job.id for run in done} == {there, here}
        assert operations.inspect_job(there)["state"] == "done"
