"""Jobs that are never loaded, and names that stop existing, are loud.

Jobs are discovered from each installed app's ``jobs.py``; a project that puts them anywhere
else gets messages that say where to look, and a deploy that renames a job is told before its
queued rows are parked as ``X_JOB_UNKNOWN``.
"""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.core.management import call_command

from django_xjobs.declarations import registry
from django_xjobs.drivers import get_driver
from django_xjobs.drivers.contract import EnqueueRequest
from django_xjobs.errors import QueueUnknownError
from django_xjobs.management.checks import check_unregistered_names
from django_xjobs.worker.worker import Worker
from tests import jobs


def test_an_unknown_queue_says_where_jobs_are_discovered_from(db):
    with pytest.raises(QueueUnknownError) as caught:
        jobs.ok.using(queue="invoices").enqueue(n=1)
    message = str(caught.value)
    assert "no job declares queue 'invoices'" in message
    assert "jobs.py module of each app in INSTALLED_APPS" in message
    assert "tests.jobs" in message  # the modules it did find
    assert "jobs.py" in caught.value.hint


def test_an_unknown_queue_with_no_jobs_at_all_says_none_was_found(monkeypatch):
    monkeypatch.setattr(registry.jobs, "_items", {})
    assert registry.discovered().endswith("(none was found)")


def test_a_worker_with_no_registered_jobs_warns_where_it_looked(harness, monkeypatch, caplog):
    monkeypatch.setattr(registry.jobs, "_items", {})
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        Worker(queues=["default"], driver=harness.driver, burst=True).run()
    [record] = [r for r in caplog.records if getattr(r, "event", "") == "xjobs.worker.no_jobs"]
    assert record.levelno == logging.WARNING
    assert "INSTALLED_APPS" in record.getMessage()


def test_a_worker_with_jobs_does_not_warn(harness, caplog):
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        Worker(queues=["default"], driver=harness.driver, burst=True).run()
    assert "xjobs.worker.no_jobs" not in caplog.text


def _live_row(driver, name: str) -> None:
    driver.jobs().enqueue(
        EnqueueRequest(
            name=name,
            queue="default",
            input={},
            input_json="{}",
            idempotency_key="k",
            max_attempts=3,
        )
    )


# a database check: it reads x_jobs through the default (PostgreSQL) driver


def test_check_with_database_warns_about_live_rows_nobody_registers(db):
    _live_row(get_driver(), "shop.jobs.send_reciept")  # renamed in the code since
    [warning] = check_unregistered_names(databases=["default"])
    assert warning.id == "django_xjobs.W003"
    assert "shop.jobs.send_reciept" in warning.msg and "X_JOB_UNKNOWN" in warning.hint
    out, err = io.StringIO(), io.StringIO()
    call_command("check", "--database", "default", stdout=out, stderr=err)
    assert "django_xjobs.W003" in out.getvalue() + err.getvalue()


def test_check_without_database_reads_no_rows(db):
    _live_row(get_driver(), "shop.jobs.gone")
    assert check_unregistered_names(databases=None) == []


def test_check_is_quiet_when_every_live_name_is_registered(db):
    jobs.ok.enqueue(n=1)
    assert check_unregistered_names(databases=["default"]) == []


@pytest.mark.process
def test_job_12_20_a_fresh_process_knows_what_its_apps_jobs_py_declare_and_nothing_else():
    """SPEC JOB-12: a fresh ``manage.py`` process, which nothing imports jobs into by hand, knows
    every job its installed apps' ``jobs.py`` declare (``tests/jobs.py`` and the modules it
    imports, and ``django_xjobs/jobs.py``): ``ready()`` imports each one. Nothing else is registered: not a ``@job`` in a
    module no ``jobs.py`` imports (``tests/undiscovered.py``), nor those the test modules
    declare, and ``jobs.py``'s other names (helpers, ``Retry`` policies, models) are not looked
    at. SPEC JOB-20: every name it knows was built by ``@job``, ``@cron`` or ``@backfill``."""
    from tests.support.database import closed_port_url
    from tests.support.process import run_manage

    done = run_manage(
        "xjobs", "manifest", "--json", "--settings=tests.settings", url=closed_port_url()
    )
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    known = {j["name"] for j in listed["jobs"]} | {b["name"] for b in listed["backfills"]}
    discovered = ("tests.jobs", "tests.backfills", "tests.crons", "tests.tasks", "tests.versioned")
    # and what the app's own jobs.py imports: the admin's bulk action past a batch (issue 45)
    discovered += ("django_xjobs.operations.background",)
    declared = {h.name for h in registry.registered_jobs() if h.fn.__module__ in discovered}
    assert len(declared) > 50 and "tests.jobs.ok" in declared
    assert known == declared
    crons = {c.name for c in registry.crons.all() if c.origin.startswith(discovered)}
    assert crons and {c["name"] for c in listed["crons"]} == crons
    assert "tests.undiscovered.stray" not in known
