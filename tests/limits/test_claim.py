"""Limits decided in the claim (issue 31, SPEC LIMIT-10..16), on both drivers: a run over its
limit is never claimed, so nothing is claimed and handed back.

The limits are the test jobs' own (tests/jobs.py, queue "limited"): ``per_account`` one run
per account at once, ``rated`` ten starts a second per partner; ``capped`` has none of its own,
on a queue an operator caps.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.db import connection

from django_xjobs import job
from django_xjobs.drivers.contract import Complete
from django_xjobs.errors import InvariantError, JobDefinitionError
from django_xjobs.limits.claims import KEY_SHOWN_FOR, ClaimLimits
from django_xjobs.limits.keys import SEPARATOR, parse_rate
from django_xjobs.limits.worker import LimitPlan, declared_limits
from django_xjobs.worker.retention import Retention
from tests import jobs
from tests.support.process import wait_for

VIS = 30.0


def plan(plain=("capped",), stray=()) -> ClaimLimits:
    return ClaimLimits(jobs=declared_limits()[0], plain_queues=tuple(plain), stray_queues=stray)


def claim(driver, limits=None, limit=50, queues=("limited", "capped"), lapsed=False, worker="w1"):
    more = {} if limits is None else {"limits": limits}
    return driver.runs().claim(
        queues=list(queues),
        limit=limit,
        visibility_timeout=VIS,
        worker_id=worker,
        lapsed=lapsed,
        **more,
    )


def accounts(claimed) -> list[str]:
    return sorted(c.input["account"] for c in claimed)


def ack(driver, claimed) -> None:
    driver.runs().complete([Complete(c.id, c.lease_token, None) for c in claimed])


def test_limit_10_a_key_is_the_job_name_and_its_rendered_template(harness):
    result = jobs.per_account.enqueue(account="acme", n=1)
    stored = _limit_key(harness, result.id)
    assert stored == f"tests.jobs.per_account{SEPARATOR}acme"
    plain = jobs.ok.enqueue(n=1)
    assert _limit_key(harness, plain.id) is None


def test_limit_11_one_run_per_key_at_once_others_of_the_job_run(harness):
    for account in ("a", "b"):
        for n in range(3):
            jobs.per_account.enqueue(account=account, n=n)
    first = claim(harness.driver, plan())
    assert accounts(first) == ["a", "b"]  # one of each, never two of one
    assert claim(harness.driver, plan()) == []  # both keys are running: nothing over the limit
    ack(harness.driver, [c for c in first if c.input["account"] == "a"])
    again = claim(harness.driver, plan())
    assert accounts(again) == ["a"]
    # the run order within a key is the claim's: its next run, not any
    assert again[0].input["n"] == 1


def test_limit_11_without_limits_the_claim_is_the_plain_one(harness):
    """No limits passed: the statement of before, which takes every due row."""
    for n in range(3):
        jobs.per_account.enqueue(account="a", n=n)
    assert len(claim(harness.driver, None)) == 3


def test_limit_12_a_rate_caps_starts_per_window_per_key(harness):
    for n in range(14):
        jobs.rated.enqueue(partner="p", n=n)
    jobs.rated.enqueue(partner="q", n=0)
    first = claim(harness.driver, plan())
    assert sorted(c.input["partner"] for c in first) == ["p"] * 10 + ["q"]
    ack(harness.driver, first)
    assert claim(harness.driver, plan()) == []  # finished, but their starts are in the window
    harness.advance(0.5)
    assert claim(harness.driver, plan()) == []
    harness.advance(0.6)  # the first starts are now more than a second ago
    assert len(claim(harness.driver, plan())) == 4


@job(
    name="test_claim.hourly",
    idempotency_key="hourly:{partner}:{n}",
    queue="limited",
    rate_limit="10/h",
    limit_key="{partner}",
)
def hourly(ctx, partner: str, n: int = 0):
    """Ten starts an hour per partner: a window the test moves through in half hours, so the
    real time its statements take (the database's clock runs on) never counts."""


def test_limit_12_a_claim_takes_only_the_room_left_by_the_starts_in_the_window(harness):
    """A key's budget is its rate less the starts still inside its window, not a fresh rate per
    claim: the limit holds over a window a claim only partly spent (3 starts, then 7 more), and
    as it slides (the first 3 leave it, so 3 more may start, not 10). The fleet test shows the
    same rule across real workers; this shows it in a moment."""
    for n in range(30):
        hourly.enqueue(partner="p", n=n)
    assert len(claim(harness.driver, plan(), limit=3)) == 3
    harness.advance(1800)
    assert len(claim(harness.driver, plan())) == 7  # 10 less the 3 starts half an hour ago
    assert claim(harness.driver, plan()) == []
    harness.advance(1900)  # the first 3 starts are past the hour, the 7 others not
    assert len(claim(harness.driver, plan())) == 3
    assert claim(harness.driver, plan()) == []
    harness.advance(1800)  # the 7 are past the hour, the last 3 half an hour old
    assert len(claim(harness.driver, plan())) == 7


def test_limit_12_a_throttled_key_is_not_locked_or_walked(harness):
    """A spent key is left out before its runs are looked at: its whole backlog costs the claim
    one step (postgres: the key is skipped by the limit_keys statement)."""
    for n in range(30):
        jobs.rated.enqueue(partner="p", n=n)
    assert len(claim(harness.driver, plan())) == 10
    jobs.per_account.enqueue(account="z", n=0)
    assert accounts(claim(harness.driver, plan())) == ["z"]


def test_limit_13_a_queue_cap_set_at_runtime_holds_across_workers(harness):
    harness.driver.limits().set_queue_limit("capped", 2)
    for n in range(5):
        jobs.capped.enqueue(n=n)
    first = claim(harness.driver, plan(), worker="w1")
    second = claim(harness.driver, plan(), worker="w2")
    assert (len(first), len(second)) == (2, 0)
    ack(harness.driver, first[:1])
    assert len(claim(harness.driver, plan(), worker="w2")) == 1
    state = harness.driver.limits().set_queue_limit("capped", None)
    assert state.limit is None
    assert len(claim(harness.driver, plan(), worker="w2")) == 2
    assert [c.limit for c in harness.driver.limits().queue_controls()] == [None]


def test_limit_13_a_cap_counts_keyed_runs_too_and_keeps_a_pause(harness):
    harness.driver.limits().pause_queue("limited", "ops")
    state = harness.driver.limits().set_queue_limit("limited", 1)
    assert (state.paused, state.limit) == (True, 1)
    assert [(c.queue, c.paused, c.limit) for c in harness.driver.limits().queue_controls()] == [
        ("limited", True, 1)
    ]
    for account in ("a", "b", "c"):
        jobs.per_account.enqueue(account=account, n=0)
    assert accounts(claim(harness.driver, plan())) == ["a"]  # the cap, below the keys' room


def test_limit_14_a_paused_key_is_skipped_until_its_pause_runs_out(harness):
    for account in ("a", "b"):
        jobs.per_account.enqueue(account=account, n=0)
    harness.driver.limits().pause_key(f"tests.jobs.per_account{SEPARATOR}a", 2.0)
    assert accounts(claim(harness.driver, plan())) == ["b"]
    harness.advance(2.1)
    assert accounts(claim(harness.driver, plan())) == ["a"]


def test_limit_15_a_lapsed_run_is_taken_again_and_keeps_its_slot(harness):
    """A crashed worker's run holds its key until its lease lapses; the sweep takes it again
    (one run still), and no second run of the key starts beside it."""
    for n in range(2):
        jobs.per_account.enqueue(account="a", n=n)
    first = claim(harness.driver, plan(), worker="dead")
    assert [c.input["n"] for c in first] == [0]
    harness.advance(VIS + 1)
    again = claim(harness.driver, plan(), lapsed=True, worker="w2")
    assert [(c.id, c.input["n"]) for c in again] == [(first[0].id, 0)]
    assert claim(harness.driver, plan(), lapsed=True, worker="w3") == []


def test_limit_16_runs_with_no_key_in_a_limited_queue_are_found_on_the_sweep(harness):
    """A run enqueued before its job declared a key has none: the claim between sweeps leaves a
    queue of keyed jobs to its keys (no walk through a throttled backlog), the sweep finds it."""
    result = jobs.per_account.enqueue(account="a", n=0)
    _clear_key(harness, result.id)
    assert claim(harness.driver, plan(plain=())) == []
    assert [c.id for c in claim(harness.driver, plan(plain=(), stray=("limited",)))] == [result.id]


def test_limit_16_a_stray_run_is_looked_for_among_the_first_waiting_rows_only(harness):
    """The sweep reads a bounded stretch of the queue (``ClaimLimits.scan``), not a throttled
    backlog whole: a stray run behind more than that waits for the rows ahead of it."""
    ahead = [
        r.id
        for r in jobs.rated.enqueue_many(
            [{"partner": "busy", "n": n} for n in range(ClaimLimits.scan(1))]
        )
    ]
    # none of it is taken
    harness.driver.limits().pause_key(f"tests.jobs.rated{SEPARATOR}busy", 60.0)
    harness.advance(1)  # the backlog is older than the stray run behind it
    behind = jobs.per_account.enqueue(account="late", n=0)
    _clear_key(harness, behind.id)
    stray = plan(plain=(), stray=("limited",))
    assert claim(harness.driver, stray, limit=1) == []  # one row past the stretch read
    harness.driver.jobs().cancel(ahead[0], None)
    assert [c.id for c in claim(harness.driver, stray, limit=1)] == [behind.id]


def test_limit_usage_shows_running_and_starts(harness):
    for n in range(3):
        jobs.rated.enqueue(partner="p", n=n)
    jobs.per_account.enqueue(account="a", n=0)
    claim(harness.driver, plan())
    usage = {
        key: (running, len(starts))
        for key, _, running, starts in harness.driver.limits().key_usage()
    }
    assert usage == {
        f"tests.jobs.rated{SEPARATOR}p": (3, 3),
        f"tests.jobs.per_account{SEPARATOR}a": (1, 0),
    }


def _keys(harness) -> set[str]:
    return {key.partition(SEPARATOR)[2] for key, *_ in harness.driver.limits().key_usage()}


def test_limit_18_retention_prunes_idle_keys_and_keeps_the_busy_ones(harness):
    """x_limit_keys holds the keys in use, not every tenant ever seen: a key with no run waiting
    or running, no pause in force and no start in its window goes once idle long enough."""
    windows = {j.name: j.window for j in declared_limits()[0] if j.window is not None}
    for n in range(2):
        jobs.per_account.enqueue(account="busy", n=n)  # one running, one waiting
    jobs.per_account.enqueue(account="running", n=0)
    jobs.per_account.enqueue(account="done", n=0)
    for n in range(11):
        jobs.rated.enqueue(partner="waiting", n=n)  # ten start, one waits on the rate
    jobs.rated.enqueue(partner="spent", n=0)
    claimed = claim(harness.driver, plan())
    ack(
        harness.driver,
        [c for c in claimed if c.input.get("account") == "done" or "partner" in c.input],
    )
    harness.driver.limits().pause_key(f"tests.jobs.per_account{SEPARATOR}paused", 3600.0)
    everyone = {"busy", "running", "done", "waiting", "spent", "paused"}
    assert _keys(harness) == everyone
    limits = harness.driver.limits()
    assert limits.prune_limit_keys(windows, idle_for=60.0) == 0  # all touched just now
    assert limits.prune_limit_keys(windows, idle_for=0.0) == 1  # "spent": in its window
    assert _keys(harness) == everyone - {"done"}
    harness.advance(61)  # "spent"'s start is out of its one-second window
    assert harness.driver.limits().prune_limit_keys(windows, idle_for=60.0) == 1
    assert _keys(harness) == {"busy", "running", "waiting", "paused"}
    # a pruned key is a new key: the next run of it is claimed as the first was
    jobs.per_account.enqueue(account="done", n=1)
    again = claim(harness.driver, plan())
    assert sorted(c.input.get("account", c.input.get("partner")) for c in again) == [
        "done",
        "waiting",
    ]


def test_limit_18_the_hourly_upkeep_pass_prunes_keys_idle_for_a_day(live_harness):
    for account in ("old", "new"):
        jobs.per_account.enqueue(account=account, n=0)
    ack(live_harness.driver, claim(live_harness.driver, plan()))
    live_harness.advance(KEY_SHOWN_FOR + 1)  # both idle a day: listed no more, pruned
    jobs.per_account.enqueue(account="new", n=1)  # waiting again: kept
    jobs.rated.enqueue(partner="p", n=0)
    claim(live_harness.driver, plan())  # its row is created, its run starts
    retention = Retention(live_harness.driver)
    retention.maybe_prune()
    wait_for(lambda: not retention.running.is_set(), what="the upkeep pass to end")
    assert _stored_keys(live_harness) == {"new", "p"}


def test_the_worker_claims_plainly_where_no_limit_is_declared(harness):
    worker_plan = LimitPlan(harness.driver, ["default", "limited", "capped"], interval=1.0)
    worker_plan.refresh()
    assert worker_plan.for_queues(["default"], sweep=True) is None
    limited = worker_plan.for_queues(["limited"], sweep=False)
    assert limited is not None and limited.plain_queues == ()
    assert worker_plan.for_queues(["capped"], sweep=False) is None
    harness.driver.limits().set_queue_limit("capped", 3)
    worker_plan.changed()
    worker_plan.refresh()
    capped = worker_plan.for_queues(["capped"], sweep=False)
    assert capped is not None and capped.plain_queues == ("capped",)


@pytest.mark.parametrize(
    ("text", "limit", "window"),
    [("10/s", 10, 1.0), ("100/m", 100, 60.0), ("500/h", 500, 3600.0), ("30/5m", 30, 300.0)],
)
def test_a_rate_reads_starts_per_window(text, limit, window):
    rate = parse_rate(text)
    assert (rate.limit, rate.window) == (limit, window)


@pytest.mark.parametrize("text", ["10", "0/s", "10/d", "ten/m", 10])
def test_a_bad_rate_is_refused_with_a_hint(text):
    with pytest.raises(InvariantError) as caught:
        parse_rate(text)
    assert "100/m" in caught.value.hint


def test_a_key_template_names_inputs_of_the_job():
    from django_xjobs import job

    with pytest.raises(JobDefinitionError, match="not an input"):

        @job(idempotency_key="x", name="tests.bad_limit_key", limit_key="{nope}")
        def bad(ctx, account: str):
            pass


def _stored_keys(harness) -> set[str]:
    """Every key whose state is stored, listed or not (key_usage hides keys idle a day)."""
    if harness.driver.name == "memory":
        stored = list(harness.driver._key_state)
    else:
        with connection.cursor() as cursor:
            cursor.execute("SELECT key FROM x_limit_keys")
            stored = [row[0] for row in cursor.fetchall()]
    return {key.partition(SEPARATOR)[2] for key in stored}


def _limit_key(harness, job_id):
    if harness.driver.name == "memory":
        return harness.driver._limit_keys.get(job_id)
    with connection.cursor() as cursor:
        cursor.execute("SELECT limit_key FROM x_jobs WHERE id = %s", [job_id])
        return cursor.fetchone()[0]


def _clear_key(harness, job_id) -> None:
    if harness.driver.name == "memory":
        del harness.driver._limit_keys[job_id]
        return
    with connection.cursor() as cursor:
        cursor.execute("UPDATE x_jobs SET limit_key = NULL WHERE id = %s", [job_id])


# --- RateLimited: the partner's word pauses the key, the run goes back unspent (LIMIT-14) ------


def test_limit_14_rate_limited_pauses_the_key_and_gives_the_attempt_back(live_harness):
    from django_xjobs.worker.worker import Worker

    slow = jobs.backs_off.enqueue(partner="slow", n=0, retry_after="2s")
    Worker(queues=["limited"], concurrency=2, driver=live_harness.driver, burst=True).run()
    row = live_harness.row(slow.id)
    assert (row.state, row.attempt) == ("ready", 0)  # handed back, the attempt not spent
    waits = (row.run_at - row.updated_at).total_seconds()
    assert 1.9 <= waits <= 2.1
    paused = {k: p for k, p, _, _ in live_harness.driver.limits().key_usage()}
    assert paused[f"tests.jobs.backs_off{SEPARATOR}slow"] is not None
    # the key's other runs wait with it; another key runs at once
    later = jobs.backs_off.enqueue(partner="slow", n=1)
    other = jobs.backs_off.enqueue(partner="fast", n=0)
    Worker(queues=["limited"], concurrency=2, driver=live_harness.driver, burst=True).run()
    assert live_harness.row(other.id).state == "done"
    assert live_harness.row(later.id).state == "ready"
    live_harness.advance(2.1)
    Worker(queues=["limited"], concurrency=2, driver=live_harness.driver, burst=True).run()
    assert {live_harness.row(i).state for i in (slow.id, later.id)} == {"done"}
    assert live_harness.row(slow.id).attempt == 1  # one attempt spent: the one that ran


@pytest.mark.parametrize(
    ("given", "seconds"),
    [(None, 1.0), (30, 30.0), ("30s", 30.0), ("120", 120.0), ("2m", 120.0), ("soon", 1.0)],
)
def test_limit_14_retry_after_reads_seconds_durations_and_headers(given, seconds):
    from django_xjobs.limits.rate_limited import seconds as read

    assert read(given) == seconds


def test_limit_14_retry_after_reads_an_http_date():
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    from django_xjobs.limits.rate_limited import seconds as read

    when = format_datetime(datetime.now(UTC) + timedelta(seconds=90), usegmt=True)
    assert 85 <= read(when) <= 90


def test_limit_10_a_run_published_from_the_outbox_carries_its_key(live_harness):
    """Staged in the caller's transaction, the run is inserted straight from the outbox row at
    commit (publish_taken copies it in SQL): it gets its key in that same transaction."""
    from django.db import transaction
    from django.test import override_settings

    auto = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "auto"}
    with override_settings(XJOBS=auto), transaction.atomic():
        staged = jobs.per_account.enqueue(account="acme", n=7)
        assert staged.staged
    from tests.support.process import wait_for

    wait_for(lambda: live_harness.row(staged.id) is not None, timeout=10, what="the publish")
    assert _limit_key(live_harness, staged.id) == f"tests.jobs.per_account{SEPARATOR}acme"


