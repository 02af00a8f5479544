"""The per-process limiter (SPEC LIMIT-01..06, SE-25) and its setting, XJOBS["LIMITS"].

Time is a FrozenClock moved by hand; nothing here waits or needs the database.
"""

from __future__ import annotations

import math
import threading
from datetime import timedelta

import pytest
from django.test import override_settings

from django_xjobs.clock import FrozenClock
from django_xjobs.conf.limits import DEFAULT_MAX_TENANTS, Limits, RateLimit, parse_limits
from django_xjobs.errors import InvariantError
from django_xjobs.limits.worker import DEFAULT_TENANT, Limiter
from django_xjobs.management import checks

BASE = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "off"}


def limiter(clock: FrozenClock | None = None, **raw) -> Limiter:
    return Limiter(parse_limits(raw), clock=clock or FrozenClock())


# --- parse_limits ---------------------------------------------------------------------------


def test_empty_limits_mean_no_caps():
    limits = parse_limits({})
    assert limits == Limits()
    assert (limits.global_, limits.per_queue, limits.per_tenant, limits.rate_per_tenant) == (
        None,
        None,
        None,
        None,
    )
    assert limits.max_tenants == DEFAULT_MAX_TENANTS == 20_000


def test_every_key_is_read():
    limits = parse_limits(
        {
            "global": 32,
            "per_queue": {"emails": 8},
            "per_tenant": 4,
            "rate_per_tenant": {"limit": 100, "window": "1m"},
            "max_tenants": 500,
        }
    )
    assert limits.global_ == 32
    assert limits.queue_cap("emails") == 8
    assert limits.queue_cap("reports") is None
    assert limits.per_tenant == 4
    assert limits.rate_per_tenant == RateLimit(limit=100, window=60.0)
    assert limits.max_tenants == 500


def test_per_queue_int_caps_every_queue():
    limits = parse_limits({"per_queue": 3})
    assert limits.queue_cap("emails") == limits.queue_cap("anything") == 3


@pytest.mark.parametrize(
    ("window", "seconds"), [(30, 30.0), (0.5, 0.5), ("1m", 60.0), (timedelta(hours=1), 3600.0)]
)
def test_rate_window_is_a_duration_in_seconds(window, seconds):
    """DESIGN §7: a number is seconds; a string or timedelta is read the usual way."""
    rate = parse_limits({"rate_per_tenant": {"limit": 1, "window": window}}).rate_per_tenant
    assert rate == RateLimit(limit=1, window=seconds)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        (None, "LIMITS"),
        ([("global", 1)], "LIMITS"),
        ({"globl": 1}, "globl"),
        ({"window_ms": 1000}, "window_ms"),
        ({"global": 0}, "global"),
        ({"global": -1}, "global"),
        ({"global": 1.5}, "global"),
        ({"global": 2.0}, "global"),
        ({"global": True}, "global"),
        ({"global": "3"}, "global"),
        ({"global": None}, "global"),
        ({"per_queue": 0}, "per_queue"),
        ({"per_queue": "emails"}, "per_queue"),
        ({"per_queue": None}, "per_queue"),
        ({"per_queue": {"emails": 0}}, "per_queue['emails']"),
        ({"per_queue": {"emails": False}}, "per_queue['emails']"),
        ({"per_queue": {"": 1}}, "per_queue"),
        ({"per_queue": {3: 1}}, "per_queue"),
        ({"per_tenant": 0}, "per_tenant"),
        ({"per_tenant": 1.0}, "per_tenant"),
        ({"rate_per_tenant": 10}, "rate_per_tenant"),
        ({"rate_per_tenant": {"limit": 10}}, "rate_per_tenant"),
        ({"rate_per_tenant": {"window": "1m"}}, "rate_per_tenant"),
        ({"rate_per_tenant": {"limit": 10, "window_ms": 1000}}, "rate_per_tenant"),
        ({"rate_per_tenant": {"limit": 0, "window": "1m"}}, "rate_per_tenant['limit']"),
        ({"rate_per_tenant": {"limit": 10, "window": 0}}, "rate_per_tenant['window']"),
        ({"rate_per_tenant": {"limit": 10, "window": -5}}, "rate_per_tenant['window']"),
        ({"rate_per_tenant": {"limit": 10, "window": "soon"}}, "rate_per_tenant['window']"),
        ({"rate_per_tenant": {"limit": 10, "window": math.inf}}, "rate_per_tenant['window']"),
        ({"max_tenants": math.inf}, "max_tenants"),
        ({"max_tenants": math.nan}, "max_tenants"),
        ({"max_tenants": 0}, "max_tenants"),
        ({"max_tenants": 100.0}, "max_tenants"),
    ],
)
def test_bad_shapes_are_refused_naming_the_key(raw, named):
    """LIMIT-06 and DESIGN §7 Q-06: every bad limit is X_INVARIANT, naming the key, with a fix."""
    with pytest.raises(InvariantError) as caught:
        parse_limits(raw)
    assert caught.value.code == "X_INVARIANT"
    assert named in caught.value.message
    assert caught.value.hint


