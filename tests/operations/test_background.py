"""A bulk action larger than a batch, done by the library's own job (issue 45, SPEC BULK-14,
BULK-15): ``act_on_matching`` acts at once on a batch or less, and otherwise queues
``django_xjobs.bulk_action`` and answers at once with the audit record its progress is written
to; a run that fails half-way leaves counts that say how far it got, and its retry goes on from
there. On both drivers (``harness``), the job drained with ``run_until_idle()``."""

from __future__ import annotations

import json
import logging
from io import StringIO
from uuid import UUID

import pytest
from django.core.management import call_command

from django_xjobs import crypt, operations
from django_xjobs.declarations import registry
from django_xjobs.errors import AuditRecordNotFoundError, BulkDeleteLiveError, QueueUnknownError
from django_xjobs.operations import background, bulk
from django_xjobs.testing import run_until_idle
from tests.drivers.contract.test_bulk import _dead, _enqueue


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


# --- what the background job keeps of its filter (REDACT-05, REDACT-06) ---------------------

CARD = "4242-0000"
SECRET_FILTER = {"state": "ready", "input": {"card": CARD}}


def _secret_jobs(harness, monkeypatch, settings, name="tests.jobs.ok", **more):
    """Five ready jobs carrying a secret ``card``, the redaction rules set, and a batch of 2,
    so an action on them is the background job's."""
    rules = {"REDACT_KEYS": ["card"], "REDACT": "tests.test_redact.scrub_cards"}
    settings.XJOBS = {**settings.XJOBS, **rules, **more}
    monkeypatch.setattr(bulk, "BATCH", 2)
    given = [{"card": CARD, "order_id": i} for i in range(5)]
    return [_enqueue(harness.driver, f"s{i}", input=v, name=name) for i, v in enumerate(given)]


def _shown(job_id: str) -> str:
    """Every way an operator reads a job: ``inspect_job``, ``xjobs show`` and its ``--json``."""
    text, as_json = StringIO(), StringIO()
    call_command("xjobs", "show", job_id, stdout=text)
    call_command("xjobs", "show", job_id, "--json", stdout=as_json)
    return (
        json.dumps(operations.inspect_job(job_id).to_json()) + text.getvalue() + as_json.getvalue()
    )


def test_redact_05_the_background_jobs_filter_and_reason_are_shown_redacted(
    harness, monkeypatch, settings, caplog
):
    """SPEC REDACT-05: the job runs the filter with its real values, while its audit record,
    ``inspect_job``, ``xjobs show`` and the log show the secret masked; the reason in its input
    is the text the audit keeps (through ``XJOBS["REDACT"]``)."""
    caplog.set_level(logging.DEBUG, logger="django_xjobs")
    ids = _secret_jobs(harness, monkeypatch, settings)
    reason = "card 4111-1111-1111-1111 was reported stolen"
    started = operations.act_on_matching("cancel", SECRET_FILTER, reason=reason, by="ops:a")
    assert started.background
    job = harness.row(UUID(started.job_id))
    assert job.input["reason"] == "card [card] was reported stolen"
    shown = _shown(started.job_id)
    assert "[redacted]" in shown and CARD not in shown and "4111" not in shown
    entry = operations.inspect_action(started.audit_id)
    assert entry.filter["input"] == {"card": "[redacted]"}
    assert entry.reason == "card [card] was reported stolen"
    run_until_idle(queues=[background.QUEUE])
    assert {harness.row(i).state for i in ids} == {"cancelled"}  # the real values matched
    assert {harness.row(i).last_error for i in ids} == {"card [card] was reported stolen"}
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert CARD not in logged and "4111" not in logged


def test_redact_05_a_failed_runs_error_in_the_audit_record_is_scrubbed(
    harness, monkeypatch, settings
):
    """SPEC REDACT-05: the error a failed run writes to the action's audit record passes the
    redaction of every text a run produces: the filter's secrets are masked in it."""
    _secret_jobs(harness, monkeypatch, settings)
    started = operations.act_on_matching("cancel", SECRET_FILTER)
    store = harness.driver.jobs().bulk()

    def failing(action, batch, where):
        raise ValueError(f"no index for input @> {json.dumps(where.input)}")

    monkeypatch.setattr(store, "act", failing)
    run_until_idle(queues=[background.QUEUE])
    failed = operations.inspect_action(started.audit_id)
    assert failed.status == "failed" and "no index for input" in failed.error
    assert CARD not in failed.error and "[redacted]" in failed.error
    assert CARD not in (harness.row(UUID(started.job_id)).last_error or "")


def test_redact_06_under_encryption_keys_the_background_jobs_input_is_sealed(
    harness, monkeypatch, settings
):
    """SPEC REDACT-06: with ``ENCRYPTION_KEYS`` set the job's input — the filter with its real
    values — is stored sealed like any encrypted job's input, readers open and mask it, and
    the job still runs the filter (on a job whose input is clear: CRYPT-06)."""
    keys = {"ENCRYPTION_KEYS": ["IyAVGb74KSM4V7OAxMkA2luUHarE32uaq6xCUOU2ovc="]}
    # the filtered job keeps its input clear, as an input filter needs
    ids = _secret_jobs(harness, monkeypatch, settings, name="tests.jobs.clear_input", **keys)
    where = {**SECRET_FILTER, "name": "tests.jobs.clear_input"}
    started = operations.act_on_matching("cancel", where)
    stored = harness.row(UUID(started.job_id)).input
    assert crypt.is_sealed(stored) and CARD not in json.dumps(stored)
    shown = _shown(started.job_id)
    assert "[redacted]" in shown and CARD not in shown and "encrypted" not in shown
    run_until_idle(queues=[background.QUEUE])
    assert {harness.row(i).state for i in ids} == {"cancelled"}
