"""``manage.py xjobs retry|cancel|delete|requeue`` by filter, ``xjobs ls --input/--error-code``
and ``xjobs audit`` (issue 45): the filter flags, the question before acting on many jobs, the
refusal without a terminal, ``--json``, and the operator the audit trail names."""

from __future__ import annotations

import getpass
import io
import json
import socket
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from django_xjobs import operations
from django_xjobs.management import bulk_text
from django_xjobs.models import Job, OperatorAction
from django_xjobs.testing.factories import DeadJobFactory, JobFactory


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


class _Terminal(io.StringIO):
    """A stdin that says it is a terminal and answers ``reply``."""

    def isatty(self) -> bool:
        return True


def test_bulk_10_retry_by_filter_flags_with_a_dry_run_first(db):
    wanted = [
        DeadJobFactory(terminal=True, queue="emails", input={"order_id": 4711, "n": i})
        for i in range(3)
    ]
    other = DeadJobFactory(terminal=True, queue="emails", input={"order_id": 1})
    malformed = DeadJobFactory(queue="emails", input={"order_id": 4711})  # a ValueError
    flags = [
        "--state",
        "dead",
        "--queue",
        "emails",
        "--error-code",
        "X_TERMINAL",
        "--input",
        '{"order_id": 4711}',
    ]
    looked = json.loads(xjobs("retry", *flags, "--dry-run", "--json"))
    assert (looked["dry_run"], looked["matched"], looked["changed"]) == (True, 3, 0)
    assert {s["id"] for s in looked["sample"]} == {str(j.id) for j in wanted}
    text = xjobs("retry", *flags, "--dry-run")
    assert text.startswith("would retry 3 job(s) matching")
    assert set(Job.objects.values_list("state", flat=True)) == {"dead"}
    done = json.loads(xjobs("retry", *flags, "--json"))
    assert (done["matched"], done["changed"], done["skipped"]) == (3, 3, 0)
    assert {Job.objects.get(pk=j.id).state for j in wanted} == {"ready"}
    assert Job.objects.get(pk=other.id).state == "dead"
    assert Job.objects.get(pk=malformed.id).state == "dead"


def test_bulk_10_the_single_id_forms_still_work_and_refuse_both_at_once(db):
    job = DeadJobFactory()
    assert xjobs("retry", str(job.id)).startswith(f"queued {job.id}")
    assert xjobs("cancel", str(job.id), "--reason", "no").startswith(f"cancelled {job.id}")
    for args in (["retry"], ["cancel", str(job.id), "--state", "ready"]):
        with pytest.raises(CommandError, match="X_INVARIANT"):
            xjobs(*args)


def test_bulk_10_more_than_100_jobs_are_asked_about_and_refused_without_a_terminal(db, monkeypatch):
    jobs = JobFactory.create_batch(101, queue="partner")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal
    with pytest.raises(CommandError, match="X_CONFIRMATION_REQUIRED"):
        xjobs("cancel", "--queue", "partner")
    assert Job.objects.filter(state="cancelled").count() == 0
    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))
    assert xjobs("cancel", "--queue", "partner").strip() == "nothing changed"
    assert Job.objects.filter(state="cancelled").count() == 0
    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    text = xjobs("cancel", "--queue", "partner", "--reason", "partner down")
    assert text.startswith("cancelled 101 of 101 job(s)")
    assert Job.objects.get(pk=jobs[0].id).last_error == "partner down"
    JobFactory.create_batch(101, queue="later")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert "cancelled 101" in xjobs("cancel", "--queue", "later", "--yes")


def test_bulk_10_delete_and_requeue_by_filter(db):
    dead = DeadJobFactory(queue="emails")
    live = JobFactory(queue="emails")
    with pytest.raises(CommandError, match="X_BULK_DELETE_LIVE"):
        xjobs("delete", "--queue", "emails")
    assert xjobs("delete", "--state", "dead").startswith("deleted 1 of 1 job(s)")
    assert not Job.objects.filter(pk=dead.id).exists()
    with pytest.raises(CommandError, match="X_QUEUE_UNKNOWN"):
        xjobs("requeue", "--queue", "emails", "--to", "nowhere-at-all")
    assert "requeued 1 of 1" in xjobs("requeue", "--queue", "emails", "--to", "other")
    assert Job.objects.get(pk=live.id).queue == "other"
    assert xjobs("retry", "--queue", "nowhere").startswith("no job matches the filter")
    with pytest.raises(CommandError, match="X_FILTER_INVALID"):
        xjobs("retry", "--input", "[1]")


def test_bulk_11_ls_filters_by_input_and_error_code(db):
    order = DeadJobFactory(terminal=True, input={"order_id": 4711})
    other = DeadJobFactory(input={"order_id": 4711})
    JobFactory(input={"order_id": 5})
    rows = json.loads(xjobs("ls", "--json", "--input", '{"order_id": 4711}'))
    assert {r["id"] for r in rows} == {str(order.id), str(other.id)}
    rows = json.loads(xjobs("ls", "--json", "--error-code", "X_TERMINAL"))
    assert [r["id"] for r in rows] == [str(order.id)]
    assert [
        r["id"] for r in operations.list_jobs(error_code="ValueError", input={"order_id": 4711})
    ] == [str(other.id)]


def test_audit_06_the_command_line_records_its_login_and_host(db):
    job = DeadJobFactory()
    xjobs("retry", str(job.id))
    xjobs("pause", "emails")
    xjobs("retry", "--state", "dead", "--queue", "nowhere")  # matches nothing: still recorded
    who = f"cli:{getpass.getuser()}@{socket.gethostname()}"
    assert bulk_text.operator() == who
    assert list(OperatorAction.objects.order_by("id").values_list("verb", "actor")) == [
        ("retry_job", who),
        ("pause_queue", who),
        ("retry_jobs", who),
    ]
    text = xjobs("audit")
    assert text.index("retry_jobs") < text.index("pause_queue") < text.index("retry_job ")
    rows = json.loads(xjobs("audit", "--json", "--verb", "retry_job"))
    assert [(r["verb"], r["job_id"], r["actor"]) for r in rows] == [("retry_job", str(job.id), who)]


def test_bulk_15_xjobs_audit_id_shows_a_background_actions_progress(db, monkeypatch):
    from django_xjobs.operations import act_on_matching, background, bulk
    from django_xjobs.testing import run_until_idle

    for _ in range(3):
        DeadJobFactory()
    monkeypatch.setattr(bulk, "BATCH", 2)
    started = act_on_matching("retry", {"state": "dead"}, by="admin:alice")
    queued = json.loads(xjobs("audit", started.audit_id, "--json"))
    assert (queued["status"], queued["expected"], queued["changed"], queued["by_job"]) == (
        "queued",
        3,
        0,
        started.job_id,
    )
    run_until_idle(queues=[background.QUEUE])
    text = xjobs("audit", started.audit_id)
    assert "retry_jobs by admin:alice" in text
    assert f"done: 3 of 3 matched, 3 changed, 0 skipped (job {started.job_id})" in text
    assert "[done]" in xjobs("audit")
    with pytest.raises(CommandError, match="X_AUDIT_NOT_FOUND"):
        xjobs("audit", "01a24ee1-6928-7449-bb72-4e1d2b214a37")
    with pytest.raises(CommandError, match="X_AUDIT_NOT_FOUND"):
        xjobs("audit", "nope")
