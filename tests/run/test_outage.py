"""Backpressure while the database fails (issue 12, item 6): the claim loop backs off, a run
whose connection failed is retried without spending its attempt, and outage logs are bounded."""

from __future__ import annotations

import logging
import time
import uuid

import psycopg.errors
import pytest
from django.db import IntegrityError, OperationalError
from django.test import override_settings

from django_xjobs import Retry, job, log
from django_xjobs.drivers import failures
from django_xjobs.run.execution import Outcome
from django_xjobs.worker.worker import Worker
from tests import jobs

SETTINGS = {"QUEUES": ["other"], "OUTBOX": "off", "POLL_INTERVAL": 0.2}


def too_many_clients() -> OperationalError:
    """What Django raises when the server refuses a connection: 53300, too many clients."""
    try:
        raise OperationalError("sorry, too many clients already") from (
            psycopg.errors.TooManyConnections("sorry, too many clients already")
        )
    except OperationalError as error:
        return error


@job(
    name="test_outage.refused",
    idempotency_key="refused:{n}",
    retry=Retry(attempts=2, delay="100ms", jitter=False),
)
def refused(ctx, n: int = 0):
    raise too_many_clients()


@job(
    name="test_outage.duplicate",
    idempotency_key="duplicate:{n}",
    retry=Retry(attempts=2, delay="100ms", jitter=False),
)
def duplicate(ctx, n: int = 0):
    raise IntegrityError("duplicate key") from psycopg.errors.UniqueViolation("duplicate key")


@pytest.mark.parametrize(
    ("error", "connection"),
    [
        (psycopg.errors.TooManyConnections("too many clients"), True),
        (psycopg.errors.AdminShutdown("terminating connection"), True),
        (psycopg.errors.CannotConnectNow("the database system is starting up"), True),
        (psycopg.errors.ConnectionFailure("connection failure"), True),
        (OperationalError("server closed the connection unexpectedly"), True),
        (psycopg.errors.SerializationFailure("could not serialize"), False),
        (psycopg.errors.UniqueViolation("duplicate key"), False),
        (ValueError("not a database error"), False),
    ],
)
def test_a_connection_failure_is_told_apart_by_sqlstate_and_class(error, connection):
    assert failures.connection_failed(error) is connection
    wrapped = OperationalError(str(error))
    wrapped.__cause__ = error
    assert failures.connection_failed(wrapped) is connection or isinstance(error, ValueError)


def test_a_serialization_failure_is_transient_but_not_a_connection_failure():
    error = psycopg.errors.SerializationFailure("could not serialize")
    assert failures.is_transient(error) and not failures.connection_failed(error)


def _burst(harness):
    return Worker(queues=["default"], concurrency=1, driver=harness.driver, burst=True).run()


@override_settings(XJOBS={**SETTINGS, "OUTAGE_RETRIES": 2})
def test_a_run_refused_a_connection_is_retried_without_spending_its_attempt(live_harness):
    job_id = refused.enqueue(n=int(uuid.uuid4().int % 10**9)).id
    for delay in (1, 2):  # the outage budget: 1 s, then 2 s, attempts given back
        assert _burst(live_harness).outcomes == {Outcome.RETRIED: 1}
        row = live_harness.row(job_id)
        assert (row.state, row.attempt) == ("ready", 0)
        assert "too many clients" in row.last_error
        assert delay - 0.5 < (row.run_at - row.updated_at).total_seconds() <= delay
        live_harness.advance(delay)
    # the budget is spent: from here a connection failure spends attempts like any error
    assert _burst(live_harness).outcomes == {Outcome.RETRIED: 1}
    assert live_harness.row(job_id).attempt == 1
    live_harness.advance(1)
    _burst(live_harness)
    row = live_harness.row(job_id)
    assert (row.state, row.attempt, row.stop_reason) == ("dead", 2, "attempts-exhausted")


@override_settings(XJOBS={**SETTINGS, "OUTAGE_RETRIES": 10})
def test_a_failed_statement_still_spends_the_attempt(live_harness):
    job_id = duplicate.enqueue(n=int(uuid.uuid4().int % 10**9)).id
    _burst(live_harness)
    assert live_harness.row(job_id).attempt == 1


@override_settings(XJOBS={**SETTINGS, "OUTAGE_RETRIES": 0})
def test_outage_retries_0_turns_it_off(live_harness):
    job_id = refused.enqueue(n=int(uuid.uuid4().int % 10**9)).id
    _burst(live_harness)
    assert live_harness.row(job_id).attempt == 1


class FailingClaims:
    """The test's driver: its first ``failures`` claims fail as a refused connection."""

    def __init__(self, driver, failures: int) -> None:
        self.driver = driver
        self.failures = failures
        self.calls: list[float] = []

    def __getattr__(self, name):
        return getattr(self.driver, name)

    def runs(self):  # its claim stands in for the driver's
        return self

    def claim(self, **kwargs):
        self.calls.append(time.monotonic())
        if len(self.calls) <= self.failures:
            raise too_many_clients()
        return self.driver.runs().claim(**kwargs)


def test_the_claim_loop_backs_off_while_claims_fail_and_resumes(live_harness, caplog):
    job_id = jobs.ok.enqueue(n=int(uuid.uuid4().int % 10**9)).id
    driver = FailingClaims(live_harness.driver, failures=5)
    worker = Worker(
        queues=["default"], concurrency=1, driver=driver, burst=True, poll_interval=0.05
    )
    with caplog.at_level(logging.INFO, logger="django_xjobs"):
        stats = worker.run()

    assert stats.outcomes == {Outcome.COMPLETED: 1}
    assert live_harness.row(job_id).state == "done"
    gaps = [b - a for a, b in zip(driver.calls, driver.calls[1:], strict=False)]
    # 0.05 s doubled after each failure, less at most a fifth of jitter
    for n, gap in enumerate(gaps[:5]):
        assert gap >= 0.8 * 0.05 * 2**n, gaps
    failed = [r for r in caplog.records if getattr(r, "event", "") == "xjobs.worker.claim_failed"]
    assert len(failed) <= 1, "claim failures of one kind within 10 s are logged once"
    [resumed] = [r for r in caplog.records if r.event == "xjobs.worker.claim_resumed"]
    assert resumed.fields["failures"] == 5


def test_a_throttled_event_is_logged_once_per_window_and_counts_what_it_held_back(
    caplog, monkeypatch
):
    name = f"xjobs.test.{uuid.uuid4().hex}"
    with caplog.at_level(logging.INFO, logger="django_xjobs"):
        assert log.throttled(logging.ERROR, name, kind="53300", n=1)
        assert not log.throttled(logging.ERROR, name, kind="53300", n=2)
        assert not log.throttled(logging.ERROR, name, kind="53300", n=3)
        assert log.throttled(logging.ERROR, name, kind="57P01", n=4)  # another kind of error
        monkeypatch.setattr(log, "QUIET", 0.0)
        assert log.throttled(logging.ERROR, name, kind="53300", n=5)
    lines = [(r.fields["n"], r.fields.get("suppressed")) for r in caplog.records if r.event == name]
    assert lines == [(1, None), (4, None), (5, 2)]


@pytest.mark.parametrize("value", [-1, 1.5, True, "10"])
def test_outage_retries_must_be_a_whole_number_0_or_more(value):
    from django_xjobs import conf
    from django_xjobs.errors import ConfigInvalidError

    with pytest.raises(ConfigInvalidError, match="OUTAGE_RETRIES"):
        conf.validate({"OUTAGE_RETRIES": value})
    assert conf.validate({"OUTAGE_RETRIES": 0}).outage_retries == 0
