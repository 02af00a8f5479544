"""Queue depth over time (issue 30): the samples the workers' presence beat takes once a minute
for the fleet equal what a direct count of ``x_jobs`` gives at that moment, on both drivers; a
second sample of the same minute writes nothing, even when two race; retention prunes them
with the rollup; the overview draws them per queue."""

from __future__ import annotations

import threading
from datetime import UTC, timedelta

import pytest
from django.db import connection, connections, transaction
from django.test import override_settings
from django.utils import timezone

from django_xjobs.drivers.contract import Complete, Finish, SuspendUntil
from django_xjobs.metrics.overview import overview
from django_xjobs.models import QueueDepth
from django_xjobs.worker.depth import DepthSampler
from django_xjobs.worker.presence import WorkerPresence
from django_xjobs.worker.retention import Retention
from tests.drivers.contract.support import claim, request
from tests.support.database import lock_waiters
from tests.support.process import wait_for


def _fleet(harness) -> None:
    """default: 2 ready, 1 delayed (due in 10 minutes), 1 running, 1 done, 1 suspended;
    mail: 1 delayed that fell due (counted ready, DESIGN Q-05), 1 running, 1 dead."""
    driver = harness.driver
    for key in ("run", "done", "parked", "r1", "r2"):
        driver.jobs().enqueue(request(key=key))
    driver.jobs().enqueue(request(key="m-run", queue="mail"))
    driver.jobs().enqueue(request(key="m-dead", queue="mail"))
    driver.jobs().enqueue(request(key="m-due", queue="mail", delay=5))
    driver.jobs().enqueue(request(key="later", delay=600))
    held = {h.idempotency_key: h for h in claim(driver, limit=3, queues=("default",))}
    held |= {h.idempotency_key: h for h in claim(driver, limit=2, queues=("mail",))}
    assert set(held) == {"run", "done", "parked", "m-run", "m-dead"}
    driver.runs().complete([Complete(held["done"].id, held["done"].lease_token)])
    parked = held["parked"]
    assert driver.runs().suspend(SuspendUntil(parked.id, parked.lease_token, delay=3600))
    dead = held["m-dead"]
    assert driver.runs().finish(Finish(dead.id, dead.lease_token, state="dead", error="boom"))
    harness.advance(10)  # m-due falls due; "later" still has 590 s to go


def _depth(harness) -> dict[str, tuple[int, int, int]]:
    since = timezone.now() - timedelta(days=1)
    return {
        s.queue: (s.ready, s.delayed, s.running)
        for s in harness.driver.history().read_depths(since)
    }


def test_a_sample_equals_a_direct_count_of_the_jobs(harness):
    _fleet(harness)
    assert harness.driver.history().sample_depth() == 2
    direct = {s.queue: (s.ready, s.delayed, s.running) for s in harness.driver.reads().stats()}
    assert _depth(harness) == direct == {"default": (2, 1, 1), "mail": (1, 0, 1)}
    [minute] = {
        s.minute for s in harness.driver.history().read_depths(timezone.now() - timedelta(days=1))
    }
    assert (minute.second, minute.microsecond) == (0, 0)
    assert abs(minute - timezone.now().astimezone(UTC)) < timedelta(minutes=2)


def test_a_second_sample_of_the_same_minute_writes_nothing(harness):
    _fleet(harness)
    assert harness.driver.history().sample_depth() == 2
    harness.driver.jobs().enqueue(request(key="more", queue="late"))
    assert harness.driver.history().sample_depth() == 0
    assert _depth(harness) == {"default": (2, 1, 1), "mail": (1, 0, 1)}
    # a minute later (the samples moved back with the rows) the next one is written
    harness.driver.jobs().age(60, only={"jobs"})
    assert harness.driver.history().sample_depth() == 3
    since = timezone.now() - timedelta(days=1)
    assert len({s.minute for s in harness.driver.history().read_depths(since)}) == 2


def test_two_samplers_racing_in_one_minute_write_one_row_per_queue(transactional_db):
    """The second sampler passes the minute check before the first commits; the unique key
    (minute, queue) still keeps one row each: it waits for the first and writes nothing."""
    from django_xjobs.drivers import create

    driver = create("postgres")
    driver.jobs().enqueue(request(key="a"))
    driver.jobs().enqueue(request(key="b", queue="mail"))
    for _ in range(2):  # a second try only when the minute turned between the two samplers
        second: list[int] = []

        def sample_too(into: list[int] = second) -> None:
            try:
                into.append(driver.history().sample_depth())
            finally:
                connections["default"].close()

        with transaction.atomic():
            assert driver.history().sample_depth() == 2
            racer = threading.Thread(target=sample_too)
            racer.start()
            with connection.cursor() as cursor:

                def waiting(second: list[int] = second) -> bool:
                    return lock_waiters(cursor, "x_queue_depth") == 1 or bool(second)

                wait_for(waiting, what="the second sampler to wait on the first one's rows")
        racer.join(10)
        if second != [2]:
            break
        QueueDepth.objects.all().delete()
    assert second == [0]
    rows = driver.history().read_depths(timezone.now() - timedelta(days=1))
    assert sorted((s.queue, s.ready) for s in rows) == [("default", 1), ("mail", 1)]


