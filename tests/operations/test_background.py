"""A bulk action larger than a batch, done by the library's own job (issue 45, SPEC BULK-14,
BULK-15): ``act_on_matching`` acts at once on a batch or less, and otherwise queues
``django_xjobs.bulk_action`` and answers at once with the audit record its progress is written
to; a run that fails half-way leaves counts that say how far it got, and its retry goes on from
there. On both drivers (``harness``), the job drained with ``run_until_idle()``."""

from __future__ import annotations

from uuid import UUID

import pytest

from django_xjobs import operations
from django_xjobs.declarations import registry
from django_xjobs.errors import AuditRecordNotFoundError, BulkDeleteLiveError, QueueUnknownError
from django_xjobs.operations import background, bulk
from django_xjobs.testing import run_until_idle
from tests.drivers.contract.test_bulk import _dead


def test_bulk_14_a_batch_or_less_is_done_in_the_call(harness):
    d = harness.driver
    ids = [_dead(d, f"k{i}") for i in range(3)]
    started = operations.act_on_matching("retry", {"state": "dead"}, by="admin:alice")
    assert (started.background, started.job_id, started.matched) == (False, None, 3)
    assert started.result is not None and started.result.changed == 3
    assert {harness.row(i).state for i in ids} == {"ready"}
    entry = operations.inspect_action(started.audit_id)
    assert (entry.actor, entry.verb, entry.changed, entry.status) == (
        "admin:alice",
        "retry_jobs",
        3,
        None,
    )


def test_bulk_14_more_than_a_batch_is_done_by_a_background_job(harness, monkeypatch):
    d = harness.driver
    ids = [_dead(d, f"k{i}", queue="emails") for i in range(5)]
    monkeypatch.setattr(bulk, "BATCH", 2)
    started = operations.act_on_matching(
        "retry", {"state": "dead", "queue": "emails"}, by="admin:alice"
    )
    assert (started.background, started.matched, started.result) == (True, 5, None)
    assert {harness.row(i).state for i in ids} == {"dead"}  # nothing done in the call
    queued = operations.inspect_action(started.audit_id)
    assert (queued.status, queued.expected, queued.matched, queued.by_job) == (
        "queued",
        5,
        0,
        started.job_id,
    )
    job = harness.row(UUID(started.job_id))
    assert (job.name, job.queue) == (background.JOB_NAME, background.QUEUE)
    assert background.QUEUE in registry.known_queues()  # a worker without --queues works it
    run_until_idle(queues=[background.QUEUE])
    done = operations.inspect_action(started.audit_id)
    assert (done.status, done.matched, done.changed, done.skipped, done.error) == (
        "done",
        5,
        5,
        0,
        None,
    )
    assert done.started_at is not None and done.finished_at is not None
    assert done.started_at <= done.finished_at
    assert {harness.row(i).state for i in ids} == {"ready"}
    assert harness.row(UUID(started.job_id)).state == "done"


def test_bulk_15_a_run_that_fails_half_way_says_how_far_it_got_and_its_retry_goes_on(
    harness, monkeypatch
):
    d = harness.driver
    ids = [_dead(d, f"k{i}") for i in range(5)]
    monkeypatch.setattr(bulk, "BATCH", 2)
    started = operations.act_on_matching("retry", {"state": "dead"})
    store = d.jobs().bulk()
    act, calls = store.act, []

    def failing(action, batch, where):
        calls.append(batch)
        if len(calls) == 2:
            raise ConnectionError("the database went away")
        return act(action, batch, where)

    monkeypatch.setattr(store, "act", failing)
    run_until_idle(queues=[background.QUEUE])
    failed = operations.inspect_action(started.audit_id)
    assert (failed.status, failed.matched, failed.changed) == ("failed", 2, 2)
    assert "the database went away" in failed.error and failed.finished_at is not None
    assert sorted(harness.row(i).state for i in ids) == ["dead", "dead", "dead", "ready", "ready"]
    monkeypatch.setattr(store, "act", act)
    harness.advance(600)  # past the job's retry delay
    run_until_idle(queues=[background.QUEUE])
    done = operations.inspect_action(started.audit_id)
    assert (done.status, done.matched, done.changed, done.skipped, done.error) == (
        "done",
        5,
        5,
        0,
        None,
    )
    assert {harness.row(i).state for i in ids} == {"ready"}


def test_bulk_14_the_verbs_checks_run_before_anything_is_queued(harness, monkeypatch):
    d = harness.driver
    _dead(d, "k")
    monkeypatch.setattr(bulk, "BATCH", 0)
    with pytest.raises(BulkDeleteLiveError):
        operations.act_on_matching("delete", {"queue": "default"})
    with pytest.raises(QueueUnknownError):
        operations.act_on_matching("requeue", {"state": "dead"}, queue="nowhere")
    assert operations.inspect_audit() == []
    assert d.reads().stats() == [s for s in d.reads().stats() if s.queue != background.QUEUE]


def test_bulk_15_an_unknown_record_is_one_coded_line(harness):
    assert operations.inspect_action("01a24ee1-6928-7449-bb72-4e1d2b214a37") is None
    with pytest.raises(AuditRecordNotFoundError) as caught:
        operations.inspect_action("not-an-id")
    assert caught.value.code == "X_AUDIT_NOT_FOUND"
