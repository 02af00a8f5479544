"""Retention deletes in batches of 1,000, each in its own short transaction, and each batch
starts where the previous one stopped instead of at the oldest row again (the rows it deleted
keep their index entries until a vacuum). Jobs that finished at the same instant across a batch
boundary are all deleted. Both drivers."""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.test import override_settings

from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.operations import inspect_audit, pause_queue
from django_xjobs.states import FINISHED_STATES
from django_xjobs.testing import run_until_idle
from django_xjobs.worker.retention import Retention
from tests import jobs
from tests.support.database import no_history_days
from tests.support.process import wait_for

COUNT = 1_001  # two batches: 1000, then one row that finished at the same instant


def test_a_prune_of_several_batches_deletes_every_old_job_even_when_they_share_an_instant(
    harness,
):
    jobs.ok.enqueue_many([{"n": n} for n in range(COUNT)])
    run_until_idle(max_runs=COUNT + 1)
    if not isinstance(harness.driver, MemoryDriver):
        # acks settle many rows per statement, so rows share updated_at anyway; make every row
        # share it, so each batch boundary falls inside a run of equal timestamps
        with connection.cursor() as cursor:
            cursor.execute("UPDATE x_jobs SET updated_at = now()")
    harness.advance(3600)
    fresh = jobs.ok.enqueue(n=COUNT).id
    run_until_idle()

    assert harness.driver.jobs().prune(older_than=60, states=["done"]) == {"done": COUNT}
    assert harness.row(fresh).state == "done"
    assert harness.driver.jobs().prune(older_than=60, states=["done"]) == {"done": 0}


def test_audit_04_the_hourly_upkeep_pass_prunes_the_audit_trail(live_harness):
    """SPEC AUDIT-04: operator records older than ``XJOBS["AUDIT_RETENTION"]`` go with the
    rollup's minutes; newer ones stay."""
    pause_queue("mail", by="ops:old")
    live_harness.driver.jobs().age(2 * 86400, only={"jobs"})
    pause_queue("mail", by="ops:new")
    with override_settings(XJOBS={"AUDIT_RETENTION": "1d"}):
        retention = Retention(live_harness.driver)
        retention.maybe_prune()
        wait_for(lambda: not retention.running.is_set(), what="the upkeep pass to end")
    assert [a.actor for a in inspect_audit()] == ["ops:new"]


def test_hist_02_hist_03_with_history_on_the_upkeep_pass_moves_then_drops_days(live_harness):
    """SPEC HIST-02, HIST-03: the worker's upkeep pass moves finished jobs past the grace to
    the history and drops each day past RETENTION there (HISTORY is on by default); with
    HISTORY=False nothing moves."""
    driver = live_harness.driver
    no_history_days(driver)
    jobs.ok.enqueue(n=1)
    run_until_idle()
    driver.jobs().age(3 * 86400, only={"jobs"})  # finished three days ago
    jobs.ok.enqueue(n=2)
    run_until_idle()
    driver.jobs().age(2 * 3600, only={"jobs"})  # both past the default grace of an hour

    def upkeep() -> None:
        retention = Retention(driver)
        retention.maybe_prune()
        wait_for(lambda: not retention.running.is_set(), what="the upkeep pass to end")

    with override_settings(XJOBS={"HISTORY": False}):
        upkeep()
    assert driver.history().partitions() == []  # off: the history is not touched
    assert driver.jobs().prune(older_than=-86400, states=["done"], dry_run=True) == {"done": 2}
    try:
        with override_settings(XJOBS={"RETENTION": {"dead": "90d", "done": "2d"}}):
            upkeep()
        _kept_and_dropped(driver)
    finally:  # committed days outlive the test's flush, which empties the rows only
        driver.history().drop_partitions(dict.fromkeys(FINISHED_STATES, -30 * 86400))


def _kept_and_dropped(driver) -> None:
    left = driver.jobs().prune(older_than=-86400, states=["done"], dry_run=True)
    assert left == {"done": 0}  # both left x_jobs; the older one's day is gone with it
    assert [r.input for r in driver.reads().list_jobs()] == [{"n": 2}]
    # the days kept: two back (RETENTION), today, and HISTORY_AHEAD's three ahead
    days = [p.day for p in driver.history().partitions() if p.state == "done"]
    assert len(days) == 6
    assert days[-1] - days[0] == timedelta(days=5)