# --- fair share: the keys' runs in turns (LIMIT-17) ---------------------------------------------

FAIR = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "off", "FAIR_SHARE": "tenant"}


def test_limit_17_fair_share_takes_each_tenants_runs_in_turns(harness):
    from django.test import override_settings

    with override_settings(XJOBS=FAIR):
        big = jobs.ok.using(tenant_id="big")
        for n in range(20):
            big.enqueue(n=n)
        harness.advance(1)  # the big tenant's runs are older, as when it enqueued first
        small = [jobs.ok.using(tenant_id="small").enqueue(n=n).id for n in range(2)]
        worker_plan = LimitPlan(harness.driver, ["default"], interval=1.0)
        fair = worker_plan.for_queues(["default"], sweep=False)
        assert fair is not None and fair.fair and fair.plain_queues == ()
        first = claim(harness.driver, fair, limit=4, queues=("default",))
    tenants = sorted(c.tenant_id for c in first)
    assert tenants == ["big", "big", "small", "small"]  # not four of the big one's
    assert {c.id for c in first} >= set(small)


def test_limit_17_priority_still_orders_runs_within_a_tenant(harness):
    from django.test import override_settings

    with override_settings(XJOBS=FAIR):
        for n in range(3):
            jobs.ok.using(tenant_id="t").enqueue(n=n)
        urgent = jobs.ok.using(tenant_id="t", priority=9).enqueue(n=99)
        limits = ClaimLimits(fair=True)
        first = claim(harness.driver, limits, limit=1, queues=("default",))
    assert [c.id for c in first] == [urgent.id]


