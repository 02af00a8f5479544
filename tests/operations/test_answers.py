"""The operator API's answers (issue 41): frozen dataclasses that still read as the dicts they
replaced. Every answer type is checked field by field (``answer[f] == getattr(answer, f)``), its
``to_json()`` dumps as JSON, and a real job's trace reads exactly as the old dict did."""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import timedelta

import pytest

from django_xjobs.drivers.contract import Finish, Presence
from django_xjobs.history import Failure
from django_xjobs.operations import (
    answers,
    inspect_dead_letters,
    inspect_job,
    inspect_outbox,
    inspect_queues,
    inspect_workers,
    list_jobs,
)
from django_xjobs.operations.cron_controls import inspect_crons
from tests import jobs

from .test_operations import BASE, claim, put_steps

#: every answer type the module defines (an alias such as OutboxAction names one of them)
ANSWER_TYPES = {
    value
    for value in vars(answers).values()
    if isinstance(value, type) and issubclass(value, answers.Answer) and value is not answers.Answer
}


def check(answer: answers.Answer, seen: set[type]) -> None:
    """Each field answers by key as by attribute, the answer is frozen and compares equal to
    the JSON it dumps; nested answers are checked too."""
    seen.add(type(answer))
    for field in dataclasses.fields(answer):
        value = getattr(answer, field.name)
        if field.name in answer.keys():  # noqa: SIM118 (keys() is under test)
            assert field.name in answer
            assert answer[field.name] == value
            assert answer.get(field.name, "missing") == value
        else:  # left out while None, as the dict left its key out
            assert value is None and field.name not in answer
            assert answer.get(field.name, "missing") == "missing"
            with pytest.raises(KeyError):
                answer[field.name]
        nested = (
            value
            if isinstance(value, list)
            else list(value.values())
            if isinstance(value, dict)
            else [value]
        )
        for item in nested:
            if isinstance(item, answers.Answer):
                check(item, seen)
    assert "no_such_field" not in answer and answer.get("no_such_field") is None
    with pytest.raises(KeyError):
        answer["no_such_field"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        answer.id = "changed"
    document = answer.to_json()
    assert json.loads(json.dumps(document)) == document == answer
    assert list(document) == answer.keys() == list({**answer})
    assert dict(answer.items()) == document


def test_a_real_jobs_trace_reads_as_the_dict_it_was(harness):
    """The documented shape keeps working: ``trace["state"]``, ``trace["steps"][0]["name"]``,
    and ``to_json()`` is the old dict, key for key and in the old order."""
    first = jobs.ok.enqueue(n=1)
    waiting = jobs.ok.using(after=[first.id]).enqueue(n=2)
    [held] = claim(harness.driver)
    assert held.id == first.id
    put_steps(harness, held, "load", "charge")
    failure = Failure(None, "boom", "builtins.ValueError", "Traceback ...", "dead")
    assert harness.driver.runs().finish(
        Finish(held.id, held.lease_token, "dead", error="boom", failure=failure)
    )
    seen: set[type] = set()

    trace = inspect_job(first.id)
    check(trace, seen)
    assert trace["state"] == trace.state == "dead"
    assert trace["steps"][0]["name"] == trace.steps[0].name == "load"
    assert [a["outcome"] for a in trace["attempts"]] == ["dead"]
    assert trace["dependencies"]["dependants"] == [str(waiting.id)]
    assert "collapsed_from" not in trace and "collapsed_from" not in trace.to_json()
    row = harness.row(first.id)
    document = trace.to_json()
    assert list(document) == [
        "id", "name", "queue", "state", "attempt", "max_attempts", "priority",
        "idempotency_key", "run_id", "run_at", "created_at", "updated_at", "started_at",
        "last_attempted_at", "attempted_by", "last_error", "stop_reason", "input", "result",
        "tenant_id", "traceparent", "enqueued_by", "steps", "retry_delays", "attempts",
        "backfill", "expires_at", "snoozes", "progress", "dependencies", "version", "parked",
    ]  # fmt: skip
    assert document["steps"][0] == {
        "name": "load",
        "status": "completed",
        "started_at": BASE.isoformat(),
        "completed_at": (BASE + timedelta(milliseconds=250)).isoformat(),
        "wake_at": None,
        "duration": 0.25,
        "attempts": 1,
        "error": None,
        "output": {"step": "load"},
    }
    assert document["dependencies"] == {
        "after": [],
        "waiting_on": None,
        "failed": None,
        "run_anyway": False,
        "dependants": [str(waiting.id)],
    }
    assert document["updated_at"] == row.updated_at.isoformat()
    assert document["attempts"][0]["at"] == row.errors[0].at.isoformat()

    dependant = inspect_job(waiting.id)
    check(dependant, seen)
    assert dependant["dependencies"]["after"] == [str(first.id)]

    for summary in list_jobs():
        check(summary, seen)
    [dead] = inspect_dead_letters()
    check(dead, seen)
    assert dead["retry_command"] == f"python manage.py xjobs retry {first.id}"
    assert answers.JobTrace in seen and answers.JobSummary in seen


def test_a_collapsed_trace_names_the_id_asked_for():
    trace = answers.JobTrace(**{**_trace_fields(), "collapsed_from": "0197"})
    assert trace["collapsed_from"] == "0197" and list(trace.to_json())[-1] == "collapsed_from"
    check(trace, set())


def test_the_fleet_and_outbox_answers(harness):
    jobs.ok.enqueue(n=1)
    harness.driver.runs().renew_presence(Presence("w-1", "host", 7, ("default",), 1), 30)
    seen: set[type] = set()
    queues = inspect_queues()
    check(queues, seen)
    assert queues["queues"][0]["ready"] == queues.queues[0].ready == 1
    assert queues["totals"]["ready"] == 1
    [worker] = inspect_workers()
    check(worker, seen)
    assert (worker["id"], worker["queues"], worker["state"]) == ("w-1", ["default"], "alive")
    outbox = inspect_outbox()
    check(outbox, seen)
    assert outbox["entries"] == [] and outbox["quarantined"] == 0
    assert {answers.QueuesReport, answers.QueueDepthRow, answers.WorkerReport} <= seen


def test_the_batch_and_backfill_answers(harness):
    from django_xjobs import Batch, cancel_batch, inspect_batch
    from django_xjobs.operations.backfills import backfill_section

    seen: set[type] = set()
    with Batch(on_complete=jobs.batch_report, input={"tag": "t"}) as batch:
        jobs.ok.enqueue(n=1)
    report = inspect_batch(batch.id)
    check(report, seen)
    assert report["members"][0]["name"] == report.members[0].name == "tests.jobs.ok"
    assert report["callbacks"][0]["on"] == "complete" and "cancelled_now" not in report
    cancelled = cancel_batch(batch.id)
    check(cancelled, seen)
    assert cancelled["cancelled_now"] == 1 and cancelled["members"] == []
    run_id = uuid.uuid4()
    harness.driver.backfills().start(
        run_id=run_id,
        job_id=uuid.uuid4(),
        name="tests.renamed",
        checksum="c",
        app_version="an earlier release",
        environment="production",
    )
    section = backfill_section("tests.renamed", run_id)
    check(section, seen)
    assert section.to_json() == {
        "name": "tests.renamed",
        "status": "running",
        "environment": "production",
        "rows": 0,
        "pages": 0,
        "cursor": None,
        "started_at": section.started_at,
        "completed_at": None,
        "error": None,
    }
    assert {answers.BatchReport, answers.BatchMember, answers.BackfillSection} <= seen


def test_every_answer_type_is_checked(harness):
    """The types no cheap real row reaches here (a quarantined outbox row, a backfill's ledger
    row, a batch) are built by hand; each type's own surface is tested where it is made."""
    seen: set[type] = set()
    for cron in inspect_crons():
        check(cron, seen)
    built = [
        answers.QuarantinedEntry(
            id=str(uuid.uuid4()), database="default", job="tests.jobs.ok", queue="default",
            tenant_id=None, staged_at=BASE.isoformat(), quarantined_at=BASE.isoformat(),
            error_code="54000", error="too big", key_bytes=10, tenant_bytes=None, name_bytes=13,
            key_start="ok:1",
        ),
        answers.OutboxDatabase(pending=0, oldest_pending_seconds=0.0, quarantined=0),
        answers.BackfillSection(
            name="tests.fill", status=None, environment=None, rows=0, pages=0, cursor=None,
            started_at=None, completed_at=None, error=None,
        ),
        answers.BackfillReport(
            name="tests.fill", environments=None, batch=100, rate=1.0, requires=None,
            queue="default", runs_here=True, pending=False,
            latest=answers.BackfillPass(
                run_id=str(uuid.uuid4()), job_id=None, status="completed", environment="prod",
                rows=3, pages=1, cursor="c", started_at=BASE.isoformat(),
                completed_at=BASE.isoformat(), error=None,
            ),
        ),
        answers.BatchReport(
            id=str(uuid.uuid4()), state="open", total=1, pending=1, done=0, dead=0, failed=0,
            cancelled=0, input={"tag": "t"}, created_at=BASE.isoformat(), closed_at=None,
            completed_at=None,
            callbacks=[answers.BatchCallbackReport("complete", "tests.jobs.ok", "id", "default")],
            members=[answers.BatchMember(id="m", name=None, state=None)],
            cancelled_now=2,
        ),
        answers.CronReport(
            name="c", schedule="* * * * *", seconds=None, tz="UTC", catch_up="latest",
            max_catch_up=None, jobs=["tests.jobs.ok"], paused=False, paused_at=None,
            paused_by=None, last_fired=None, next_fires=[BASE.isoformat()],
        ),
        answers.KeyUseReport(
            job="tests.jobs.per_account", key="acme", running=1, concurrency=1,
            rate_limit="10/m", starts_in_window=3, paused_until=None,
        ),
        answers.JobTrace(**_trace_fields()),
        answers.RunVersion(
            job="tests.jobs.ok", version=1, declared=2, old_runs="park", running=0, waiting=0,
            parked=1, fate="park",
        ),
        answers.JobSummary(
            id="i", name="n", queue="q", state="ready", attempt=0, max_attempts=3,
            stop_reason=None, last_error=None, run_at=None, updated_at=None, started_at=None,
            progress=None,
        ),
        answers.DeadLetter(
            id="i", name="n", queue="q", attempt=3, last_error="boom", stop_reason=None,
            failed_at=BASE.isoformat(), retry_command="python manage.py xjobs retry i",
        ),
        answers.QueuesReport(
            driver="memory",
            queues=[answers.QueueDepthRow("q", 0, 0, 0, 0, 0, 0.0, True, 2)],
            totals={},
            oldest_ready_seconds=0.0,
        ),
        answers.WorkerReport(
            id="w", host="h", pid=1, queues=[], started_at=None, last_seen=None, expires_at=None,
            in_flight=0, alive=True, stopped_at=None, state="alive",
        ),
        answers.OutboxReport(
            pending=0, oldest_pending_seconds=0.0, quarantined=0, entries=[], databases={}
        ),
        answers.BulkResult(
            verb="retry", filter={"state": ["dead"]}, dry_run=True, matched=1, changed=0,
            skipped=0, batches=0, sample=[], note=None,
        ),
        answers.AuditEntry(
            id="a", at=BASE.isoformat(), actor="api", verb="retry_jobs", job_id=None,
            target=None, filter={"state": ["dead"]}, reason=None, matched=1, changed=1,
            skipped=0,
        ),
        answers.EventSummary(**_event_fields()),
        answers.EventReport(
            **_event_fields(), payload={"user_id": 7},
            refusals=[answers.EventRefusal("tests.jobs.ok", "X_INPUT_INVALID", "no n")],
        ),
    ]  # fmt: skip
    for answer in built:
        check(answer, seen)
    assert ANSWER_TYPES - seen == set()


def test_an_absent_key_stays_absent_and_an_answer_is_no_dict_of_another_kind():
    report = answers.BatchReport(**{**_batch_fields(), "members": None})
    assert "members" not in report and "cancelled_now" not in report.to_json()
    listed = answers.BatchReport(**{**_batch_fields(), "members": []})
    assert listed["members"] == [] and "members" in listed.to_json()
    assert report != listed and report != {**listed.to_json()}
    assert answers.OutboxDatabase(0, 0.0, 0) == {
        "pending": 0,
        "oldest_pending_seconds": 0.0,
        "quarantined": 0,
    }
    with pytest.raises(TypeError):
        hash(answers.OutboxDatabase(0, 0.0, 0))  # as a dict is not


def _event_fields() -> dict[str, object]:
    return {
        "id": "e", "name": "user.created", "tenant_id": None, "correlation_key": None,
        "published_at": BASE.isoformat(), "expires_at": BASE.isoformat(), "age_seconds": 1.5,
        "released": 1, "started": 0, "cancelled": 0, "refused": 1,
    }  # fmt: skip


def _trace_fields() -> dict[str, object]:
    return {
        "id": "i", "name": "n", "queue": "q", "state": "ready", "attempt": 0,
        "max_attempts": 3, "priority": 0, "idempotency_key": "k", "run_id": "r",
        "run_at": None, "created_at": None, "updated_at": None, "started_at": None,
        "last_attempted_at": None, "attempted_by": None, "last_error": None,
        "stop_reason": None, "input": {"n": 1}, "result": None, "tenant_id": None,
        "traceparent": None, "enqueued_by": None,
        "steps": [
            answers.StepTrace("s", "completed", None, None, None, 0.5, 1, None, {"a": [1]})
        ],
        "retry_delays": [1.0],
        "attempts": [answers.AttemptTrace(1, None, None, "boom", "builtins.ValueError", "", "dead")],
        "backfill": None, "expires_at": None, "snoozes": 0, "progress": None,
        "dependencies": answers.Dependencies([], None, None, None, ["d"]),
    }  # fmt: skip


def _batch_fields() -> dict[str, object]:
    return {
        "id": "b", "state": "open", "total": 0, "pending": 0, "done": 0, "dead": 0,
        "failed": 0, "cancelled": 0, "input": None, "created_at": BASE.isoformat(),
        "closed_at": None, "completed_at": None, "callbacks": [],
    }  # fmt: skip
