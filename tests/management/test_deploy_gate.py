"""The deploy gate (issue 44, SPEC VER-13): ``manage.py xjobs check --deploy [--json]`` and the
system check tagged ``xjobs_deploy`` list the live runs this code would park or leave to no
worker, and fail (exit 1: a ``CommandError``, a ``SystemCheckError``) when there is any."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.core.management.base import SystemCheckError

from django_xjobs.drivers import get_driver
from django_xjobs.drivers.contract import DeclaredVersions, SuspendUntil
from django_xjobs.management.checks import check_deploy_versions
from tests import jobs, versioned
from tests.drivers.contract.support import request


def gate(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", "check", "--deploy", *args, stdout=out)
    return out.getvalue()


def refused(*args: str) -> tuple[str, str]:
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("xjobs", "check", "--deploy", *args, stdout=out)
    return out.getvalue(), str(caught.value)


def started_under(handle, version: int, **inputs) -> None:
    """A live run of ``handle`` first claimed by a worker declaring ``version``."""
    handle.enqueue(**inputs)
    driver = get_driver()
    [job] = driver.runs().claim(
        queues=[handle.queue],
        limit=1,
        visibility_timeout=30.0,
        worker_id=f"v{version}",
        versions=DeclaredVersions({handle.name: (version, False)}),
    )
    assert driver.runs().suspend(SuspendUntil(job.id, job.lease_token, delay=3600))


def test_ver_13_the_gate_passes_when_every_live_run_has_a_worker_of_this_code(db):
    versioned.replays.enqueue(token="new")  # not claimed yet: it starts under this code
    started_under(versioned.replays, 1, token="old")  # replayed here
    started_under(versioned.restarts, 1, token="old")  # restarted here
    started_under(versioned.parks, versioned.VERSION, token="current")
    assert gate() == "no live run is left parked or to no worker by this code\n"
    assert json.loads(gate("--json")) == {"ok": True, "blockers": []}
    assert check_deploy_versions() == []
    call_command("check", "--deploy", "--tag", "xjobs_deploy", stdout=StringIO())


@pytest.mark.parametrize(
    ("build", "fate"),
    [
        (lambda: started_under(versioned.parks, 1, token="old"), "park"),
        (lambda: started_under(versioned.replays, versioned.VERSION + 1, token="new"), "newer"),
        (lambda: started_under(jobs.ok, 2, n=1), "newer"),
        (lambda: get_driver().jobs().enqueue(request(name="tests.jobs.gone", key="g")), None),
    ],
    ids=["parked-by-this-code", "newer-version", "newer-than-v1", "dropped-job"],
)
def test_ver_13_the_gate_fails_on_runs_it_would_park_or_leave_to_no_worker(db, build, fate):
    build()
    text, error = refused()
    assert error.startswith("X_JOB_VERSION: 1 live run(s) of 1 job(s) would be parked")
    [header, line] = text.strip().splitlines()
    assert header.split()[0] == "JOB"
    assert f" {fate or 'undeclared'}: " in line
    shown, _ = refused("--json")
    document = json.loads(shown)
    assert document["ok"] is False
    assert [b["fate"] for b in document["blockers"]] == [fate or "undeclared"]
    [message] = check_deploy_versions()
    assert message.id == "django_xjobs.E030" and message.msg.startswith("X_JOB_VERSION: ")
    with pytest.raises(SystemCheckError):
        call_command("check", "--deploy", "--tag", "xjobs_deploy", stdout=StringIO())


def test_ver_13_a_run_parked_already_still_blocks(db):
    versioned.parks.enqueue(token="parked")
    driver = get_driver()
    [job] = driver.runs().claim(
        queues=["default"],
        limit=1,
        visibility_timeout=30.0,
        worker_id="v1",
        versions=DeclaredVersions({versioned.parks.name: (1, False)}),
    )
    driver.runs().suspend(SuspendUntil(job.id, job.lease_token, error="X_JOB_VERSION", parked=True))
    _, document = refused("--json")
    assert document.startswith("X_JOB_VERSION")


def test_ver_13_the_deploy_check_runs_only_when_asked(db):
    started_under(versioned.parks, 1, token="old")
    call_command("check", stdout=StringIO())  # a plain check does not read the runs