def test_limit_06_non_finite_max_tenants_says_finite():
    with pytest.raises(InvariantError, match="finite"):
        parse_limits({"max_tenants": float("inf")})


def test_bad_limits_fail_the_system_check():
    """Q-06: a bad LIMITS is a system-check error, so ``manage.py check`` refuses it early."""
    with override_settings(XJOBS={**BASE, "LIMITS": {"global": 0}}):
        errors = checks.check_settings()
    assert len(errors) == 1
    assert errors[0].id == "django_xjobs.E001"
    assert "LIMITS" in errors[0].msg
    assert "global" in errors[0].msg
    assert errors[0].hint


def test_good_limits_pass_the_system_check():
    with override_settings(XJOBS={**BASE, "LIMITS": {"global": 4, "per_queue": {"other": 2}}}):
        assert checks.check_settings() == []


# --- LIMIT-01: the caps and their order -----------------------------------------------------


def test_limit_01_no_caps_grants_and_counts():
    limits = limiter()
    leases = [limits.acquire("emails", None) for _ in range(100)]
    assert all(leases)
    assert limits.in_flight() == 100
    assert limits.last_reason is None


def test_limit_01_global_cap():
    limits = limiter(**{"global": 2})
    assert limits.acquire("a", "t1")
    assert limits.acquire("b", "t2")
    assert limits.acquire("c", "t3") is None
    assert limits.last_reason == "global"
    assert limits.blocked_by("c", "t3") == "global"


def test_limit_01_per_queue_cap_as_one_int():
    limits = limiter(per_queue=1)
    assert limits.acquire("a", None)
    assert limits.acquire("a", None) is None
    assert limits.blocked_by("a", None) == "per-queue"
    assert limits.acquire("b", None), "every queue has its own cap"


def test_limit_01_per_queue_cap_by_name_leaves_other_queues_uncapped():
    limits = limiter(per_queue={"a": 1})
    assert limits.acquire("a", None)
    assert limits.acquire("a", None) is None
    assert all(limits.acquire("b", None) for _ in range(10))


def test_limit_01_per_tenant_cap_spans_queues():
    limits = limiter(per_tenant=2)
    assert limits.acquire("a", "acme")
    assert limits.acquire("b", "acme")
    assert limits.acquire("c", "acme") is None
    assert limits.blocked_by("c", "acme") == "per-tenant"
    assert limits.acquire("c", "other")


