"""The rollup (issue 30): what the settle statements count per minute, queue, job name and
outcome equals what a direct read of ``x_jobs`` computes for the same fixture, on both drivers,
and ``XJOBS["ROLLUP_RETENTION"]`` prunes it."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from django.test import override_settings

from django_xjobs import rollup
from django_xjobs.drivers.contract import Complete, Finish, RetryAt, SuspendUntil
from django_xjobs.worker.retention import Retention
from tests.drivers.contract.support import claim, request
from tests.support.process import wait_for


def _fleet(harness):
    """Three done runs (waited 43 s, ran 2 s), one dead (waited 5 s, ran 40 s), one failed
    attempt retried, one suspension and one hand-back (neither counted) on two queues and two
    job names. Every settle lands at the same moment: a later shift would move the minutes."""
    driver = harness.driver
    for n in range(3):
        driver.jobs().enqueue(request(key=f"ok{n}"))
    driver.jobs().enqueue(request(name="tests.jobs.boom", key="dead", queue="mail"))
    driver.jobs().enqueue(request(name="tests.jobs.boom", key="retried", queue="mail"))
    driver.jobs().enqueue(request(key="suspended"))
    driver.jobs().enqueue(request(key="handed back"))
    harness.advance(5)
    held = claim(driver, queues=("mail",))
    harness.advance(38)
    held += claim(driver, queues=("default",))
    by_key = {h.idempotency_key: h for h in held}
    harness.advance(2)
    driver.runs().complete(
        [Complete(by_key[f"ok{n}"].id, by_key[f"ok{n}"].lease_token) for n in range(3)]
    )
    dead = by_key["dead"]
    assert driver.runs().finish(Finish(dead.id, dead.lease_token, state="dead", error="boom"))
    again = by_key["retried"]
    assert driver.runs().retry(RetryAt(again.id, again.lease_token, delay=60, error="boom"))
    parked = by_key["suspended"]
    assert driver.runs().suspend(SuspendUntil(parked.id, parked.lease_token, delay=60))
    back = by_key["handed back"]
    assert driver.runs().retry(RetryAt(back.id, back.lease_token, counts_as_attempt=False))


def _direct(harness):
    """What a direct read of the job rows says ended: run time from the attempt's claim to its
    last write; wait from its due time to its claim (a done row keeps its due time)."""
    expected = {}
    for row in harness.driver.reads().list_jobs(limit=1000):
        if row.state not in ("done", "dead"):
            continue
        run = (row.updated_at - row.last_attempted_at).total_seconds()
        minute = row.updated_at.astimezone(UTC).replace(second=0, microsecond=0)
        key = (minute, row.queue, row.name, row.state)
        wait = (row.last_attempted_at - row.run_at).total_seconds() if row.state == "done" else 0
        expected.setdefault(key, []).append(rollup.ended(*key, run, wait))
    return {key: rollup.merged(rows) for key, rows in expected.items()}


def test_rollup_equals_a_direct_read_of_the_jobs(harness):
    _fleet(harness)
    since = harness.driver.reads().list_jobs(limit=1)[0].created_at - timedelta(hours=1)
    read = {
        (r.minute, r.queue, r.name, r.outcome): r
        for r in harness.driver.history().read_rollups(since)
    }
    direct = _direct(harness)
    for key, want in direct.items():
        got = read[key]
        assert got.count == want.count
        assert got.run_buckets == want.run_buckets
        assert got.run_seconds == pytest.approx(want.run_seconds, abs=0.5)
        if key[3] == "done":
            assert got.wait_buckets == want.wait_buckets
            assert got.wait_seconds == pytest.approx(want.wait_seconds, abs=0.5)
    counted = {key[1:]: row.count for key, row in read.items()}
    # a failed attempt that will retry is counted; a suspension and a hand-back are not
    assert counted == {
        ("default", "tests.jobs.ok", "done"): 3,
        ("mail", "tests.jobs.boom", "dead"): 1,
        ("mail", "tests.jobs.boom", "retried"): 1,
    }
    done = read[next(k for k in read if k[3] == "done")]
    assert rollup.quantile(done.run_buckets, 0.5) == 2.5  # 2 s runs: the [1, 2.5) bucket
    assert rollup.quantile(done.wait_buckets, 0.95) == 60.0  # 43 s waits: [30, 60)


def test_rollup_retention_prunes_old_minutes(harness):
    _fleet(harness)
    harness.advance(3 * 3600)
    harness.driver.jobs().enqueue(request(key="late", queue="late"))
    [late] = claim(harness.driver, queues=("late",))
    harness.driver.runs().complete([Complete(late.id, late.lease_token)])
    assert harness.driver.history().prune_rollups(2 * 3600) == 3
    [kept] = harness.driver.history().read_rollups(late.created_at - timedelta(days=1))
    assert (kept.name, kept.outcome, kept.count) == ("tests.jobs.ok", "done", 1)


def test_the_hourly_upkeep_pass_applies_rollup_retention(live_harness):
    _fleet(live_harness)
    live_harness.advance(2 * 86400)
    since = live_harness.driver.reads().list_jobs(limit=1)[0].created_at - timedelta(days=1)
    assert live_harness.driver.history().read_rollups(since)
    with override_settings(XJOBS={"ROLLUP_RETENTION": "1d"}):
        retention = Retention(live_harness.driver)
        retention.maybe_prune()
        wait_for(lambda: not retention.running.is_set(), what="the upkeep pass to end")
    assert live_harness.driver.history().read_rollups(since) == []


def test_the_rollup_costs_no_statement_of_its_own(db):
    """A settle batch of five completes, one retry and one finish is still three statements:
    the rollup rides in each settle statement."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from django_xjobs.drivers.postgres import PostgresDriver
    from django_xjobs.run.settle import settle

    driver = PostgresDriver("default")
    for n in range(7):
        driver.jobs().enqueue(request(key=f"k{n}"))
    held = claim(driver)
    values = [Complete(h.id, h.lease_token) for h in held[:5]]
    values.append(RetryAt(held[5].id, held[5].lease_token, delay=60, error="boom"))
    values.append(Finish(held[6].id, held[6].lease_token, state="dead", error="boom"))
    with CaptureQueriesContext(connection) as queries:
        assert len(settle(driver, values)) == 7
    assert len(queries) == 3, [q["sql"][:60] for q in queries]
    since = held[0].created_at - timedelta(hours=1)
    counted = {r.outcome: r.count for r in driver.history().read_rollups(since)}
    assert counted == {"done": 5, "retried": 1, "dead": 1}
