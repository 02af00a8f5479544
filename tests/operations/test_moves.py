"""Moving a queue from one jobs database to another (issue 48, SPEC SHARD-30…34): the queue is
routed to ``shard`` (tests/settings.py: a second database on the suite's server) while jobs
enqueued before the re-route wait in ``default``; ``move_queue`` takes them there, a worker
drains them from ``shard`` exactly once (the ledger the handlers write says so), a repeated move
moves nothing, and every refusal writes nothing. Both drivers: the memory driver routes too,
one store per alias."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import override_settings

from django_xjobs import conf, operations
from django_xjobs.drivers import create, get_driver, install, uninstall
from django_xjobs.drivers.contract import Complete, EnqueueRequest, JobDriver
from django_xjobs.drivers.routing import RoutingDriver
from django_xjobs.errors import (
    QueueMoveInvalidError,
    QueueMoveRunningError,
    RouteSpansError,
    RouteUnknownError,
)
from django_xjobs.operations.moves import MOVER, move_queue
from django_xjobs.testing import run_until_idle
from tests.drivers.contract.support import claim
from tests.metrics.test_metrics import sample, scrape
from tests.models import Ledger

BOTH = ["default", "shard"]
DRIVERS = ["postgres", "memory"]


@contextmanager
def routed(driver: str, **more: object) -> Iterator[None]:
    """The settings with ``reports`` routed to ``shard``; for the memory driver, fresh stores
    (the memory routing driver of these settings is otherwise kept from test to test)."""
    xjobs = {
        **settings.XJOBS,
        "DRIVER": driver,
        "QUEUES": ["other", "reports"],
        "QUEUE_DATABASES": {"reports": "shard"},
        **more,
    }
    with override_settings(XJOBS=xjobs):
        if driver != "memory":
            yield
            return
        routing = conf.get().routing
        assert routing is not None
        fresh = RoutingDriver(routing, {a: create("memory") for a in routing.aliases})
        install(fresh)
        try:
            yield
        finally:
            uninstall(fresh)


def before_reroute(name: str, key: str, **payload: object) -> EnqueueRequest:
    """A job of ``reports`` as an enqueue made before the queue was routed to ``shard``."""
    return EnqueueRequest(
        name=name,
        queue="reports",
        input=payload,
        input_json=json.dumps(payload),
        idempotency_key=key,
        max_attempts=3,
    )


def alias(name: str) -> JobDriver:
    driver = get_driver()
    assert isinstance(driver, RoutingDriver)
    return driver.place.drivers[name]


def left_in(name: str) -> int:
    held = alias(name).jobs().moves().holds("reports")
    return held.waiting + held.running


@pytest.mark.django_db(databases=BOTH, transaction=True)
@pytest.mark.parametrize("kind", DRIVERS)
def test_shard_30_a_queues_waiting_jobs_move_and_run_once_in_their_new_database(kind):
    with routed(kind):
        source = alias("default").jobs()
        # one job that ran its first step there and sleeps: its steps move with it
        sleeper = source.enqueue(
            before_reroute("tests.jobs.sleeper", "sleeper:1", n=1, token=f"nap-{kind}")
        ).id
        run_until_idle(queues=["reports"], driver=alias("default"))
        assert operations.inspect_job(sleeper)["state"] == "suspended"
        tokens = [f"move-{kind}-{i}" for i in range(7)]
        for token in tokens:
            source.enqueue(before_reroute("tests.jobs.ledger", f"ledger:{token}", token=token))

        dry = move_queue("reports", to="shard", dry_run=True)
        assert (dry.waiting, dry.moved, dry.dry_run, dry.sources) == (8, 0, True, ["default"])
        assert left_in("default") == 8  # a dry run moves nothing

        done = move_queue("reports", to="shard", by="ops:alice", batch=3)
        assert (done.waiting, done.moved, done.merged, done.pages, done.left) == (8, 8, 0, 3, 0)
        assert left_in("default") == 0 and left_in("shard") == 8
        steps = [s["name"] for s in operations.inspect_job(sleeper)["steps"]]
        assert steps[:2] == ["before", "nap"]  # its recorded steps came along
        # the move resumed the queue where it paused it: nothing of the move is left standing
        assert "reports" not in alias("default").limits().paused_queues()
        [record] = operations.inspect_audit(verb="move_queue")
        assert (record["actor"], record["target"], record["changed"]) == ("ops:alice", "reports", 8)

        get_driver().jobs().age(4 * 86400)  # the sleeper's nap is over
        runs = run_until_idle(queues=["reports"], driver=get_driver())
        assert len(runs) == 8 and all(run.outcome == "completed" for run in runs)
        starts = Ledger.objects.filter(token__in=tokens, phase="start")
        assert sorted(starts.values_list("token", flat=True)) == sorted(tokens)  # once each
        assert list(Ledger.objects.filter(token=f"nap-{kind}").values_list("phase", flat=True)) == [
            "before",
            "after",
        ]  # its first step was not run again
        assert left_in("shard") == 0

        again = move_queue("reports", to="shard")  # SPEC SHARD-30: a repeated move is a no-op
        assert (again.waiting, again.moved, again.merged, again.pages) == (0, 0, 0, 0)


@pytest.mark.django_db(databases=BOTH, transaction=True)
@pytest.mark.parametrize("kind", DRIVERS)
def test_shard_30_a_move_repeated_after_a_crash_between_the_commits_finds_its_jobs(kind):
    with routed(kind):
        source, target = alias("default").jobs(), alias("shard").jobs().moves()
        for i in range(4):
            source.enqueue(before_reroute("tests.jobs.ok", f"ok:{i}", n=i))
        # a move that wrote a page in shard and died before default's delete committed
        with pytest.raises(RuntimeError):

            def crash(jobs):
                target.take(jobs)
                raise RuntimeError("killed between the commits")

            alias("default").jobs().moves().move_out("reports", limit=2, into=crash)
        assert left_in("default") == 4 and left_in("shard") == 2
        done = move_queue("reports", to="shard")
        assert (done.moved, done.merged, done.left) == (2, 2, 0)
        assert left_in("default") == 0 and left_in("shard") == 4
        runs = run_until_idle(queues=["reports"], driver=get_driver())
        assert len({run.job.id for run in runs}) == len(runs) == 4


@pytest.mark.django_db(databases=BOTH, transaction=True)
@pytest.mark.parametrize("kind", DRIVERS)
def test_shard_31_a_move_that_is_not_one_is_refused_and_writes_nothing(kind):
    with routed(kind):
        source = alias("default").jobs()
        first = source.enqueue(before_reroute("tests.jobs.ok", "ok:1", n=1)).id
        with pytest.raises(RouteUnknownError, match="'orders' is not one of the jobs' databases"):
            move_queue("reports", to="orders")
        with pytest.raises(QueueMoveInvalidError) as same:
            move_queue("reports", to="shard", from_="shard")
        assert same.value.code == "X_MOVE_INVALID" and "already lives" in same.value.message
        with pytest.raises(QueueMoveInvalidError, match="routed to database 'shard'"):
            move_queue("reports", to="default")  # new jobs would keep landing in shard
        # a job waiting for another in default lives with it: the move is refused up front
        waits = replace(before_reroute("tests.jobs.ok", "ok:2", n=2), after=(first,))
        second = source.enqueue(waits).id
        with pytest.raises(RouteSpansError) as spans:
            move_queue("reports", to="shard")
        assert spans.value.code == "X_ROUTE_SPANS" and str(first) in spans.value.message
        assert left_in("default") == 2 and left_in("shard") == 0
        assert "reports" not in alias("default").limits().paused_queues()
        assert operations.inspect_job(second)["state"] == "suspended"
    with (
        override_settings(XJOBS={**settings.XJOBS, "DRIVER": kind}),
        pytest.raises(QueueMoveInvalidError, match="no other jobs database"),
    ):
        move_queue("reports", to="default")  # one database: nowhere to move from


@pytest.mark.django_db(databases=BOTH, transaction=True)
@pytest.mark.parametrize("kind", DRIVERS)
def test_shard_32_a_run_running_there_refuses_the_move_which_leaves_it_paused_to_drain(kind):
    with routed(kind):
        source = alias("default")
        source.jobs().enqueue(before_reroute("tests.jobs.ok", "ok:1", n=1))
        source.jobs().enqueue(before_reroute("tests.jobs.ok", "ok:2", n=2))
        [run] = claim(source, limit=1, queues=("reports",))
        with pytest.raises(QueueMoveRunningError) as running:
            move_queue("reports", to="shard")
        assert running.value.code == "X_MOVE_RUNNING" and "1 run(s)" in running.value.message
        assert left_in("shard") == 0  # nothing moved
        [state] = [c for c in source.limits().queue_controls() if c.queue == "reports"]
        assert (state.paused, state.paused_by) == (True, MOVER)  # paused there, so it drains
        # SPEC SHARD-33: where the queue is claimed now (shard), it is not paused
        assert "reports" not in get_driver().limits().paused_queues()
        assert source.runs().complete([Complete(run.id, run.lease_token, None)]) == {run.id}
        done = move_queue("reports", to="shard")
        assert (done.moved, done.left) == (1, 0)
        assert "reports" not in source.limits().paused_queues()  # its own pause, resumed


@pytest.mark.django_db(databases=BOTH, transaction=True)
def test_shard_32_an_operators_pause_there_is_kept():
    with routed("postgres"):
        source = alias("default")
        source.jobs().enqueue(before_reroute("tests.jobs.ok", "ok:1", n=1))
        source.limits().pause_queue("reports", "ops:bob")
        assert move_queue("reports", to="shard").moved == 1
        [state] = [c for c in source.limits().queue_controls() if c.queue == "reports"]
        assert (state.paused, state.paused_by) == (True, "ops:bob")


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db(databases=BOTH, transaction=True)
def test_shard_34_xjobs_move_queue_asks_first_then_moves_and_says_it_in_json(monkeypatch):
    with routed("postgres"):
        source = alias("default").jobs()
        for i in range(3):
            source.enqueue(before_reroute("tests.jobs.ok", f"ok:{i}", n=i))
        dry = xjobs("move-queue", "reports", "--to", "shard", "--dry-run")
        assert "3 waiting job(s) in default would move to shard" in dry
        monkeypatch.setattr("sys.stdin.isatty", lambda: False)
        with pytest.raises(CommandError, match=r"X_CONFIRMATION_REQUIRED.*nothing was moved"):
            xjobs("move-queue", "reports", "--to", "shard")
        assert left_in("shard") == 0
        before = sample(scrape()[1], "xjobs_operator_actions_total", verb="move_queue") or 0
        done = json.loads(xjobs("move-queue", "reports", "--to", "shard", "--yes", "--json"))
        assert (done["moved"], done["left"], done["sources"]) == (3, 0, ["default"])
        after = sample(scrape()[1], "xjobs_operator_actions_total", verb="move_queue")
        assert after == before + 1  # the move is counted as an operator action
        text = xjobs("move-queue", "reports", "--to", "shard", "--yes")
        assert "moved 0 job(s) from default to shard" in text


@pytest.mark.django_db(databases=BOTH, transaction=True)
def test_shard_30_a_claim_in_the_source_passes_over_a_page_on_its_way():
    with routed("postgres"):
        source = alias("default")
        for i in range(3):
            source.jobs().enqueue(before_reroute("tests.jobs.ok", f"ok:{i}", n=i))
        target = alias("shard").jobs().moves()
        seen: list[object] = []

        def claim_meanwhile() -> None:
            try:  # a worker on the old settings, on its own connection
                seen.extend(claim(source, limit=10, queues=("reports",)))
            finally:
                connections.close_all()

        def into(jobs):
            target.take(jobs)
            other = threading.Thread(target=claim_meanwhile)
            other.start()
            other.join()

        gone = source.jobs().moves().move_out("reports", limit=10, into=into)
        assert len(gone) == 3 and seen == []  # locked from the read to the delete
        assert left_in("default") == 0 and left_in("shard") == 3
