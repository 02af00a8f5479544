"""A secret passed as a job input and echoed in an exception message leaves the process
nowhere (issue 26, item 3): not in the job row's texts, its failure history or step errors,
the worker's log lines at DEBUG, its spans, the admin pages or ``xjobs show`` — with a real
worker process, whose stderr carries both its log and its exported spans."""

from __future__ import annotations

import json
import signal
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import Client

from django_xjobs import inspect_job
from django_xjobs.models import Job
from tests import jobs
from tests.support.process import wait_for

pytestmark = pytest.mark.process

SECRET = "s3cr3t-hunter2-issue26"


def test_a_secret_input_echoed_in_an_error_leaves_the_process_nowhere(workers):
    """SPEC REDACT-02, REDACT-03, with a real worker process."""
    job_id = jobs.secret_echo.enqueue(user="ada", password=SECRET, note="n").id
    worker = workers(
        "--queues",
        "default",
        "--poll-interval",
        "100ms",
        "-v",
        "3",
        "--settings=tests.settings_traced",
    )
    wait_for(lambda: Job.objects.get(id=job_id).state == "dead", what="the job to die")
    worker.send(signal.SIGTERM)
    _, _, stderr = worker.finish()

    # the worker logged and traced the failures, scrubbed
    assert "xjobs.attempt.failed" in stderr and "traceback of tests.jobs.secret_echo" in stderr
    assert '"name": "exception"' in stderr and "exception.stacktrace" in stderr
    assert "login failed for ada with [redacted]" in stderr
    assert SECRET not in stderr

    # the row (every column but the input the job needs), its history, its step records
    with connection.cursor() as cursor:
        cursor.execute("SELECT (to_jsonb(j) - 'input')::text FROM x_jobs j WHERE id = %s", [job_id])
        [row] = cursor.fetchone()
        cursor.execute(
            "SELECT coalesce(string_agg(coalesce(error, ''), ' '), '') FROM x_job_steps "
            "WHERE run_id = %s",
            [Job.objects.get(id=job_id).run_id],
        )
        [step_errors] = cursor.fetchone()
    assert "login failed for ada with [redacted]" in row
    assert SECRET not in row and SECRET not in step_errors
    attempts = inspect_job(job_id)["attempts"]
    assert len(attempts) == 2
    assert all("[redacted]" in a["message"] and "[redacted]" in a["traceback"] for a in attempts)
    assert SECRET not in json.dumps(inspect_job(job_id).to_json())

    # the admin, for a superuser (who holds the payload permission)
    admin = Client(enforce_csrf_checks=True)
    admin.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    for url in (
        "/admin/django_xjobs/job/",
        f"/admin/django_xjobs/job/{job_id}/change/",
        f"/admin/django_xjobs/job/{job_id}/history/",
        "/admin/django_xjobs/job/?state__exact=dead",
    ):
        page = admin.get(url)
        assert page.status_code == 200 and SECRET not in page.content.decode(), url

    # xjobs show, as text and as JSON
    for args in ((), ("--json",)):
        out = StringIO()
        call_command("xjobs", "show", str(job_id), *args, stdout=out)
        assert "[redacted]" in out.getvalue() and SECRET not in out.getvalue()