def test_limit_01_absent_tenant_is_one_bucket_a_tenant_named_global_is_another():
    """SPEC LIMIT-01 (runs without a tenant share one bucket) and Q-11: a tenant literally
    named "global" no longer falls into it."""
    limits = limiter(per_tenant=1)
    assert limits.acquire("a", None)
    assert limits.acquire("a", "") is None, "an empty tenant_id is absent too"
    assert limits.blocked_by("a", None) == "per-tenant"
    assert limits.in_flight("a", DEFAULT_TENANT) == 1
    assert limits.acquire("a", "global"), "a tenant named global has a bucket of its own"
    assert limits.in_flight("a", "global") == 1
    assert limits.acquire("a", "global") is None
    assert limits.blocked_by("a", "global") == "per-tenant"


@pytest.mark.parametrize(
    ("full", "reason"),
    [
        ({"global"}, "global"),
        ({"per_queue"}, "per-queue"),
        ({"per_tenant"}, "per-tenant"),
        ({"rate_per_tenant"}, "rate"),
        ({"global", "per_queue", "per_tenant", "rate_per_tenant"}, "global"),
        ({"per_queue", "per_tenant", "rate_per_tenant"}, "per-queue"),
        ({"per_tenant", "rate_per_tenant"}, "per-tenant"),
    ],
)
def test_limit_01_checked_in_order_global_queue_tenant_rate(full, reason):
    """With one run in flight, exactly the caps in ``full`` are at 1 (full); the others are
    roomy. The reason is the first full cap in the order LIMIT-01 checks them."""
    raw = {
        "global": 1 if "global" in full else 100,
        "per_queue": 1 if "per_queue" in full else 100,
        "per_tenant": 1 if "per_tenant" in full else 100,
        "rate_per_tenant": {"limit": 1 if "rate_per_tenant" in full else 100, "window": 60},
    }
    limits = limiter(**raw)
    assert limits.acquire("q", "t")
    assert limits.acquire("q", "t") is None
    assert limits.last_reason == reason


def test_limit_01_last_reason_is_the_most_recent_refusal():
    limits = limiter(per_queue={"a": 1}, per_tenant=1)
    limits.acquire("a", "x")
    limits.acquire("a", "y")
    assert limits.last_reason == "per-queue"
    limits.acquire("b", "x")
    assert limits.last_reason == "per-tenant"
    assert limits.acquire("b", "z"), "a grant does not clear it"
    assert limits.last_reason == "per-tenant"


# --- LIMIT-02: release is idempotent --------------------------------------------------------


def test_limit_02_releasing_twice_frees_one_slot():
    limits = limiter(**{"global": 2})
    first = limits.acquire("q", None)
    second = limits.acquire("q", None)
    assert first and second
    first.release()
    first.release()
    assert first.released
    assert limits.in_flight() == 1
    assert limits.acquire("q", None)
    assert limits.acquire("q", None) is None, "the double release did not free a second slot"
    second.release()
    assert limits.in_flight() == 1


def test_limit_02_release_frees_every_counter():
    limits = limiter(**{"global": 1})
    lease = limits.acquire("q", "acme")
    assert lease
    assert limits.acquire("q", "acme") is None
    lease.release()
    assert limits.in_flight() == limits.in_flight("q") == limits.in_flight("q", "acme") == 0
    assert limits.acquire("q", "acme")


# --- LIMIT-03: in_flight --------------------------------------------------------------------


def test_limit_03_in_flight_globally_by_queue_and_by_queue_and_tenant():
    limits = limiter()
    limits.acquire("a", "x")
    limits.acquire("a", "x")
    limits.acquire("a", "y")
    limits.acquire("b", "x")
    limits.acquire("b", None)
    assert limits.in_flight() == 5
    assert limits.in_flight("a") == 3
    assert limits.in_flight("b") == 2
    assert limits.in_flight("c") == 0
    assert limits.in_flight("a", "x") == 2
    assert limits.in_flight("a", "y") == 1
    assert limits.in_flight("b", "x") == 1
    assert limits.in_flight("b", DEFAULT_TENANT) == 1
    assert limits.in_flight("b", "global") == 0
    assert limits.in_flight("b", "y") == 0
    assert limits.in_flight(tenant="x") == 3, "a tenant alone counts across queues"


