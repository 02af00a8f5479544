"""A row the worker cannot decode dies alone (issue 24 §2): decoded row by row after the claim,
dead-lettered at once with ``X_JOB_UNDECODABLE``, its batch-mates run at their own attempt;
and JSON is refused past ``MAX_DEPTH`` where it is written, so nothing accepted is undecodable.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from django.contrib.auth.models import User
from django.db import connection

from django_xjobs import InputInvalidError, payload, publish_event
from django_xjobs.clock import system_clock
from django_xjobs.declarations.registry import get_job
from django_xjobs.drivers.contract import EnqueueRequest
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.models import Job
from django_xjobs.payload import NotJSON, check_json
from django_xjobs.run.execute import execute
from django_xjobs.run.execution import Outcome
from django_xjobs.run.settle import settle
from django_xjobs.run.stop import StopSignal
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.support.process import wait_for

#: deeper than any Python decoder recurses (the issue's case, written by SQL)
POISON_DEPTH = 3000
#: the documented cap (docs/reference/limits); read here so the test names the number
MAX_DEPTH = getattr(payload, "MAX_DEPTH", 100)


def nested(depth: int) -> list:
    """A list ``depth`` levels deep, built without recursion."""
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def nested_text(depth: int) -> str:
    return "[" * depth + "]" * depth


def request(n: int) -> EnqueueRequest:
    inputs = {"n": n}
    return EnqueueRequest(
        name="tests.jobs.ok",
        queue="default",
        input=inputs,
        input_json=json.dumps(inputs),
        idempotency_key=f"k{n}",
        max_attempts=3,
    )


def plant_input(driver, job_id, depth: int) -> None:
    """Make the stored input of ``job_id`` nest ``depth`` levels, as another version or a hand
    written UPDATE could: straight into the store, past every check of the API."""
    if isinstance(driver, MemoryDriver):
        row = driver._rows[job_id]
        driver._rows[job_id] = replace(row, input={"n": nested(depth)})
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE x_jobs SET input = jsonb_build_object('n', %s::jsonb) WHERE id = %s",
            [nested_text(depth), job_id],
        )


def test_an_undecodable_row_dies_alone_and_its_batch_mates_run(harness):
    driver = harness.driver
    ids = [driver.jobs().enqueue(request(n)).id for n in range(4)]
    plant_input(driver, ids[1], POISON_DEPTH)
    claimed = driver.runs().claim(
        queues=["default"], limit=10, visibility_timeout=30, worker_id="w1"
    )
    assert sorted(c.id for c in claimed) == sorted(ids)  # the claim itself survives the row
    by_id = {c.id: c for c in claimed}
    assert "nested too deeply" in by_id[ids[1]].undecodable
    assert all(
        by_id[i].undecodable is None and by_id[i].input == {"n": n}
        for n, i in enumerate(ids)
        if i != ids[1]
    )
    executions = [
        execute(c, StopSignal(), driver=driver, clock=system_clock, handle=get_job(c.name))
        for c in claimed
    ]
    settle(driver, [e.settle for e in executions])
    poison = harness.row(ids[1])
    assert poison.state == "dead" and poison.stop_reason == "terminal"
    assert poison.last_error.startswith("X_JOB_UNDECODABLE: ")
    assert "nested too deeply" in poison.last_error
    assert poison.errors[-1].code == "X_JOB_UNDECODABLE"
    for i in ids:
        if i != ids[1]:
            row = harness.row(i)
            assert (row.state, row.attempt) == ("done", 1)


@pytest.fixture
def admin_client(client, db):
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


@pytest.mark.process
def test_process_a_worker_dead_letters_a_poisoned_row_and_runs_its_neighbours(
    transactional_db, workers
):
    """The issue's case with a real worker: a row inserted by SQL with a 3,000-deep input is
    claimed beside innocent jobs; it is dead with its code, they are done at attempt 1."""
    innocents = [jobs.ok.enqueue(n=n).id for n in range(3)]
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt,"
            " max_attempts, state, priority, run_at, created_at, updated_at)"
            " VALUES (gen_random_uuid(), 'tests.jobs.ok', 'default',"
            " jsonb_build_object('n', %s::jsonb), 'poison', gen_random_uuid(), 0, 3, 'ready',"
            " 1, now(), now(), now()) RETURNING id",
            [nested_text(POISON_DEPTH)],
        )
        poison = cursor.fetchone()[0]
    worker = workers("--queues", "default", "--poll-interval", "100ms", "--concurrency", "4")
    wait_for(
        lambda: (
            Job.objects.filter(id__in=[*innocents, poison], state__in=["done", "dead"]).count() == 4
        ),
        what="the poisoned row and its neighbours to settle",
    )
    row = Job.objects.defer("input").get(id=poison)
    assert (row.state, row.stop_reason, row.attempt) == ("dead", "terminal", 1)
    assert row.last_error.startswith("X_JOB_UNDECODABLE: ")
    assert (
        sorted(Job.objects.filter(id__in=innocents).values_list("state", "attempt"))
        == [("done", 1)] * 3
    )
    assert worker.saw("xjobs.job.undecodable")


# --- the depth cap where JSON is written --------------------------------------------------------


def test_check_json_refuses_deep_nesting_without_recursing():
    with pytest.raises(NotJSON, match=f"nested deeper than {MAX_DEPTH} levels"):
        check_json({"a": nested(10_000)})  # was a raw RecursionError
    with pytest.raises(NotJSON, match="nested deeper"):
        check_json({"a": nested(MAX_DEPTH)})  # the dict around it is the first level
    check_json({"a": nested(MAX_DEPTH - 1)})


def test_check_json_refuses_an_integer_python_cannot_print():
    with pytest.raises(NotJSON, match="more than 4,300 digits"):
        check_json({"a": 10**4300})
    check_json({"a": 10**4299, "b": -(10**4299)})


def test_enqueue_refuses_deep_inputs_with_the_input_code(harness):
    with pytest.raises(InputInvalidError, match="nested deeper than 100 levels"):
        jobs.takes_kwargs.enqueue(a=nested(10_000))
    with pytest.raises(InputInvalidError, match="more than 4,300 digits"):
        jobs.takes_kwargs.enqueue(a=10**5000)


def test_the_deepest_input_accepted_runs_and_renders_in_the_admin(harness, admin_client):
    deepest = nested(MAX_DEPTH - 1)
    job_id = jobs.takes_kwargs.enqueue(a=deepest).id
    [execution] = run_until_idle()
    assert execution.outcome == Outcome.COMPLETED
    if isinstance(harness.driver, MemoryDriver):
        return  # the admin reads the table
    assert admin_client.get("/admin/django_xjobs/job/").status_code == 200
    assert admin_client.get(f"/admin/django_xjobs/job/{job_id}/change/").status_code == 200


def test_event_data_past_the_depth_is_refused(harness):
    with pytest.raises(InputInvalidError, match="nested deeper"):
        publish_event("deep", {"a": nested(MAX_DEPTH + 5)})


def test_the_admin_shows_a_row_too_deep_to_decode(db, admin_client):
    """A row written by SQL past any decoder's reach: the job list and its page still render
    (a 962-deep input made the list answer 500)."""
    job_id = jobs.ok.enqueue(n=1).id
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE x_jobs SET input = %s::jsonb, result = %s::jsonb WHERE id = %s",
            [nested_text(POISON_DEPTH), nested_text(962), job_id],
        )
    assert admin_client.get("/admin/django_xjobs/job/").status_code == 200
    page = admin_client.get(f"/admin/django_xjobs/job/{job_id}/change/")
    assert page.status_code == 200
    assert "nested too deeply" in page.content.decode()


def test_an_undecodable_live_row_can_still_be_cancelled(harness):
    """The operator's way out: cancel answers with the row's trace, its input marked."""
    from django_xjobs import cancel_job

    job_id = harness.driver.jobs().enqueue(request(7)).id
    plant_input(harness.driver, job_id, POISON_DEPTH)
    trace = cancel_job(job_id, reason="poisoned")
    assert trace["state"] == "cancelled"
