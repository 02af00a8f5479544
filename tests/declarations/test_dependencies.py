"""Dependencies (issue 32) on both drivers: ``using(after=[...])`` waits, visibly, until every
job it names is done, released by the settle that ends the last of them; a dependency that ends
otherwise ends the dependant ``dependency_failed`` unless it runs anyway
(docs/concepts/workflows.md#dependencies, SPEC DEP-01..07)."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connection, connections, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from django_xjobs import Batch, DependencyCycleError, DependencyUnknownError, InvariantError
from django_xjobs.clock import system_clock
from django_xjobs.declarations.registry import get_job
from django_xjobs.drivers.contract import Complete, Finish
from django_xjobs.operations.why import why_job
from django_xjobs.outbox.relay import Relay
from django_xjobs.run.execute import execute
from django_xjobs.run.settle import settle
from django_xjobs.run.stop import StopSignal
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.drivers.contract.support import VIS, claim
from tests.support.database import lock_waiters
from tests.support.process import wait_for

AUTO = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "auto"}


def test_dep_01_a_dependant_waits_visibly_until_every_dependency_is_done(harness):
    driver = harness.driver
    first, second = jobs.ok.enqueue(n=1), jobs.ok.enqueue(n=2)
    waiting = jobs.ok.using(after=[first.id, second]).enqueue(n=3)
    row = harness.row(waiting.id)
    assert (row.state, row.waiting_on, row.after) == ("suspended", 2, (first.id, second.id))
    assert harness.row(first.id).dependants == (waiting.id,)
    a, b = claim(driver, limit=10)  # the two dependencies, never the dependant
    assert {a.id, b.id} == {first.id, second.id}
    assert driver.runs().complete([Complete(a.id, a.lease_token)]) == {a.id}
    row = harness.row(waiting.id)
    assert (row.state, row.waiting_on) == ("suspended", 1)
    assert claim(driver) == []
    # SPEC DEP-02: the settle of the last one releases it, in that same call
    assert driver.runs().complete([Complete(b.id, b.lease_token)]) == {b.id}
    row = harness.row(waiting.id)
    assert (row.state, row.waiting_on, row.after_failed) == ("ready", 0, None)
    [released] = claim(driver)
    assert released.id == waiting.id and not released.expired


def test_dep_01_why_names_what_a_dependant_waits_for(harness):
    first = jobs.ok.enqueue(n=1)
    waiting = jobs.ok.using(after=[first.id]).enqueue(n=2)
    reason = why_job(waiting.id).reasons[0]  # the most decisive first
    assert reason.code == "waiting_for_jobs"
    assert "waiting for 1 of 1 job" in reason.text and f"{first.id} (ready)" in reason.text


@pytest.mark.parametrize("end", ["dead", "cancelled", "failed"])
def test_dep_04_a_dependency_that_ends_otherwise_ends_the_dependant(harness, end):
    driver = harness.driver
    first = jobs.ok.enqueue(n=1)
    waiting = jobs.ok.using(after=[first.id]).enqueue(n=2)
    anyway = jobs.ok.using(after=[first.id], run_anyway=True).enqueue(n=3)
    if end == "cancelled":
        driver.jobs().cancel(first.id, "no longer wanted")
    else:
        [held] = claim(driver)
        assert driver.runs().finish(Finish(held.id, held.lease_token, end, stop_reason="terminal"))
    row = harness.row(waiting.id)
    assert (row.state, row.after_failed) == ("ready", first.id)
    assert harness.row(anyway.id).state == "ready" and harness.row(anyway.id).after_failed is None
    ran = {e.job.id: e for e in run_until_idle(driver=driver)}
    assert ran[waiting.id].stop_reason == "dependency_failed"
    row = harness.row(waiting.id)
    assert (row.state, row.stop_reason) == ("dead", "dependency_failed")
    assert f"waited for job {first.id}, which ended {end}" in row.last_error
    assert harness.row(anyway.id).state == "done"  # it asked to run anyway


def test_dep_04_a_dependant_whose_first_claimer_died_is_ended_again_never_run(harness):
    """SPEC DEP-04 across a crash: the worker that claimed the released dependant to end it died
    before its settle, so the lease lapses and another worker claims the row again. That claim
    must end it too; it used to run the handler, as the row had been started once (found by the
    SIGKILL chain test in CI)."""
    driver = harness.driver
    first = jobs.ok.enqueue(n=1)
    waiting = jobs.ok.using(after=[first.id]).enqueue(n=2)
    [held] = claim(driver)
    assert driver.runs().finish(Finish(held.id, held.lease_token, "dead", stop_reason="terminal"))
    [verdict] = claim(driver, worker="w1")
    assert verdict.id == waiting.id and verdict.expired
    harness.advance(VIS + 1)  # w1 was SIGKILLed before its settle: its lease lapses
    [again] = claim(driver, worker="w2")
    assert again.id == waiting.id and again.expired
    harness.advance(VIS + 1)  # w2 died too; the worker below settles it
    ran = {e.job.id: e for e in run_until_idle(driver=driver)}
    assert ran[waiting.id].stop_reason == "dependency_failed"
    assert (harness.row(waiting.id).state, harness.row(waiting.id).stop_reason) == (
        "dead",
        "dependency_failed",
    )


def test_dep_04_a_failure_cascades_down_a_chain(harness):
    driver = harness.driver
    first = jobs.ok.enqueue(n=1)
    middle = jobs.ok.using(after=[first.id]).enqueue(n=2)
    last = jobs.ok.using(after=[middle.id]).enqueue(n=3)
    driver.jobs().cancel(first.id, "stop")
    run_until_idle(driver=driver)
    assert harness.row(middle.id).stop_reason == "dependency_failed"
    assert harness.row(last.id).stop_reason == "dependency_failed"
    assert harness.row(last.id).after_failed == middle.id


def test_dep_05_enqueue_time_checks(harness):
    driver = harness.driver
    nowhere = uuid.uuid4()
    with pytest.raises(DependencyUnknownError) as caught:
        jobs.ok.using(after=[nowhere]).enqueue(n=1)
    assert caught.value.code == "X_DEPENDENCY_UNKNOWN" and str(nowhere) in caught.value.message
    assert driver.reads().list_jobs() == []  # nothing enqueued
    # a dependency already done counts as satisfied: due at once
    done = jobs.ok.enqueue(n=2)
    run_until_idle(driver=driver)
    after_done = jobs.ok.using(after=[done.id]).enqueue(n=3)
    row = harness.row(after_done.id)
    assert (row.state, row.waiting_on) == ("ready", 0)
    assert harness.row(done.id).dependants is None
    # one already dead: recorded, and ends dependency_failed at its claim
    dead = jobs.ok.enqueue(n=4)
    driver.jobs().cancel(dead.id, "x")
    after_dead = jobs.ok.using(after=[dead.id]).enqueue(n=5)
    assert harness.row(after_dead.id).after_failed == dead.id
    run_until_idle(driver=driver)
    assert harness.row(after_dead.id).stop_reason == "dependency_failed"
    assert harness.row(after_done.id).state == "done"
    # a job naming itself would wait for ever (the only cycle an id can make, DEP-05)
    own = uuid.uuid4()
    request = jobs.ok.using(after=[own]).build_request({"n": 6})
    from dataclasses import replace

    with pytest.raises(DependencyCycleError) as cycle:
        driver.jobs().enqueue(replace(request, id=own))
    assert cycle.value.code == "X_DEPENDENCY_CYCLE"


def test_dep_05_options_that_contradict_after_are_refused():
    with pytest.raises(InvariantError):
        jobs.ok.using(after=[uuid.uuid4()], delay="1m")
    with pytest.raises(InvariantError):
        jobs.ok.using(after=[uuid.uuid4()], on_conflict="replace")
    with pytest.raises(InvariantError):
        jobs.ok.using(after="not-a-list")
    with pytest.raises(InvariantError):
        jobs.ok.using(after=["nope"])


def test_dep_05_a_batch_member_cannot_wait(harness):
    first = jobs.ok.enqueue(n=1)
    with pytest.raises(InvariantError), Batch(on_complete=jobs.batch_report):
        jobs.ok.using(after=[first.id]).enqueue(n=2)


@pytest.mark.parametrize("path", ["fast", "relay"])
def test_dep_06_a_staged_dependant_waits_for_a_job_staged_before_it(live_harness, path):
    """``after`` travels through the outbox: the dependency staged first in the same
    transaction is published first, and the dependant is registered with it at its publish,
    on the fast path at commit and through the relay."""
    driver = live_harness.driver
    with override_settings(XJOBS=AUTO):
        if path == "fast":
            with transaction.atomic():
                first = jobs.ok.enqueue(n=1)
                waiting = jobs.ok.using(after=[first.id]).enqueue(n=2)
            assert first.staged and waiting.staged
            first_id, waiting_id = first.id, waiting.id
        else:
            store = driver.outbox("default")
            first_id = store.stage(jobs.ok.build_request({"n": 1}))
            request = jobs.ok.using(after=[first_id]).build_request({"n": 2})
            waiting_id = store.stage(request)
            assert driver.reads().get_job(waiting_id) is None  # staged only
            assert Relay(store=store, driver=driver).tick() == 2
    row = live_harness.row(waiting_id)
    assert (row.state, row.waiting_on, row.after) == ("suspended", 1, (first_id,))
    run_until_idle(driver=driver)
    assert live_harness.row(first_id).state == "done"
    assert live_harness.row(waiting_id).state == "done"


def test_dep_06_a_staged_dependant_rolled_back_leaves_nothing(live_harness):
    first = jobs.ok.enqueue(n=1)
    with override_settings(XJOBS=AUTO), pytest.raises(RuntimeError), transaction.atomic():
        assert jobs.ok.using(after=[first.id]).enqueue(n=2).staged
        raise RuntimeError("rollback")
    assert live_harness.row(first.id).dependants is None
    assert [r.id for r in live_harness.driver.reads().list_jobs()] == [first.id]


def test_dep_07_an_ack_costs_one_statement_with_or_without_dependants(db):
    """SPEC DEP-07: the release rides in the ack's own statement; a job nobody waits for has a
    null ``dependants``, and its ack reads nothing more."""
    from django_xjobs.drivers import install, uninstall
    from django_xjobs.drivers.postgres import PostgresDriver

    driver = PostgresDriver("default")
    install(driver)
    try:
        plain = jobs.ok.enqueue(n=1)
        awaited = jobs.ok.enqueue(n=2)
        waiting = jobs.ok.using(after=[awaited.id]).enqueue(n=3)
        held = {c.id: c for c in claim(driver, limit=10)}
        for job_id in (plain.id, awaited.id):
            with CaptureQueriesContext(connection) as queries:
                driver.runs().complete([Complete(job_id, held[job_id].lease_token)])
            assert len(queries) == 1, [q["sql"][:60] for q in queries]
        assert driver.reads().get_job(waiting.id).state == "ready"
    finally:
        uninstall(driver)


@pytest.mark.django_db(transaction=True)
def test_dep_03_a_dependant_committed_during_the_last_settle_is_released():
    """The race a plain UPDATE would lose: the dependant's enqueue locks the dependency and
    commits while the ack's statement, whose snapshot is older, waits for that lock. The
    release still finds the dependant (an upsert on its key), so it is never stranded."""
    from django_xjobs.drivers import install, uninstall
    from django_xjobs.drivers.postgres import PostgresDriver

    driver = PostgresDriver("default")
    install(driver)
    try:
        first = jobs.ok.enqueue(n=1)
        [held] = claim(driver)
        acked: list[set] = []
        with transaction.atomic():
            waiting = jobs.ok.using(after=[first.id], outbox=False).enqueue(n=2)
            assert driver.reads().get_job(waiting.id).state == "suspended"

            def ack() -> None:
                try:
                    acked.append(driver.runs().complete([Complete(held.id, held.lease_token)]))
                finally:
                    connections["default"].close()

            settler = threading.Thread(target=ack)
            settler.start()
            with connection.cursor() as cursor:

                def blocked() -> bool:
                    return lock_waiters(cursor, "x_job_rollup") == 1

                wait_for(blocked, timeout=10)
        settler.join(timeout=10)
        assert acked == [{first.id}]
        row = driver.reads().get_job(waiting.id)
        assert (row.state, row.waiting_on) == ("ready", 0)
    finally:
        uninstall(driver)


def test_dep_01_show_inspect_why_and_the_admin_name_the_dependencies(db):
    """The operator surfaces: ``inspect_job``'s ``dependencies``, ``xjobs show`` (text and
    --json), ``xjobs why``, and the admin's job page for who may view jobs."""
    import json
    from io import StringIO

    from django.contrib.auth.models import Permission, User
    from django.core.management import call_command
    from django.test import Client

    from django_xjobs import inspect_job

    first = jobs.ok.enqueue(n=1)
    waiting = jobs.ok.using(after=[first.id], run_anyway=True).enqueue(n=2)
    assert inspect_job(waiting.id)["dependencies"] == {
        "after": [str(first.id)],
        "waiting_on": 1,
        "failed": None,
        "run_anyway": True,
        "dependants": [],
    }
    assert inspect_job(first.id)["dependencies"]["dependants"] == [str(waiting.id)]
    assert inspect_job(jobs.ok.enqueue(n=3).id)["dependencies"] is None

    def xjobs(*args: str) -> str:
        out = StringIO()
        call_command("xjobs", *args, stdout=out)
        return out.getvalue()

    text = xjobs("show", str(waiting.id))
    assert f"after      {first.id}  (1 not done yet, runs anyway)" in text
    assert f"dependants {waiting.id}" in xjobs("show", str(first.id))
    shown = json.loads(xjobs("show", str(waiting.id), "--json"))
    assert shown["dependencies"]["waiting_on"] == 1
    why = json.loads(xjobs("why", str(waiting.id), "--json"))
    assert why["reasons"][0]["code"] == "waiting_for_jobs"
    assert why["reasons"][0]["detail"]["after"] == {str(first.id): "ready"}

    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_job"))
    client = Client()
    client.force_login(user)
    page = client.get(f"/admin/django_xjobs/job/{waiting.id}/change/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "waiting for 1 of 1 job" in body and "Dependencies" in body
    outsider = User.objects.create_user("outsider", password="pw", is_staff=True)
    client.force_login(outsider)
    assert client.get(f"/admin/django_xjobs/job/{waiting.id}/change/").status_code == 403


# --- a parent parked on child jobs wakes when the last one ends (SPEC CHILD-07) -------------


def test_child_07_the_settle_of_the_last_child_makes_the_parent_due_at_once(harness):
    """The parent looks at its children once an hour (event_poll="1h"): it is due again as
    soon as its last child is acked, in that ack, not at its poll."""
    driver = harness.driver
    parent = jobs.patient_parent.enqueue(tag="w", ns=[2, 3]).id
    [run] = claim(driver)
    execution = execute(
        run, StopSignal(), driver=driver, clock=system_clock, handle=get_job(run.name)
    )
    assert settle(driver, [execution.settle]) == {run.lease_token}
    row = harness.row(parent)
    assert row.state == "suspended" and row.waiting_on == 2
    assert (row.run_at - driver.steps().now()).total_seconds() > 3000  # the poll: an hour
    first, second = claim(driver, limit=5)
    assert driver.runs().complete([Complete(first.id, first.lease_token, '{"square": 0}')]) == {
        first.id
    }
    row = harness.row(parent)
    assert (row.state, row.waiting_on) == ("suspended", 1)
    assert driver.runs().complete([Complete(second.id, second.lease_token, '{"square": 0}')]) == {
        second.id
    }
    row = harness.row(parent)
    assert (row.state, row.waiting_on) == ("ready", 0)
    assert row.run_at <= driver.steps().now()
    [again] = claim(driver)
    assert again.id == parent


@pytest.mark.parametrize("fail", [False, True])
def test_child_07_a_parent_resumes_without_its_poll_whatever_its_children_end_as(harness, fail):
    """One pass of ``run_until_idle`` runs the parent, its children and the parent again: a
    dead child wakes it too (it resumes into its ChildJobFailedError), never failing it as a
    dependant would be."""
    parent = jobs.patient_parent.enqueue(tag="x", ns=[4, 5], fail=[5] if fail else []).id
    run_until_idle(driver=harness.driver)
    row = harness.row(parent)
    assert row.state == "done"
    expected = (
        {"caught": "X_CHILD_FAILED"} if fail else {"results": [{"square": 16}, {"square": 25}]}
    )
    assert row.result == expected


def test_child_07_a_child_ended_before_the_parent_parks_leaves_it_due(harness):
    """A child that ended between the parent's look and its suspend is not waited for."""
    from dataclasses import replace as copy

    from django_xjobs.drivers.contract import SuspendUntil

    driver = harness.driver
    parent = jobs.patient_parent.enqueue(tag="y", ns=[6]).id
    child = jobs.ok.enqueue(n=6)
    [held_parent] = [c for c in claim(driver, limit=5) if c.id == parent]
    driver.jobs().cancel(child.id, "gone")
    park = SuspendUntil(parent, held_parent.lease_token, delay=3600, children=(child.id,))
    assert driver.runs().suspend(copy(park))
    row = harness.row(parent)
    assert (row.state, row.waiting_on) == ("suspended", 0)
    assert row.run_at <= driver.steps().now()


@pytest.mark.django_db(transaction=True)
def test_child_07_a_park_and_an_ack_of_two_of_its_children_never_deadlock():
    """The interleaving that deadlocked (40P01): an ack settling two children of one parent has
    locked one of them (in its plan's order) when the parent parks; the park locked the other
    and waited for it, the ack then waited for the park's. The park now takes no child lock it
    would wait for: it names the parent where it can, and the ack still wakes it."""
    from django_xjobs.drivers import install, uninstall
    from django_xjobs.drivers.contract import SuspendUntil
    from django_xjobs.drivers.postgres import PostgresDriver

    driver = PostgresDriver("default")
    install(driver)
    try:
        parent = jobs.patient_parent.enqueue(tag="dl", ns=[1]).id
        # ids in enqueue order: the park reaches `low` first however its plan reads them
        low, high = jobs.ok.enqueue(n=1).id, jobs.ok.enqueue(n=2).id
        assert low < high
        held = {c.id: c for c in claim(driver, limit=5)}
        parked: list[object] = []

        def park() -> None:
            try:
                parked.append(
                    driver.runs().suspend(
                        SuspendUntil(
                            parent, held[parent].lease_token, delay=3600, children=(low, high)
                        )
                    )
                )
            except Exception as error:  # the deadlock victim, on the park's side
                parked.append(error)
            finally:
                connections["default"].close()

        with transaction.atomic():
            with connection.cursor() as cursor:
                # the ack's first row lock: `high`, as its UPDATE may take them
                cursor.execute("SELECT id FROM x_jobs WHERE id = %s FOR UPDATE", [high])
                parker = threading.Thread(target=park)
                parker.start()

                def park_done_or_blocked() -> bool:
                    return bool(parked) or lock_waiters(cursor, "dependants") == 1

                wait_for(park_done_or_blocked, timeout=10)
                if parked == [True]:
                    # `high` skipped, `low` named: the parent looks again within a second, not
                    # at its hour-long poll, in case the ack of `high` commits first (this
                    # transaction's now() is its start)
                    row = driver.reads().get_job(parent)
                    assert (row.state, row.waiting_on) == ("suspended", 1)
                    assert (row.run_at - driver.steps().now()).total_seconds() < 60  # not 3600
            # the same ack goes on to `low`: before, the park held it and waited for `high`
            acked = driver.runs().complete(
                [Complete(high, held[high].lease_token), Complete(low, held[low].lease_token)]
            )
        parker.join(timeout=10)
        assert parked == [True], parked
        assert acked == {low, high}
        # the park named the parent on `low` (it skipped `high`, locked): the ack woke it
        row = driver.reads().get_job(parent)
        assert (row.state, row.waiting_on) == ("ready", 0)
        assert row.run_at <= driver.steps().now()
    finally:
        uninstall(driver)


def test_dep_02_a_finished_dependant_a_live_job_still_names_is_not_pruned(harness):
    """The release finds every job a settled row names: one cancelled while it waited stays
    until its dependency settles, and that settle changes nothing on it."""
    driver = harness.driver
    first = jobs.ok.enqueue(n=1)
    waiting = jobs.ok.using(after=[first.id]).enqueue(n=2)
    driver.jobs().cancel(waiting.id, "not needed")
    harness.advance(3600)
    assert driver.jobs().prune(older_than=60, states=["cancelled"], dry_run=True) == {
        "cancelled": 0
    }
    assert driver.jobs().prune(older_than=60, states=["cancelled"]) == {"cancelled": 0}
    run_until_idle(driver=driver)
    row = harness.row(waiting.id)
    assert (row.state, row.stop_reason) == ("cancelled", "cancelled")
    assert {r.id for r in driver.reads().list_jobs()} == {first.id, waiting.id}  # nothing inserted
    harness.advance(3600)
    assert driver.jobs().prune(older_than=60, states=["cancelled"]) == {"cancelled": 1}


def test_dep_04_a_worker_counts_a_dependency_failed_job_apart(live_harness):
    """Through a real worker's settle, on both drivers: the dependant whose dependency was
    cancelled never runs, ends dead and is counted in xjobs_jobs_dependency_failed_total."""
    from django_xjobs import metrics
    from django_xjobs.worker.worker import Worker

    def counted() -> float:
        return metrics.value("xjobs_jobs_dependency_failed_total", queue="default")

    before = counted()
    first = jobs.ok.enqueue(n=1)
    waiting = jobs.ok.using(after=[first.id]).enqueue(n=2)
    live_harness.driver.jobs().cancel(first.id, "no longer wanted")
    Worker(queues=["default"], driver=live_harness.driver, burst=True).run()
    assert counted() - before == 1
    row = live_harness.row(waiting.id)
    assert (row.state, row.stop_reason, row.attempt) == ("dead", "dependency_failed", 1)
    assert f"waited for job {first.id}, which ended cancelled" in row.last_error


def test_dep_05_a_deduped_enqueue_returns_the_live_job_unchanged(harness):
    first = jobs.ok.enqueue(n=1)
    live = jobs.ok.enqueue(n=2)
    again = jobs.ok.using(after=[first.id]).enqueue(n=2)
    assert again.deduped and again.id == live.id
    assert harness.row(live.id).after is None and harness.row(live.id).state == "ready"
    assert harness.row(first.id).dependants is None  # nobody registered with it