# --- LIMIT-04: the rate window --------------------------------------------------------------


def test_limit_04_rate_blocks_at_limit_and_recovers_when_the_window_passes():
    clock = FrozenClock()
    limits = limiter(clock, rate_per_tenant={"limit": 2, "window": "1m"})
    first = limits.acquire("q", "acme")
    clock.advance(10)
    second = limits.acquire("q", "acme")
    assert first and second
    first.release()
    second.release()
    assert limits.acquire("q", "acme") is None, "starts count, not runs in flight"
    assert limits.blocked_by("q", "acme") == "rate"
    assert limits.acquire("q", "other"), "the window is per tenant"
    clock.advance(49.999)
    assert limits.acquire("q", "acme") is None, "the first start is still inside the window"
    clock.advance(0.001)
    assert limits.acquire("q", "acme"), "a start exactly one window old no longer counts"
    assert limits.acquire("q", "acme") is None
    clock.advance(10)
    assert limits.acquire("q", "acme")


def test_limit_04_refusals_are_not_starts():
    clock = FrozenClock()
    limits = limiter(clock, rate_per_tenant={"limit": 1, "window": 10})
    assert limits.acquire("q", None)
    for _ in range(5):
        clock.advance(1)
        assert limits.acquire("q", None) is None
    clock.advance(5)
    assert limits.acquire("q", None)


def test_limit_04_a_run_refused_by_a_count_cap_uses_no_rate():
    limits = limiter(per_queue=1, rate_per_tenant={"limit": 2, "window": 60})
    assert limits.acquire("a", "acme")
    assert limits.acquire("a", "acme") is None
    assert limits.last_reason == "per-queue"
    assert limits.acquire("b", "acme"), "the refused start was not recorded"


# --- LIMIT-05: blocked_by -------------------------------------------------------------------


def test_limit_05_blocked_by_remembers_a_refusal_for_60_seconds():
    clock = FrozenClock()
    limits = limiter(clock, per_queue=1)
    assert limits.blocked_by("q", "acme") is None
    assert limits.acquire("q", "acme")
    assert limits.acquire("q", "acme") is None
    assert limits.blocked_by("q", "acme") == "per-queue"
    assert limits.blocked_by("q", "other") is None, "keyed by queue and tenant"
    assert limits.blocked_by("r", "acme") is None
    clock.advance(59.9)
    assert limits.blocked_by("q", "acme") == "per-queue"
    clock.advance(0.1)
    assert limits.blocked_by("q", "acme") is None


def test_limit_05_a_new_refusal_restarts_the_60_seconds():
    clock = FrozenClock()
    limits = limiter(clock, per_queue=1)
    limits.acquire("q", None)
    limits.acquire("q", None)
    clock.advance(50)
    limits.acquire("q", None)
    clock.advance(50)
    assert limits.blocked_by("q", None) == "per-queue"


# --- LIMIT-06 / SE-25: bounded memory -------------------------------------------------------


def test_limit_06_counters_at_zero_are_deleted():
    limits = limiter(per_tenant=5)
    leases = [limits.acquire(f"q{i % 3}", f"tenant-{i}") for i in range(50)]
    assert limits.footprint()["tenants"] == 50
    for lease in leases:
        assert lease
        lease.release()
    footprint = limits.footprint()
    assert (footprint["queues"], footprint["tenants"], footprint["queue_tenants"]) == (0, 0, 0)
    assert limits.in_flight() == 0


def test_limit_06_spent_windows_are_swept_at_most_once_per_60_seconds():
    clock = FrozenClock()
    limits = limiter(clock, rate_per_tenant={"limit": 5, "window": 10})
    for i in range(100):
        lease = limits.acquire("q", f"tenant-{i}")
        assert lease
        lease.release()
    assert limits.footprint()["rate_windows"] == 100
    clock.advance(30)
    limits.acquire("q", "late")
    assert limits.footprint()["rate_windows"] == 101, "spent, but the last sweep is < 60 s old"
    clock.advance(30)
    limits.acquire("q", "later")
    assert limits.footprint()["rate_windows"] == 1, "the sweep kept only the live window"


