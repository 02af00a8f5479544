"""The deploy gate's exit codes as a pipeline sees them (issue 44, SPEC VER-13): a real
``manage.py xjobs check --deploy`` and ``manage.py check --deploy --tag xjobs_deploy`` process,
0 when no live run is stranded, 1 with one coded line when one is."""

from __future__ import annotations

import json

import pytest

from django_xjobs.drivers import get_driver
from django_xjobs.drivers.contract import DeclaredVersions, SuspendUntil
from tests import versioned
from tests.support.process import run_manage

pytestmark = pytest.mark.process

SETTINGS = "--settings=tests.settings"


@pytest.mark.django_db(transaction=True)
def test_ver_13_the_gate_exits_0_then_1_once_a_live_run_would_be_parked():
    versioned.parks.enqueue(token="fresh")  # not started: this code runs it
    passed = run_manage("xjobs", "check", "--deploy", SETTINGS)
    assert passed.returncode == 0, passed.stderr
    assert "no live run is left parked" in passed.stdout
    assert run_manage("check", "--deploy", "--tag", "xjobs_deploy", SETTINGS).returncode == 0

    driver = get_driver()
    [job] = driver.runs().claim(  # first claimed by a worker of version 1
        queues=["default"],
        limit=1,
        visibility_timeout=30.0,
        worker_id="v1",
        versions=DeclaredVersions({versioned.parks.name: (1, False)}),
    )
    assert driver.runs().suspend(SuspendUntil(job.id, job.lease_token, delay=3600))
    failed = run_manage("xjobs", "check", "--deploy", "--json", SETTINGS)
    lines = [line for line in failed.stderr.splitlines() if line.strip()]
    assert failed.returncode == 1 and len(lines) == 1, failed.stderr
    assert "X_JOB_VERSION" in lines[0] and "--restart" in lines[0]
    [blocker] = json.loads(failed.stdout)["blockers"]
    assert (blocker["job"], blocker["version"], blocker["fate"]) == (
        versioned.parks.name,
        1,
        "park",
    )
    checked = run_manage("check", "--deploy", "--tag", "xjobs_deploy", SETTINGS)
    assert checked.returncode == 1 and "django_xjobs.E030" in checked.stderr