def test_retention_prunes_old_samples(harness):
    _fleet(harness)
    harness.driver.history().sample_depth()
    harness.driver.jobs().age(3 * 3600, only={"jobs"})
    harness.driver.history().sample_depth()
    assert harness.driver.history().prune_depths(2 * 3600) == 2
    since = timezone.now() - timedelta(days=1)
    assert [s.queue for s in harness.driver.history().read_depths(since)] == ["default", "mail"]
    assert len({s.minute for s in harness.driver.history().read_depths(since)}) == 1


def test_the_hourly_upkeep_pass_prunes_samples_with_the_rollup_retention(live_harness):
    _fleet(live_harness)
    live_harness.driver.history().sample_depth()
    live_harness.driver.jobs().age(2 * 86400, only={"jobs"})
    assert _depth(live_harness) == {} and live_harness.driver.history().read_depths(
        timezone.now() - timedelta(days=3)
    )
    with override_settings(XJOBS={"ROLLUP_RETENTION": "1d"}):
        retention = Retention(live_harness.driver)
        retention.maybe_prune()
        wait_for(lambda: not retention.running.is_set(), what="the upkeep pass to end")
    assert live_harness.driver.history().read_depths(timezone.now() - timedelta(days=3)) == []


def test_the_presence_beat_offers_a_sample_twice_a_minute(harness, monkeypatch):
    """The sampler rides on the worker's presence renewal (work it already does), never on a
    claim or a settle; it asks the store at most once per ``every`` seconds."""
    _fleet(harness)
    presence = WorkerPresence(
        harness.driver, worker_id="w-1", queues=("default",), ttl=30, in_flight=lambda: 0
    )
    clock = [1000.0]
    presence.depth = DepthSampler(
        harness.driver, worker_id="w-1", every=30, monotonic=lambda: clock[0]
    )
    asked: list[int] = []
    original = harness.driver.history().sample_depth

    def counted() -> int:
        asked.append(1)
        return original()

    monkeypatch.setattr(harness.driver.history(), "sample_depth", counted)
    presence.renew()
    clock[0] += 10
    presence.renew()
    clock[0] += 25
    presence.renew()
    assert len(asked) == 2
    assert _depth(harness) == {"default": (2, 1, 1), "mail": (1, 0, 1)}


def test_a_failing_sample_is_logged_and_never_raised(caplog):
    class SampleRefused(Exception):
        pass

    class Broken:
        def sample_depth(self) -> int:
            raise SampleRefused("no table")

    class Driver:
        def history(self):
            return Broken()

    sampler = DepthSampler(Driver(), worker_id="w-1")
    with caplog.at_level("WARNING", logger="django_xjobs"):
        assert sampler.maybe_sample() is True
    assert "xjobs.worker.depth_sample_failed" in caplog.text


def test_a_real_worker_samples_the_depth_as_it_starts(live_harness):
    from django_xjobs.worker.worker import Worker

    for key in ("a", "b", "c"):
        live_harness.driver.jobs().enqueue(request(key=key))
    Worker(queues=["default"], driver=live_harness.driver, burst=True, concurrency=1).run()
    assert _depth(live_harness) == {"default": (3, 0, 0)}


@pytest.mark.parametrize("window", ["1h", "1d"])
def test_the_overview_draws_each_queues_samples(harness, window):
    _fleet(harness)
    gone = harness.driver.jobs().enqueue(request(key="gone", queue="late"))
    harness.driver.history().sample_depth()
    harness.driver.jobs().cancel(gone.id, "drained")
    harness.driver.jobs().age(120, only={"jobs"})
    harness.driver.jobs().enqueue(request(key="r3"))
    harness.driver.history().sample_depth()
    figures = overview(window, timezone.now())
    by_queue = {d.queue: d for d in figures.depth}
    assert set(by_queue) == {"default", "mail", "late"}
    # a queue with no live job at the latest sample reads empty then, not its last figures
    late = by_queue["late"]
    assert late.latest.minute == by_queue["default"].latest.minute
    assert (late.latest.ready, late.latest.delayed, late.latest.running) == (0, 0, 0)
    assert [s for s in late.slots if any(s)] == [(1, 0, 0)]
    default = by_queue["default"]
    assert (default.latest.ready, default.latest.delayed, default.latest.running) == (3, 1, 1)
    drawn = [s for s in default.slots if any(s)]
    # each sample in its slot; two in one slot (a day's 15 minutes): the deeper of the two
    minutes = sorted({s.minute for s in harness.driver.history().read_depths(figures.since)})
    width = figures.slot_starts[1] - figures.slot_starts[0]
    apart = len({int((m - figures.since) / width) for m in minutes}) == 2
    assert drawn == ([(2, 1, 1), (3, 1, 1)] if apart else [(3, 1, 1)])
    assert apart or window == "1d"
    assert len(default.slots) == len(figures.slot_starts)