def test_limit_06_refusals_older_than_60_seconds_are_swept():
    clock = FrozenClock()
    limits = limiter(clock, per_tenant=1)
    for i in range(20):
        limits.acquire("q", f"tenant-{i}")
        limits.acquire("q", f"tenant-{i}")
    assert limits.footprint()["refusals"] == 20
    clock.advance(60)
    limits.acquire("q", "someone")
    assert limits.footprint()["refusals"] == 0


def test_limit_06_max_tenants_evicts_down_to_90_percent_least_throttled_first():
    clock = FrozenClock()
    limits = limiter(clock, rate_per_tenant={"limit": 3, "window": "1h"}, max_tenants=10)
    assert limits.acquire("q", "busy")
    assert limits.acquire("q", "busy")
    assert limits.acquire("q", "busy")
    assert limits.acquire("q", "busy") is None
    for i in range(9):
        clock.advance(1)
        assert limits.acquire("q", f"quiet-{i}")
    assert limits.footprint()["rate_windows"] == 10
    clock.advance(1)
    assert limits.acquire("q", "one-more")
    # 11 > 10: evicted down to 9, the quiet (one-start) tenants first, the oldest of them first.
    assert limits.footprint()["rate_windows"] == 9
    assert limits.acquire("q", "busy") is None, "the throttled tenant keeps its window"
    assert limits.blocked_by("q", "busy") == "rate"
    assert limits.acquire("q", "quiet-0"), "an evicted tenant starts a fresh window"


def test_limit_06_max_tenants_caps_the_refusal_map():
    limits = limiter(per_queue=1, max_tenants=10)
    assert limits.acquire("q", "holder")
    for i in range(25):
        assert limits.acquire("q", f"tenant-{i}") is None
        assert limits.footprint()["refusals"] <= 10
    assert limits.blocked_by("q", "tenant-24") == "per-queue", "the newest refusal is kept"
    assert limits.blocked_by("q", "tenant-0") is None, "the oldest was evicted"


def test_limit_06_a_tenant_flood_stays_bounded():
    """SE-25: a flood of distinct tenants never holds more than max_tenants entries per map."""
    clock = FrozenClock()
    limits = limiter(
        clock, per_tenant=1, rate_per_tenant={"limit": 1, "window": 60}, max_tenants=100
    )
    for i in range(5_000):
        lease = limits.acquire("q", f"tenant-{i}")
        assert lease
        assert limits.acquire("q", f"tenant-{i}") is None
        lease.release()
        footprint = limits.footprint()
        assert footprint["rate_windows"] <= 100
        assert footprint["refusals"] <= 100
    assert footprint["tenants"] == footprint["queue_tenants"] == 0


# --- threads --------------------------------------------------------------------------------


def test_claim_loop_and_settler_threads_keep_the_counts_exact():
    """The worker's claim loop acquires while its settler thread releases."""
    limits = limiter(**{"global": 8}, per_tenant=3)
    done = threading.Event()
    granted: list = []
    lock = threading.Lock()

    def claim(tenant: str) -> None:
        for _ in range(2_000):
            lease = limits.acquire("q", tenant)
            if lease:
                with lock:
                    granted.append(lease)

    def settle() -> None:
        while not done.is_set() or granted:
            with lock:
                lease = granted.pop() if granted else None
            if lease:
                lease.release()
                lease.release()

    settler = threading.Thread(target=settle)
    settler.start()
    claimers = [threading.Thread(target=claim, args=(f"t{i}",)) for i in range(4)]
    for thread in claimers:
        thread.start()
    for thread in claimers:
        thread.join()
    done.set()
    settler.join()
    assert limits.in_flight() == 0
    assert limits.footprint()["queues"] == limits.footprint()["tenants"] == 0
