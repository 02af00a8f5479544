"""One settle (issue 11 item 5): each settle value is one fenced driver call, every Complete in
one statement, applied by the same ``settle()`` the worker and ``run_until_idle`` use."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_xjobs import history
from django_xjobs.drivers import install, uninstall
from django_xjobs.drivers.contract import Complete, Finish, RetryAt, Shed, SuspendUntil
from django_xjobs.drivers.postgres import PostgresDriver
from django_xjobs.run.settle import settle
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.conftest import Harness


def claim(harness, count):
    for n in range(count):
        jobs.ok.enqueue(n=n)
    claimed = harness.driver.runs().claim(
        queues=["default"], limit=count, visibility_timeout=30, worker_id="w"
    )
    assert len(claimed) == count
    return sorted(claimed, key=lambda job: job.input["n"])


def test_each_settle_value_lands_as_its_one_state(harness):
    a, b, c, d, e, f = claim(harness, 6)
    failure = history.failure(ValueError("x"), "retried")
    values = [
        Complete(a.id, a.lease_token, '{"n": 0}'),
        RetryAt(c.id, c.lease_token, delay=60, error="E", failure=failure),
        Complete(b.id, b.lease_token),
        SuspendUntil(d.id, d.lease_token, delay=60),
        Finish(e.id, e.lease_token, "failed", stop_reason="terminal", error="T"),
        Shed(f.id, f.lease_token, delay=60, reason="full"),
    ]
    assert settle(harness.driver, values) == {j.lease_token for j in (a, b, c, d, e, f)}
    got = {job.id: harness.row(job.id) for job in (a, b, c, d, e, f)}
    assert (got[a.id].state, got[a.id].result) == ("done", {"n": 0})
    assert (got[b.id].state, got[b.id].result) == ("done", None)
    assert (got[c.id].state, got[c.id].attempt, got[c.id].last_error) == ("ready", 1, "E")
    assert [entry.attempt for entry in got[c.id].errors] == [1]  # the failure joined the history
    assert (got[d.id].state, got[d.id].attempt, got[d.id].errors) == ("suspended", 0, ())
    assert (got[e.id].state, got[e.id].stop_reason, got[e.id].last_error) == (
        "failed",
        "terminal",
        "T",
    )
    assert (got[f.id].state, got[f.id].attempt, got[f.id].last_error) == ("ready", 0, None)


def test_every_settle_value_is_fenced_on_the_lease_token(harness):
    jobs_ = claim(harness, 5)
    stale = uuid.uuid4()
    values = [
        Complete(jobs_[0].id, stale),
        RetryAt(jobs_[1].id, stale),
        SuspendUntil(jobs_[2].id, stale),
        Shed(jobs_[3].id, stale),
        Finish(jobs_[4].id, stale, "dead"),
    ]
    assert settle(harness.driver, values) == set()
    assert {harness.row(job.id).state for job in jobs_} == {"running"}


@pytest.mark.django_db
def test_settling_costs_one_statement_for_every_complete_and_one_per_other_value():
    """Before the change: one ``ack`` for the batch and one ``retry`` or ``finish`` per other run; the same."""
    driver = PostgresDriver("default")
    a, b, c, d = claim(Harness(driver), 4)
    values = [
        Complete(a.id, a.lease_token),
        Complete(b.id, b.lease_token),
        Complete(c.id, c.lease_token),
        RetryAt(d.id, d.lease_token, delay=1, error="E"),
    ]
    with CaptureQueriesContext(connection) as queries:
        assert len(settle(driver, values)) == 4
    assert len(queries) == 2


@pytest.mark.django_db
@pytest.mark.parametrize(("job", "expected"), [("ok", 7), ("fails", 7)])
def test_a_run_costs_no_more_statements_than_before_one_settle(job, expected):
    """Statements for one job run to its settle by ``run_until_idle`` on PostgreSQL: the
    outbox read, the paused queues and jobs read (once a call: SPEC PAUSE-11), the claim, the
    settle, then the outbox read and the empty claim that find it idle. The code before one
    settle ran the same 5 for each case, before the pauses were read."""
    driver = PostgresDriver("default")
    install(driver)
    try:
        getattr(jobs, job).enqueue(n=1)
        with CaptureQueriesContext(connection) as queries:
            run_until_idle(driver=driver)
    finally:
        uninstall(driver)
    assert len(queries) == expected, [q["sql"][:60] for q in queries]