def test_limit_17_fair_share_is_the_tenant_or_a_template_over_the_inputs():
    from django_xjobs.conf import ConfigInvalidError, validate

    with pytest.raises(ConfigInvalidError) as caught:
        validate({"FAIR_SHARE": "everyone"})
    assert "tenant" in caught.value.hint
    assert validate({"FAIR_SHARE": "{customer_id}"}).fair_share == "{customer_id}"


def test_limit_18_postgres_prunes_keys_in_batches_each_after_the_last(db, monkeypatch):
    from django_xjobs.drivers import postgres

    monkeypatch.setattr(postgres, "_PRUNE_KEYS_BATCH", 2)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO x_limit_keys (key, updated_at)"
            " SELECT 'k' || g, now() - interval '2 days' FROM generate_series(1, 5) AS g"
        )
    assert (
        postgres.PostgresDriver("default").limits().prune_limit_keys({}, idle_for=KEY_SHOWN_FOR)
        == 5
    )
    assert _stored_keys(SimpleNamespace(driver=SimpleNamespace(name="postgres"))) == set()


def test_limit_11_every_key_gets_its_turn_when_a_claim_takes_fewer_keys_than_wait(harness):
    """A claim visits at most its limit of keys (issue 31's cost), from the key after the last
    one it took, round to the first: keys late in key order are reached, none starves, and
    the keys reached first do not get a second turn before every key has had its first."""
    for n in range(3):  # every key has more than one claim's worth of work waiting
        for account in range(20):
            jobs.per_account.enqueue(account=f"k{account:02}", n=n)
    started: list[str] = []
    for _ in range(5):
        taken = claim(harness.driver, plan(), limit=4)
        assert len(taken) == 4
        started += [c.input["account"] for c in taken]
        ack(harness.driver, taken)
    assert sorted(started) == [f"k{account:02}" for account in range(20)]
    # round again: the walk wrapped, the first keys' second runs come next
    again = claim(harness.driver, plan(), limit=4)
    assert sorted((c.input["account"], c.input["n"]) for c in again) == [
        (f"k{account:02}", 1) for account in range(4)
    ]


