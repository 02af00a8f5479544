"""Jobs routed to several PostgreSQL databases (issue 48, first slice): the settings, enqueue
straight to the alias and through the outbox, the worker claiming and settling in each, the
reads across them, an alias that is down. The ``shard`` alias is a second database on the
suite's server (tests/settings.py); the memory driver routes too, one store per alias."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core import checks
from django.core.management import call_command
from django.db import transaction
from django.test import override_settings

from django_xjobs import Batch, conf, operations, publish_event
from django_xjobs.drivers import get_driver
from django_xjobs.errors import (
    AliasUnavailableError,
    ConfigInvalidError,
    RouteSpansError,
    RouteUnknownError,
)
from django_xjobs.ids import uuid7
from django_xjobs.limits.operator import queue_limits, set_queue_limit
from django_xjobs.models import Job, JobStep, OutboxEntry, SchedulerState
from django_xjobs.testing import relay_staged, run_until_idle
from tests import jobs
from tests.support.reads import alias_for, gone_alias

BOTH = ["default", "shard"]
ROUTED = {"QUEUES": ["other", "reports"], "QUEUE_DATABASES": {"reports": "shard"}}


def routed(**more: object) -> override_settings:
    from django.conf import settings

    return override_settings(XJOBS={**settings.XJOBS, **ROUTED, **more})


def to_shard(queue: str, tenant_id: str | None) -> str:
    """A ROUTER: tenant ``big`` in ``shard``, everyone else in ``default``."""
    return "shard" if tenant_id == "big" else "default"


def to_nowhere(queue: str, tenant_id: str | None) -> str:
    return "orders"


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


# --- SHARD-01: the settings -------------------------------------------------------------------


def test_shard_01_the_settings_are_read_and_refused_with_a_hint():
    routing = conf.validate(ROUTED).routing
    assert routing is not None
    assert routing.aliases == ("default", "shard")
    assert routing.alias("reports", None) == "shard" and routing.alias("emails", "t") == "default"
    with pytest.raises(ConfigInvalidError) as refused:
        conf.validate({"QUEUE_DATABASES": {"reports": "shrad"}})
    assert "shrad" in refused.value.message and "aliases: " in refused.value.hint
    with pytest.raises(ConfigInvalidError):
        conf.validate({"QUEUE_DATABASES": ["reports"]})
    with pytest.raises(ConfigInvalidError):
        conf.validate({"QUEUE_DATABASES": {"bad queue!": "shard"}})
    with pytest.raises(ConfigInvalidError, match="cannot be imported"):
        conf.validate({"ROUTER": "tests.drivers.test_routing.no_such_router"})
    with pytest.raises(ConfigInvalidError, match="READ_DATABASE"):
        conf.validate({**ROUTED, "READ_DATABASE": "replica"})
    # none of it set (or every queue named routed to the jobs database): no routing at all
    assert conf.validate({}).routing is None
    assert conf.validate({"QUEUE_DATABASES": {"reports": "default"}}).routing is None
    with_router = conf.validate(
        {"ROUTER": "tests.drivers.test_routing.to_shard", "JOB_DATABASES": ["shard"]}
    ).routing
    assert with_router is not None and with_router.queue_aliases("any") == ("default", "shard")


def test_shard_01_without_the_settings_the_driver_is_the_one_it_was():
    assert get_driver().name == "postgres"
    with routed():
        assert get_driver().name == "routing"
        assert get_driver() is get_driver()  # built once
    with routed(DRIVER="memory"):
        assert get_driver().name == "routing"  # the memory driver routes: a store per alias


@pytest.mark.django_db(databases=BOTH)
def test_shard_01_the_check_passes_the_migrated_databases():
    with routed():
        found = [m for m in checks.run_checks(databases=BOTH) if m.id == "django_xjobs.E048"]
    assert found == []


def test_shard_01_the_check_refuses_a_database_that_is_not_migrated(
    django_db_setup, django_db_blocker
):
    # the server's own database, never migrated (outside any test database: reads only)
    with (
        django_db_blocker.unblock(),
        alias_for("xjobs_bare", NAME="postgres") as bare,
        routed(QUEUE_DATABASES={"reports": bare}),
    ):
        found = [m for m in checks.run_checks(databases=[bare]) if m.id == "django_xjobs.E048"]
    assert len(found) == 1 and bare in found[0].msg
    assert f"migrate django_xjobs --database {bare}" in found[0].hint


# --- SHARD-02: a router's answer --------------------------------------------------------------


@pytest.mark.django_db(databases=BOTH)
def test_shard_02_a_router_places_tenants_and_an_unknown_alias_is_refused():
    with routed(ROUTER="tests.drivers.test_routing.to_shard"):
        big = jobs.ok.using(tenant_id="big").enqueue(n=1).id
        small = jobs.ok.using(tenant_id="small").enqueue(n=2).id
        assert Job.objects.using("shard").filter(id=big).exists()
        assert Job.objects.using("default").filter(id=small).exists()
        assert not Job.objects.using("default").filter(id=big).exists()
    with (
        routed(ROUTER="tests.drivers.test_routing.to_nowhere"),
        pytest.raises(RouteUnknownError) as refused,
    ):
        jobs.ok.enqueue(n=3)
    assert refused.value.code == "X_ROUTE_UNKNOWN" and "'orders'" in refused.value.message
    assert Job.objects.using("default").count() + Job.objects.using("shard").count() == 2


# --- SHARD-03: enqueue, direct and through the outbox -----------------------------------------


@pytest.mark.django_db(databases=BOTH)
def test_shard_03_an_enqueue_outside_atomic_goes_straight_to_its_alias():
    with routed():
        there = jobs.ok.using(queue="reports").enqueue(n=1)
        here = jobs.ok.enqueue(n=2)
        again = jobs.ok.using(queue="reports").enqueue(n=1)  # its key, in its own database
    assert Job.objects.using("shard").get(id=there.id).queue == "reports"
    assert Job.objects.using("default").get(id=here.id).queue == "default"
    assert not Job.objects.using("default").filter(queue="reports").exists()
    assert again.deduped and again.id == there.id


@pytest.mark.django_db(databases=BOTH, transaction=True)
def test_shard_03_inside_atomic_it_is_staged_beside_the_caller_and_published_once():
    with routed(OUTBOX="auto"):
        with transaction.atomic():
            staged = jobs.ok.using(queue="reports").enqueue(n=1)
            assert staged.staged
        assert not Job.objects.using("default").filter(id=staged.id).exists()
        relay_staged()  # (after the commit's own publish, nothing is left for it)
        job = Job.objects.using("shard").get(id=staged.id)  # the id minted at staging
        assert job.queue == "reports"
        row = OutboxEntry.objects.using("default").get(job_id=staged.id)
        assert row.published_at is not None
        # a relay that wrote the job and died before marking its row: the row is published
        # again, and the job already under that id is the one it finds
        OutboxEntry.objects.using("default").filter(id=row.id).update(
            published_at=None, claimed_at=None, claimed_by=None
        )
        assert relay_staged() == 1
        assert Job.objects.using("shard").filter(idempotency_key=job.idempotency_key).count() == 1
        assert not Job.objects.using("default").filter(queue="reports").exists()
        assert OutboxEntry.objects.using("default").get(id=row.id).published_at is not None


# --- SHARD-04: what would span two databases --------------------------------------------------


@pytest.mark.django_db(databases=BOTH)
def test_shard_04_a_dependency_or_batch_across_databases_is_refused():
    with routed():
        first = jobs.ok.enqueue(n=1).id  # default
        with pytest.raises(RouteSpansError) as refused:
            jobs.ok.using(queue="reports", after=[first]).enqueue(n=2)
        assert refused.value.code == "X_ROUTE_SPANS" and str(first) in refused.value.message
        # in the same database, a dependency is as it was
        there = jobs.ok.using(queue="reports").enqueue(n=3).id
        jobs.ok.using(queue="reports", after=[there]).enqueue(n=4)
        with pytest.raises(RouteSpansError), Batch() as batch:
            batch.add(jobs.ok, n=5)
            batch.add(jobs.ok.using(queue="reports"), n=6)
        # a batch whose members all live in one database lives there
        with Batch() as together:
            together.add(jobs.ok.using(queue="reports"), n=7)
            together.add(jobs.ok.using(queue="reports"), n=8)
    assert Job.objects.using("shard").filter(batch_id=together.id).count() == 2
    assert not Job.objects.using("default").filter(idempotency_key__in=["ok:2", "ok:6"]).exists()
    assert not Job.objects.using("shard").filter(idempotency_key__in=["ok:2", "ok:6"]).exists()


# --- SHARD-05: the worker claims from each alias and settles where the run came from -----------


@pytest.mark.django_db(databases=BOTH)
def test_shard_05_a_worker_drains_both_databases_and_settles_each_run_in_its_own():
    with routed():
        there = jobs.ok.using(queue="reports").enqueue(n=1).id
        here = jobs.ok.enqueue(n=2).id
        sleeping = jobs.sleeper.using(queue="reports").enqueue(n=3).id
        done = run_until_idle(queues=["default", "reports"])
    assert {e.job.id for e in done} == {there, here, sleeping}
    assert Job.objects.using("shard").get(id=there).state == "done"
    assert Job.objects.using("default").get(id=here).state == "done"
    assert Job.objects.using("shard").get(id=sleeping).state == "suspended"
    # its step record lives beside it
    assert (
        JobStep.objects.using("shard")
        .filter(run_id__in=Job.objects.using("shard").filter(id=sleeping).values("run_id"))
        .exists()
    )
    assert not JobStep.objects.using("default").exists()


@pytest.mark.django_db(databases=BOTH)
def test_shard_05_the_memory_driver_routes_the_same_way():
    with routed(DRIVER="memory"):
        driver = get_driver()
        there = jobs.ok.using(queue="reports").enqueue(n=1).id
        here = jobs.ok.enqueue(n=2).id
        assert set(operations.inspect_queues()["queues"][i]["queue"] for i in range(2)) == {
            "default",
            "reports",
        }
        done = run_until_idle(queues=["default", "reports"], driver=driver)
        assert {e.job.id for e in done} == {there, here}
        assert operations.inspect_job(there)["state"] == "done"
        assert operations.inspect_job(here)["state"] == "done"
    assert not Job.objects.using("shard").exists()  # in memory, nothing reached a database


# --- SHARD-06: one surface ---------------------------------------------------------------------


@pytest.mark.django_db(databases=BOTH)
def test_shard_06_inspect_ls_show_and_queues_see_every_database():
    with routed():
        there = jobs.ok.using(queue="reports").enqueue(n=1).id
        here = jobs.ok.enqueue(n=2).id
        assert operations.inspect_job(there)["queue"] == "reports"
        assert operations.inspect_job(here)["queue"] == "default"
        assert {r["id"] for r in operations.list_jobs()} == {str(there), str(here)}
        report = operations.inspect_queues()
        assert {q["queue"]: q["ready"] for q in report["queues"]} == {"default": 1, "reports": 1}
        assert report["totals"]["ready"] == 2
        listed = {r["id"] for r in json.loads(xjobs("ls", "--json"))}
        assert listed == {str(there), str(here)}
        assert json.loads(xjobs("show", str(there), "--json"))["queue"] == "reports"
        queues = json.loads(xjobs("queues", "--json"))
        assert {q["queue"] for q in queues["queues"]} == {"default", "reports"}
        why = json.loads(xjobs("why", str(there), "--json"))
        assert why["queue"] == "reports" and why["state"] == "ready"
        # an operator's action finds the job where it lives
        assert operations.cancel_job(there, "no")["state"] == "cancelled"
    assert Job.objects.using("shard").get(id=there).state == "cancelled"


# --- SHARD-07: a database that does not answer -------------------------------------------------


@pytest.fixture
def down(django_db_blocker):
    """A routing driver whose jobs database's server is not there, beside a second database
    that answers (an in-process store): installed, outside any test database."""
    from types import MappingProxyType

    from django_xjobs.conf.routing import Routing
    from django_xjobs.drivers import create, install, uninstall
    from django_xjobs.drivers.routing import RoutingDriver

    with django_db_blocker.unblock(), gone_alias() as gone, routed():
        routing = Routing(gone, MappingProxyType({"reports": "spare"}), None, (gone, "spare"))
        driver = RoutingDriver(
            routing, {gone: create("postgres", using=gone), "spare": create("memory")}
        )
        install(driver)
        try:
            yield driver, gone
        finally:
            uninstall(driver)


def test_shard_07_a_database_that_is_down_is_said_never_counted_as_empty(down):
    driver, gone = down
    waiting = jobs.ok.using(queue="reports").enqueue(n=1).id  # in the database that answers
    with pytest.raises(AliasUnavailableError) as refused:
        operations.inspect_queues()
    assert refused.value.code == "X_ALIAS_UNAVAILABLE" and gone in refused.value.message
    assert "start it" in refused.value.hint
    with pytest.raises(AliasUnavailableError):
        operations.list_jobs()
    with pytest.raises(AliasUnavailableError):
        operations.inspect_job(uuid7())  # not found where it answers: never said "no such job"
    # the claim passes it over: the other database's queues keep running
    claimed = driver.runs().claim(
        queues=["default", "reports"], limit=5, visibility_timeout=30, worker_id="w"
    )
    assert [job.id for job in claimed] == [waiting]


# --- SHARD-08: events reach the runs of every database ----------------------------------------


@pytest.mark.django_db(databases=BOTH, transaction=True)
def test_shard_08_a_publish_releases_and_cancels_the_runs_of_every_database():
    with routed():
        waiting = jobs.waiter.using(queue="reports").enqueue(order_id=7).id
        cancelled = jobs.fulfil.using(queue="reports", delay=3600).enqueue(order_id=8).id
        run_until_idle(queues=["reports"])
        assert Job.objects.using("shard").get(id=waiting).state == "suspended"
        # rolled back with its caller: never published, so nothing is released there
        with pytest.raises(RuntimeError), transaction.atomic():
            publish_event("order.shipped", {"order_id": 7})
            raise RuntimeError("rolled back")
        assert Job.objects.using("shard").get(id=waiting).state == "suspended"
        with transaction.atomic():  # told to the other databases when it commits
            publish_event("order.shipped", {"order_id": 7})
            assert Job.objects.using("shard").get(id=waiting).state == "suspended"
        assert Job.objects.using("shard").get(id=waiting).state == "ready"  # at once, no poll
        [run] = run_until_idle(queues=["reports"])
        assert run.outcome == "completed"
        assert Job.objects.using("shard").get(id=waiting).result == {"got": {"order_id": 7}}
        publish_event("order.cancelled", {"order_id": 8})
        assert Job.objects.using("shard").get(id=cancelled).state == "cancelled"


@pytest.mark.django_db(databases=BOTH, transaction=True)
def test_shard_05_an_atomic_step_opens_its_transaction_in_the_jobs_own_database():
    """Its record commits with the block's writes in the job's database: a write the block makes
    on the default database, which would not commit with it, is refused there as anywhere."""
    with routed():
        here = jobs.atomic_effects.enqueue(token="here", steps=1).id
        there = jobs.atomic_effects.using(queue="reports").enqueue(token="there", steps=1).id
        ran = {e.job.id: e for e in run_until_idle(queues=["default", "reports"])}
    assert ran[here].outcome == "completed"
    assert Job.objects.using("default").get(id=here).state == "done"
    assert ran[there].outcome == "dead_lettered"
    refused = Job.objects.using("shard").get(id=there)
    assert refused.state == "dead" and refused.last_error.startswith("X_STEP_ATOMIC_ALIAS")
    assert "'default'" in refused.last_error


@pytest.mark.django_db(databases=BOTH, transaction=True)
def test_shard_57_the_refusal_names_the_database_the_job_lives_in_and_the_fix():
    """The hint of a routed job's refusal names its own database, not XJOBS["DATABASE"] (the
    very database its block wrote to), and says what to do."""
    with routed():
        there = jobs.atomic_effects.using(queue="reports").enqueue(token="hint", steps=1).id
        run_until_idle(queues=["reports"])
    text = Job.objects.using("shard").get(id=there).last_error
    assert text.startswith(
        "X_STEP_ATOMIC_ALIAS: atomic step 'effect:0' of a job in database 'shard' wrote to "
        "database 'default'"
    )
    assert "the job's queue is routed to 'shard'" in text
    assert "only writes on 'shard' commit with the step" in text
    assert "XJOBS['DATABASE']" not in text  # 'default', where it wrote, is not its database


# --- SHARD-11: the verbs over many jobs walk every database ------------------------------------


@pytest.mark.django_db(databases=BOTH)
def test_shard_11_bulk_verbs_and_tenant_erasure_reach_every_database():
    with routed():
        there = [jobs.ok.using(queue="reports", delay=3600).enqueue(n=i).id for i in range(3)]
        here = [jobs.ok.using(delay=3600).enqueue(n=10 + i).id for i in range(2)]
        assert operations.cancel_jobs(name="tests.jobs.ok", dry_run=True)["matched"] == 5
        # requeued within the queues of one database, never out of it
        with pytest.raises(RouteSpansError):
            operations.requeue_jobs(queue="other", name="tests.jobs.ok", state="delayed")
        assert Job.objects.using("shard").filter(queue="reports").count() == 3
        done = operations.cancel_jobs(name="tests.jobs.ok", reason="maintenance")
        assert (done["matched"], done["changed"]) == (5, 5)
        assert set(Job.objects.using("shard").values_list("state", flat=True)) == {"cancelled"}
        assert set(Job.objects.using("default").values_list("state", flat=True)) == {"cancelled"}
        assert {*there, *here} == {
            *Job.objects.using("shard").values_list("id", flat=True),
            *Job.objects.using("default").values_list("id", flat=True),
        }
        # one audit trail, in the jobs database
        [audited] = operations.inspect_audit(verb="cancel_jobs")
        assert audited["changed"] == 5
        # a tenant's rows in both databases, erased from both
        jobs.ok.using(queue="reports", tenant_id="acme").enqueue(n=20)
        jobs.ok.using(tenant_id="acme").enqueue(n=21)
        erased = operations.erase_tenant("acme")
        assert erased["jobs"] == 2
    assert not Job.objects.using("shard").filter(tenant_id="acme").exists()
    assert not Job.objects.using("default").filter(tenant_id="acme").exists()


@pytest.mark.django_db(databases=BOTH)
def test_shard_06_the_metrics_count_every_database():
    from django.test import RequestFactory

    from django_xjobs import metrics, views

    metrics.clear_cache()
    with routed():
        jobs.ok.using(queue="reports").enqueue(n=1)
        jobs.ok.using(queue="reports").enqueue(n=2)
        jobs.ok.enqueue(n=3)
        response = views.metrics_view(RequestFactory().get("/metrics/"))
    metrics.clear_cache()
    text = response.content.decode()
    # each queue under the alias it lives in (SPEC SHARD-20: tests/metrics/test_sharding.py)
    from prometheus_client.parser import text_string_to_metric_families

    depth = {
        (sample.labels["alias"], sample.labels["queue"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "xjobs_queue_depth"
    }
    assert depth == {("shard", "reports"): 2.0, ("default", "default"): 1.0}


# --- SHARD-12: a cron occurrence's jobs in another database, once ------------------------------


@pytest.mark.django_db(databases=BOTH)
def test_shard_12_a_dispatch_repeated_after_a_crash_finds_its_jobs_in_the_other_database():
    """The scheduler's watermark is in the jobs database, the occurrence's job in ``shard``:
    a dispatch whose watermark did not commit (a crash, a lost lease) is made again, and finds
    the job it wrote by its id, even once it has run."""
    from datetime import UTC, datetime

    from django_xjobs.clock import FrozenClock
    from django_xjobs.scheduler.role import Scheduler
    from tests import crons

    clock = FrozenClock(datetime(2026, 3, 1, 2, 0, tzinfo=UTC))
    with routed(QUEUE_DATABASES={"default": "shard"}):
        scheduler = Scheduler(cron_names=[crons.daily.name], clock=clock)
        assert scheduler.tick() == []  # armed
        clock.advance(2 * 3600)  # past 03:00
        [dispatch] = scheduler.tick()
        made = Job.objects.using("shard").get(name="tests.jobs.ok")
        assert run_until_idle()[0].job.id == made.id  # ... and it ran
        # the watermark's transaction never committed (the store only moves it forward: the
        # row is put back as the rollback would have left it): the occurrence is due again
        SchedulerState.objects.filter(task_name=crons.daily.name).update(
            last_fired_at=datetime(2026, 3, 1, 2, 59, tzinfo=UTC)
        )
        [again] = scheduler.tick()
    assert again.occurrence == dispatch.occurrence
    assert list(Job.objects.using("shard").values_list("id", "state")) == [(made.id, "done")]
    assert not Job.objects.using("default").exists()


@pytest.mark.django_db(databases=BOTH)
def test_shard_05_a_queue_is_paused_and_capped_where_its_jobs_are_claimed():
    from django_xjobs.models import QueueControl

    with routed():
        operations.pause_queue("reports")
        set_queue_limit("reports", 3)
        limits = get_driver().limits()
        assert limits.paused_queues() == frozenset({"reports"})  # what a worker leaves out
        assert queue_limits() == {"reports": 3}  # read from the controls, merged
        [control] = limits.queue_controls()
        assert (control.queue, control.paused, control.limit) == ("reports", True, 3)
        assert QueueControl.objects.using("shard").get(queue="reports").paused_at is not None
        assert not QueueControl.objects.using("default").exists()


@pytest.mark.django_db(databases=BOTH, transaction=True)
def test_shard_08_11_the_memory_driver_routes_events_and_the_verbs_over_many_alike():
    with routed(DRIVER="memory"):
        driver = get_driver()
        waiting = jobs.waiter.using(queue="reports").enqueue(order_id=7).id
        run_until_idle(queues=["reports"], driver=driver)
        assert operations.inspect_job(waiting)["state"] == "suspended"
        publish_event("order.shipped", {"order_id": 7})
        assert operations.inspect_job(waiting)["state"] == "ready"  # at once, in its store
        [run] = run_until_idle(queues=["reports"], driver=driver)
        assert run.outcome == "completed"
        there = jobs.ok.using(queue="reports", delay=3600).enqueue(n=1).id
        here = jobs.ok.using(delay=3600).enqueue(n=2).id
        done = operations.cancel_jobs(name="tests.jobs.ok", reason="maintenance")
        assert (done["matched"], done["changed"]) == (2, 2)
        assert operations.inspect_job(there)["state"] == "cancelled"
        assert operations.inspect_job(here)["state"] == "cancelled"
        jobs.ok.using(queue="reports", tenant_id="acme").enqueue(n=3)
        jobs.ok.using(tenant_id="acme").enqueue(n=4)
        assert operations.erase_tenant("acme")["jobs"] == 2


@pytest.mark.django_db(databases=BOTH)
def test_shard_05_a_paused_job_is_left_by_the_claim_of_every_database():
    from django_xjobs.limits.operator import inspect_job_pauses, pause_jobs, resume_jobs

    with routed():
        there = jobs.ok.using(queue="reports").enqueue(n=1).id
        pause_jobs(name="tests.jobs.ok")  # one control for the fleet, in the jobs database
        assert [p.job for p in inspect_job_pauses()] == ["tests.jobs.ok"]
        paused = frozenset(p.name for p in get_driver().limits().job_pauses())
        runs = get_driver().runs()
        held = runs.claim(
            queues=["reports"], limit=5, visibility_timeout=30, worker_id="w", paused=paused
        )
        assert held == []
        resume_jobs(name="tests.jobs.ok")
        held = runs.claim(queues=["reports"], limit=5, visibility_timeout=30, worker_id="w")
        assert [job.id for job in held] == [there]
