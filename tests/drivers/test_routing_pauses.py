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
from django_xjobs.drivers.contract import JobDriver
from django_xjobs.drivers.routing import RoutingDriver
from django_xjobs.limits.keys import SEPARATOR
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


# --- SHARD-56: resuming a key lifts its pause in every database that holds its row ------------

PER_ACCOUNT = "tests.jobs.per_account"


def _paused_keys(driver: JobDriver, alias: str) -> set[str]:
    assert isinstance(driver, RoutingDriver)
    each = driver.place.drivers[alias]
    return {key for key, until, _running, _starts in each.limits().key_usage() if until}


@pytest.mark.parametrize("kind", ["postgres", "memory"])
@pytest.mark.django_db(databases=BOTH, transaction=True)
def test_shard_56_resuming_a_key_lifts_its_pause_in_every_database(kind):
    xjobs = {
        **settings.XJOBS,
        "QUEUES": ["other", "reports", "limited"],
        "QUEUE_DATABASES": {"limited": "shard"},
        **({"DRIVER": "memory"} if kind == "memory" else {}),
    }
    with override_settings(XJOBS=xjobs):
        driver = get_driver()
        key = PER_ACCOUNT + SEPARATOR + "acme"
        # an operator's pause with an end is written to the key's row in every database
        pause_jobs(name=PER_ACCOUNT, limit_key="acme", until="1h", by="ops:alice")
        assert {alias: _paused_keys(driver, alias) for alias in BOTH} == {
            "default": {key},
            "shard": {key},
        }
        assert resume_jobs(name=PER_ACCOUNT, limit_key="acme")["lifted"] is True
        assert {alias: _paused_keys(driver, alias) for alias in BOTH} == {
            "default": set(),
            "shard": set(),
        }
        # a run's RateLimited pause is in the database the run was in only: lifted there
        assert isinstance(driver, RoutingDriver)
        driver.place.drivers["shard"].limits().pause_key(key, 3600)
        assert resume_jobs(name=PER_ACCOUNT, limit_key="acme")["lifted"] is True
        assert _paused_keys(driver, "shard") == set()
        assert resume_jobs(name=PER_ACCOUNT, limit_key="acme")["lifted"] is False
