"""The driver contract, reads (SPEC DRV-04 table, DRV-05 gaps closed): the job list, the dead
letters and the stats buckets. Every case runs on the memory driver AND the PostgreSQL driver through the ``harness``
fixture, asserting the same answers."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest
from django.conf import settings
from django.db import transaction
from django.test import override_settings

from django_xjobs.drivers.contract import (
    Complete,
    Finish,
    SuspendUntil,
)
from django_xjobs.limits.claims import ClaimLimits
from django_xjobs.limits.keys import SEPARATOR
from django_xjobs.outbox.relay import Relay
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.drivers.contract.support import claim

#: numbers past a double's exact range (2**53): ints a 64-bit primary key or more wide, and
#: floats Python writes with an exponent (1e16 and up), which jsonb keeps as digits
NUMBERS = {
    "bigint": 2**63 - 1,
    "past_2_53": 2**53 + 1,
    "negative": -(2**64),
    "thirty_digits": 10**30,
    "exact_float": 2.0**53,
    "float": 1e20,
    "digits": 1.2345678901234567e25,
    "negative_float": -3.5e16,
    "largest": 1.7976931348623157e308,
    "tiny": 1e-20,
    "nested": [2**62, {"f": 9.9e99}],
    "text": "1e+20 stays text",
}


def typed(value: Any) -> Any:
    """``value`` with each number paired with its type: an int read back for a float differs."""
    if isinstance(value, dict):
        return {key: typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [typed(item) for item in value]
    return (type(value).__name__, value)


# --- (h) list newest first, limit after the sort --------------------------------------------


def test_insp_04_se_06_list_is_newest_first_and_limited_after_sorting(harness):
    ids = [jobs.ok.enqueue(n=i).id for i in range(5)]
    assert [r.id for r in harness.driver.reads().list_jobs()] == ids[::-1]
    assert [r.id for r in harness.driver.reads().list_jobs(limit=2)] == ids[:2:-1]
    assert [
        r.id for r in harness.driver.reads().list_jobs(state="ready", name="tests.jobs.ok")
    ] == ids[::-1]
    assert harness.driver.reads().list_jobs(queue="other") == []


def test_insp_04_list_defaults_to_100_rows(harness):
    for i in range(105):
        jobs.ok.enqueue(n=i)
    assert len(harness.driver.reads().list_jobs()) == 100


# --- (i) dead letters by updated_at, newest first -------------------------------------------


def test_insp_05_dead_letters_newest_first(harness):
    jobs.ok.enqueue(n=1)
    jobs.ok.enqueue(n=2)
    jobs.ok.enqueue(n=3)
    a, b, c = claim(harness.driver)
    harness.driver.runs().finish(Finish(b.id, b.lease_token, "dead"))
    harness.advance(10)
    harness.driver.runs().finish(Finish(a.id, a.lease_token, "dead"))
    harness.driver.runs().complete([Complete(c.id, c.lease_token)])
    assert [r.id for r in harness.driver.reads().dead_letters()] == [a.id, b.id]
    assert [r.id for r in harness.driver.reads().dead_letters(limit=1)] == [a.id]


# --- (j) exclusive stats buckets ------------------------------------------------------------


def test_met_03_q_05_stats_buckets_are_exclusive(harness):
    """SPEC SE-05; a due ``delayed`` row counts as ready (STATE-05)."""
    jobs.ok.enqueue(n=1)  # ready
    jobs.ok.using(delay="1h").enqueue(n=2)  # delayed
    jobs.ok.using(delay="10s").enqueue(n=3)  # delayed, due after the advance: counts ready
    harness.advance(20)
    jobs.ok.enqueue(n=4)
    jobs.ok.enqueue(n=5)
    jobs.on_other_queue.enqueue(n=1)
    running = claim(harness.driver, limit=2)  # the two oldest due: n=1 and n=3
    assert {j.input["n"] for j in running} == {1, 3}
    jobs.ok.enqueue(n=6)
    jobs.ok.enqueue(n=7)
    [dead, parked] = claim(harness.driver, limit=2)
    harness.driver.runs().finish(Finish(dead.id, dead.lease_token, "dead"))
    harness.driver.runs().suspend(SuspendUntil(parked.id, parked.lease_token, delay=60))
    due = jobs.ok.using(delay="10s").enqueue(n=8)  # still 'delayed' when read, but due
    harness.advance(20)
    stats = {s.queue: s for s in harness.driver.reads().stats()}
    assert list(stats) == ["default", "other"]
    default = stats["default"]
    assert harness.row(due.id).state == "delayed"  # counted below as ready, not delayed
    assert (default.ready, default.delayed, default.running, default.suspended, default.dead) == (
        3,
        1,
        2,
        1,
        1,
    )
    assert stats["other"].ready == 1
    assert default.oldest_ready_seconds >= 0.0
    assert stats["other"].oldest_ready_seconds >= 0.0


def test_stats_oldest_ready_is_measured_from_run_at(harness):
    jobs.ok.enqueue(n=1)
    harness.advance(90)
    [default] = harness.driver.reads().stats()
    assert 90 <= default.oldest_ready_seconds < 120


# --- numbers past 2**53 read back as written --------------------------------------------------


@pytest.mark.parametrize("path", ["direct", "commit", "relay"])
def test_drv_05_numbers_past_2_53_read_back_as_written(live_harness, path):
    """An int keeps every digit and a float stays the same float, in the input (published
    directly, staged and published at commit, or by the relay), a step's output, the result and
    an event's payload, on PostgreSQL as in memory: jsonb keeps a number's digits, not its type,
    and read a float written ``1e+20`` back as an int."""
    driver, token = live_harness.driver, f"numbers-{path}"
    with override_settings(XJOBS={**settings.XJOBS, "OUTBOX": "auto"}):
        if path == "direct":
            job_id = jobs.numbers.using(outbox=False).enqueue(token=token, values=NUMBERS).id
        elif path == "commit":
            with transaction.atomic():
                job_id = jobs.numbers.enqueue(token=token, values=NUMBERS).id
        else:
            store = driver.outbox("default")
            job_id = store.stage(jobs.numbers.build_request({"token": token, "values": NUMBERS}))
            assert Relay(store=store, driver=driver).tick() == 1
    assert typed(live_harness.row(job_id).input) == typed({"token": token, "values": NUMBERS})
    [run] = run_until_idle(driver=driver)
    assert run.outcome == "completed"
    row = live_harness.row(job_id)
    [step] = driver.steps().list(row.run_id)
    assert typed(step.output) == typed(NUMBERS)
    assert typed(row.result) == typed({"step": NUMBERS})
    published = driver.events().publish(
        id=uuid4(), name="numbers", payload=NUMBERS, correlation_key=None, ttl=60
    )
    found = driver.events().find("numbers", after=published.published_at)
    assert found is not None and typed(found.payload) == typed(NUMBERS)


# --- (k) what a claim weighs for one job, counted (why_job, issue 42) -------------------------


def test_standing_counts_the_due_jobs_ahead_and_the_queues_runs(harness):
    from django_xjobs.drivers.contract import Standing, WorkerLoad

    driver = harness.driver
    older = [jobs.ok.enqueue(n=n).id for n in range(3)]
    mine = jobs.ok.enqueue(n=9).id
    jobs.important.enqueue(n=1)  # priority 5: ahead whatever its age
    jobs.ok.using(delay="1h").enqueue(n=10)  # not due: no claim takes it first
    jobs.on_other_queue.enqueue(n=1)  # another queue
    [first] = claim(driver, limit=1)  # the priority-5 job runs now
    standing = driver.reads().standing(mine, cap=100)
    assert (standing.ahead, standing.higher_priority) == (3, 0)
    assert standing.queue_running == 1 and standing.key is None
    assert standing.loads == (WorkerLoad("w1", 1, 1, 1),)
    assert driver.reads().standing(older[0], cap=100).ahead == 0
    assert driver.reads().standing(mine, cap=2).ahead == 2  # counted up to the cap, never past it
    assert driver.reads().standing(jobs.ok.enqueue(n=11).id, cap=100).ahead == 4
    assert driver.reads().standing(first.run_id, cap=100) is None  # no job has that id
    assert isinstance(standing, Standing)


def test_standing_counts_a_keys_runs_starts_and_pause(harness):
    from django_xjobs.limits.worker import declared_limits

    driver = harness.driver
    limits = ClaimLimits(jobs=declared_limits()[0])
    first = jobs.per_account.enqueue(account="acme", n=0)
    driver.runs().claim(
        queues=["limited"],
        limit=5,
        visibility_timeout=30,
        worker_id="w1",
        lapsed=False,
        limits=limits,
    )
    waiting = jobs.per_account.enqueue(account="acme", n=1).id
    jobs.per_account.enqueue(account="other", n=1)
    standing = driver.reads().standing(waiting, cap=100)
    assert standing.key == f"tests.jobs.per_account{SEPARATOR}acme"
    assert (standing.key_running, standing.key_holders) == (1, ((first.id, "w1"),))
    assert (standing.ahead, standing.key_ahead) == (0, 0)
    driver.limits().pause_key(standing.key, 60)
    paused = driver.reads().standing(waiting, cap=100).key_paused_until
    assert 50 < (paused - driver.steps().now()).total_seconds() <= 61
    for n in range(2):
        jobs.rated_slowly.enqueue(partner="p", n=n)
    driver.runs().claim(
        queues=["rated"],
        limit=5,
        visibility_timeout=30,
        worker_id="w1",
        lapsed=False,
        limits=limits,
    )
    third = jobs.rated_slowly.enqueue(partner="p", n=2).id
    assert len(driver.reads().standing(third, cap=100).key_starts) == 2


def test_standing_counts_fair_share_turns(harness):
    from django.test import override_settings

    driver = harness.driver
    with override_settings(XJOBS={"QUEUES": ["other"], "OUTBOX": "off", "FAIR_SHARE": "tenant"}):
        big = [jobs.ok.using(tenant_id="big").enqueue(n=n).id for n in range(3)]
        small = jobs.ok.using(tenant_id="small").enqueue(n=9).id
    third = driver.reads().standing(big[2], cap=100, fair=True)
    assert (third.key_ahead, third.other_keys, third.other_keys_ahead) == (2, 1, 1)
    first = driver.reads().standing(small, cap=100, fair=True)
    assert (first.key_ahead, first.other_keys, first.other_keys_ahead) == (0, 1, 1)
    assert driver.reads().standing(small, cap=100).other_keys == 0  # counted only when asked


def test_job_states_reads_each_state_and_leaves_unknown_ids_out(harness):
    from uuid import UUID

    driver = harness.driver
    done = jobs.ok.enqueue(n=1).id
    [held] = claim(driver)
    driver.runs().complete([Complete(held.id, held.lease_token)])
    ready = jobs.ok.enqueue(n=2).id
    unknown = UUID(int=1)
    assert driver.reads().job_states([done, ready, unknown]) == {done: "done", ready: "ready"}
    assert driver.reads().job_states([]) == {}
