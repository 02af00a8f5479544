"""Enqueue on behalf of someone, and the ambient job (issue 16 items 1-2; SPEC ENQ-04, EXEC-09,
SE-54, Q-11, JOB-02)."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from uuid import UUID

import pytest
from django.contrib.auth.models import AnonymousUser

from django_xjobs import Actor, JobContextFilter, current_job
from django_xjobs.errors import InvariantError, JobTenantRequiredError
from django_xjobs.testing import run_until_idle
from tests import jobs

# --- ENQ-04: enqueue_as ---------------------------------------------------------------------------


def test_enq_04_enqueue_as_records_the_actor_and_its_tenant(harness):
    job_id = jobs.ok.enqueue_as(Actor(id="user:42", tenant_id="acme"), n=1).id
    row = harness.row(job_id)
    assert (row.enqueued_by, row.tenant_id) == ("user:42", "acme")


def test_enq_04_options_win_over_the_actor_and_no_actor_is_a_plain_enqueue(harness):
    chosen = jobs.ok.using(tenant_id="other", enqueued_by="cron:nightly")
    row = harness.row(chosen.enqueue_as(Actor(id="user:1", tenant_id="acme"), n=2).id)
    assert (row.enqueued_by, row.tenant_id) == ("cron:nightly", "other")
    plain = harness.row(jobs.ok.enqueue_as(None, n=3).id)
    assert (plain.enqueued_by, plain.tenant_id) == (None, None)
    no_tenant = harness.row(jobs.ok.enqueue_as(Actor(id="user:7"), n=4).id)
    assert (no_tenant.enqueued_by, no_tenant.tenant_id) == ("user:7", None)


@pytest.mark.parametrize(
    ("arguments", "says"),
    [({"id": ""}, "Actor(id=''"), ({"id": "u", "tenant_id": ""}, "tenant_id=''")],
)
def test_an_actor_is_checked_when_it_is_made(arguments, says):
    with pytest.raises(InvariantError, match="X_INVARIANT") as error:
        Actor(**arguments)
    assert says in str(error.value) and error.value.hint


def test_enqueue_as_refuses_what_is_not_an_actor():
    with pytest.raises(InvariantError, match="takes an Actor"):
        jobs.ok.enqueue_as("user:42", n=1)


def test_an_actor_from_a_user_or_a_request():
    user = SimpleNamespace(pk=42, is_authenticated=True)
    assert Actor.from_user(user, tenant_id="acme") == Actor(id="user:42", tenant_id="acme")
    assert Actor.from_user(AnonymousUser()) == Actor(id="anonymous")
    request = SimpleNamespace(user=user)
    assert Actor.from_request(request) == Actor(id="user:42")
    assert Actor.from_request(SimpleNamespace()) == Actor(id="anonymous")


# --- JOB-02: a tenant-scoped job ------------------------------------------------------------------


def test_job_02_a_tenant_scoped_job_refuses_an_enqueue_without_a_tenant(harness):
    before = len(harness.driver.reads().list_jobs(limit=100))
    with pytest.raises(JobTenantRequiredError, match="X_JOB_TENANT_REQUIRED") as error:
        jobs.scoped.enqueue(n=1)
    assert "enqueue_as" in error.value.hint
    assert len(harness.driver.reads().list_jobs(limit=100)) == before
    row = harness.row(jobs.scoped.enqueue_as(Actor(id="user:9", tenant_id="acme"), n=1).id)
    assert row.tenant_id == "acme"
    assert harness.row(jobs.scoped.using(tenant_id="beta").enqueue(n=2).id).tenant_id == "beta"


# --- EXEC-09, SE-54: the ambient job --------------------------------------------------------------


def test_exec_09_current_job_is_the_runs_own_context_and_none_outside(harness):
    assert current_job() is None
    jobs.ambient.enqueue(n=1)
    [execution] = run_until_idle()
    assert execution.outcome == "completed"
    assert harness.row(execution.job.id).result == {"same": True, "name": "tests.jobs.ambient"}
    assert current_job() is None  # it never leaks into what runs next on this thread


def test_exec_09_a_body_on_its_own_thread_and_an_async_body_see_it_too(harness):
    bounded, coroutine = jobs.ambient_bounded.enqueue(n=1).id, jobs.ambient_async.enqueue(n=1).id
    run_until_idle()
    assert harness.row(bounded).result == {"same": True}
    assert harness.row(coroutine).result == {"same": True}


def test_se_54_a_nested_enqueue_names_its_parent_and_inherits_its_tenant(harness):
    parent_id = jobs.parent.enqueue(n=5).id
    run_until_idle()
    child_id = UUID(harness.row(parent_id).result["child"])
    child = harness.row(child_id)
    assert (child.enqueued_by, child.tenant_id) == (f"job:{parent_id}", "tenant-5")
    assert child.state == "done"  # run_until_idle ran it too


def test_a_nested_enqueue_of_a_tenant_scoped_job_takes_the_runs_tenant(harness):
    class Ctx:
        pass

    from django_xjobs.run.context import _current

    ctx = Ctx()
    ctx.job_id, ctx.tenant_id = UUID(int=7), "acme"
    token = _current.set(ctx)
    try:
        job_id = jobs.scoped.enqueue(n=9).id
    finally:
        _current.reset(token)
    row = harness.row(job_id)
    assert (row.tenant_id, row.enqueued_by) == ("acme", f"job:{UUID(int=7)}")


def test_the_logging_filter_adds_the_runs_fields(harness, caplog):
    caplog.handler.addFilter(JobContextFilter())
    job_id = jobs.ambient.using(tenant_id="acme").enqueue(n=2).id
    with caplog.at_level(logging.WARNING, logger="tests.ambient"):
        run_until_idle()
        logging.getLogger("tests.ambient").warning("outside any run")
    inside, outside = [r for r in caplog.records if r.name == "tests.ambient"]
    assert (inside.job, inside.job_id, inside.attempt, inside.tenant_id) == (
        "tests.jobs.ambient",
        str(job_id),
        1,
        "acme",
    )
    assert (outside.job, outside.job_id, outside.tenant_id) == (None, None, None)
