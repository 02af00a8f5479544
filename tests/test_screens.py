"""What the screens say (issue 23): a step's real duration, a cron that never fired, one state
vocabulary on every surface, a cancelled run reported as cancelled, and the smaller lines of the
jobs list and the job page. Each storage case runs on both drivers through ``harness``."""

from __future__ import annotations

import json
import uuid
from io import StringIO

from django.core.management import call_command

from django_xjobs import inspect
from django_xjobs.testing import run_to_completion
from tests import jobs

HOLD = 0.3


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


# --- a step's duration ------------------------------------------------------------------------


def test_step_02_a_step_records_when_its_body_began_not_when_its_record_was_written(harness):
    job_id = jobs.timed_steps.enqueue(token=f"timed-{uuid.uuid4()}", hold=HOLD).id
    run_to_completion(job_id)
    steps = {s["name"]: s for s in inspect.inspect_job(job_id)["steps"]}
    assert steps["slow"]["duration"] >= HOLD  # it read 0.000 s: both times were the write's
    assert steps["quick"]["duration"] < HOLD
    assert steps["slow"]["started_at"] < steps["slow"]["completed_at"]
    assert steps["slow"]["completed_at"] <= steps["quick"]["started_at"]
    shown = xjobs("show", str(job_id))
    [line] = [x for x in shown.splitlines() if x.strip().startswith("slow ")]
    assert float(line.split()[3].rstrip("s")) >= HOLD, line


def test_step_03_a_failed_step_keeps_its_first_start_and_ends_at_its_completion(harness):
    job_id = jobs.timed_steps.enqueue(token=f"timed-{uuid.uuid4()}", fail_first=True).id
    run_to_completion(job_id)
    [slow] = [s for s in inspect.inspect_job(job_id)["steps"] if s["name"] == "slow"]
    assert (slow["status"], slow["attempts"]) == ("completed", 2)
    assert slow["duration"] >= 2 * HOLD  # from the first attempt's start: two bodies ran