def test_limit_11_a_claim_steps_over_full_keys_to_ones_with_room(harness):
    """Keys whose one slot is taken are stepped over: the claim takes its limit from the keys
    after them, not nothing."""
    for account in range(12):
        jobs.per_account.enqueue(account=f"k{account:02}", n=0)
        jobs.per_account.enqueue(account=f"k{account:02}", n=1)
    seen: set[str] = set()
    for _ in range(3):  # nothing acked: the keys taken stay full
        taken = claim(harness.driver, plan(), limit=4)
        assert len(taken) == 4
        seen |= {c.input["account"] for c in taken}
    assert len(seen) == 12
    assert claim(harness.driver, plan(), limit=4) == []


@pytest.mark.parametrize("lapsed", [False, True], ids=["claim", "claim_lapsed"])
def test_drv_04_a_limited_claim_carries_the_rows_creation_time_to_the_microsecond(harness, lapsed):
    """The limited claim's two statements send the creation time as the plain claim does."""
    ids = {jobs.per_account.enqueue(account=a, n=1).id for a in ("a", "b")}
    stored = {r.id: r.created_at for r in harness.driver.reads().list_jobs() if r.id in ids}
    claimed = claim(harness.driver, plan(), lapsed=lapsed)
    assert {j.id: j.created_at for j in claimed} == stored
