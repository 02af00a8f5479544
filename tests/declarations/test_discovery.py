"""Jobs that are never loaded, and names that stop existing, are loud.

Jobs are discovered from each installed app's ``jobs.py``; a project that puts them anywhere
else gets messages that say where to look, and a deploy that renames a job is told before its
queued rows are parked as ``X_JOB_UNKNOWN``.
"""

from __future__ import annotations

import io
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
    driver.enqueue(
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
