"""DB-05, SE-60: a job state or step status outside the known lists, read from either driver's
store, is refused with ``X_JOB_ROW_STATUS_UNKNOWN`` naming the row; it is never cast."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from django.db import connection

from django_xjobs import operations
from django_xjobs.drivers.contract import StepRecord
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.errors import JobRowStatusUnknownError
from tests import jobs


def set_state(harness, job_id, state):
    """Write a state no release knows: past the CHECK constraint on PostgreSQL (dropped inside
    the test's transaction, so the rollback restores it), straight into the memory store."""
    if isinstance(harness.driver, MemoryDriver):
        rows = harness.driver._rows
        rows[job_id] = replace(rows[job_id], state=state)
        return
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE x_jobs DROP CONSTRAINT x_jobs_state_check")
        cursor.execute("UPDATE x_jobs SET state = %s WHERE id = %s", [state, job_id])


def add_step(harness, run_id, name, status):
    """A step row with ``status``, written as a raw row (no store would write it)."""
    if isinstance(harness.driver, MemoryDriver):
        record = StepRecord(run_id=run_id, name=name, status=status, position=0)
        harness.driver._steps.setdefault(run_id, {})[name] = replace(
            record, started_at=harness.driver.clock.now()
        )
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO x_job_steps (run_id, name, status, position) VALUES (%s, %s, %s, 0)",
            [run_id, name, status],
        )


def test_db_05_se_60_an_unknown_job_state_is_refused_naming_the_row(harness):
    job = jobs.ok.enqueue(n=1)
    other = jobs.ok.enqueue(n=2)
    set_state(harness, job.id, "paused")
    for read in (
        lambda: harness.driver.reads().get_job(job.id),
        lambda: harness.driver.reads().list_jobs(),
        lambda: operations.inspect_job(str(job.id)),
    ):
        with pytest.raises(JobRowStatusUnknownError) as raised:
            read()
        assert raised.value.code == "X_JOB_ROW_STATUS_UNKNOWN"
        assert str(job.id) in str(raised.value) and "'paused'" in str(raised.value)
    assert harness.driver.reads().get_job(other.id).state == "ready"  # the other rows still read


def test_db_05_se_60_an_unknown_dead_letter_state_cannot_pass_as_dead(harness):
    job = jobs.ok.enqueue(n=1)
    set_state(harness, job.id, "DEAD")  # not cast, not case-folded
    with pytest.raises(JobRowStatusUnknownError):
        harness.driver.reads().get_job(job.id)
    assert harness.driver.reads().dead_letters() == []


def test_db_05_se_60_an_unknown_step_status_is_refused_never_read_as_not_completed(harness):
    run_id = uuid.uuid4()
    add_step(harness, run_id, "charge", "complete")  # a typo of "completed"
    with pytest.raises(JobRowStatusUnknownError) as raised:
        harness.driver.steps().list(run_id)
    message = str(raised.value)
    assert message.startswith("X_JOB_ROW_STATUS_UNKNOWN: ")
    assert str(run_id) in message and "'charge'" in message and "'complete'" in message


def test_db_05_known_statuses_read_as_they_are(harness):
    run_id = uuid.uuid4()
    for i, status in enumerate(("completed", "sleeping", "waiting", "failed")):
        add_step(harness, run_id, f"s{i}", status)
    assert {r.status for r in harness.driver.steps().list(run_id)} == {
        "completed",
        "sleeping",
        "waiting",
        "failed",
    }
