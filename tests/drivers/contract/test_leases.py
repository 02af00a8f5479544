"""The driver contract, leases: a job's lease renewed by its holder only (SPEC LEASE-02), and
the fleet slot store (SPEC SLOT-03/06, SE-08, DRV-04 l/n). Every case runs on the memory driver
AND the PostgreSQL driver, through the ``harness`` fixture and the ``slots`` fixture, asserting
the same answers."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import connection, connections

from django_xjobs.clock import FrozenClock
from django_xjobs.drivers.contract import Complete
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.drivers.postgres import PostgresDriver
from django_xjobs.errors import InvariantError
from tests import jobs
from tests.drivers.contract.support import claim

KEY = "job:tests.jobs.ok"  # DRV-04 (n): the caller builds `job:<name>`; the store takes any text
OTHER = "job:tests.jobs.other"
TTL = 30.0


class Slots:
    """One driver's lease store plus the means to move its time: stored expiries are shifted
    into the past, the same for both drivers, so no test waits for a slot to lapse."""

    def __init__(self, driver) -> None:
        self.driver = driver
        self.store = driver.limits()
        #: the memory driver's slot rows, which its test support moves in time
        self.memory = driver._lease_store if isinstance(driver, MemoryDriver) else None

    def advance(self, seconds: float) -> None:
        if self.memory is not None:
            self.memory.shift(seconds)
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE x_job_leases SET expires_at = expires_at - %(d)s",
                {"d": timedelta(seconds=seconds)},
            )

    def rows(self, key: str = KEY) -> dict[int, str]:
        """slot -> holder of every stored row of ``key``, live or lapsed."""
        if self.memory is not None:
            return {s: row.holder for (k, s), row in self.memory._slots.items() if k == key}
        with connection.cursor() as cursor:
            cursor.execute("SELECT slot, holder FROM x_job_leases WHERE lease_key = %s", [key])
            return dict(cursor.fetchall())


def _driver(kind: str):
    return MemoryDriver() if kind == "memory" else PostgresDriver("default")


@pytest.fixture(params=["memory", "postgres"])
def slots(request, db) -> Iterator[Slots]:
    """Each case on both drivers, inside the test's transaction."""
    yield Slots(_driver(request.param))


@pytest.fixture(params=["memory", "postgres"])
def live_slots(request, transactional_db) -> Iterator[Slots]:
    """Both drivers with committed rows, for threads that use their own connections."""
    yield Slots(_driver(request.param))


# --- SLOT-03: the lowest free slot ----------------------------------------------------------


def test_slot_03_grants_the_lowest_free_slot_then_none(slots):
    s = slots.store
    assert [s.acquire_slot(KEY, 3, TTL, f"w{i}:j{i}") for i in range(4)] == [0, 1, 2, None]
    assert slots.rows() == {0: "w0:j0", 1: "w1:j1", 2: "w2:j2"}
    assert s.held_slots(KEY) == 3


def test_slot_03_a_released_gap_is_refilled_lowest_first(slots):
    s = slots.store
    for i in range(3):
        s.acquire_slot(KEY, 3, TTL, f"h{i}")
    assert s.release_slot(KEY, 1, "h1") and s.release_slot(KEY, 0, "h0")
    assert s.acquire_slot(KEY, 3, TTL, "n1") == 0
    assert s.acquire_slot(KEY, 3, TTL, "n2") == 1
    assert s.acquire_slot(KEY, 3, TTL, "n3") is None


def test_slot_03_concurrency_1_sheds_the_second_holder(slots):
    s = slots.store
    assert s.acquire_slot(KEY, 1, TTL, "worker-a:job-1") == 0
    assert s.acquire_slot(KEY, 1, TTL, "worker-b:job-2") is None
    assert slots.rows() == {0: "worker-a:job-1"}


def test_slot_03_the_same_holder_gets_no_second_grant_of_a_live_slot(slots):
    s = slots.store
    assert s.acquire_slot(KEY, 1, TTL, "w:j") == 0
    assert s.acquire_slot(KEY, 1, TTL, "w:j") is None  # acquire is not a renew


def test_slot_03_a_raised_limit_grants_the_next_slot_a_lowered_one_none(slots):
    s = slots.store
    assert s.acquire_slot(KEY, 1, TTL, "a") == 0
    assert s.acquire_slot(KEY, 2, TTL, "b") == 1
    assert s.acquire_slot(KEY, 1, TTL, "c") is None
    assert s.held_slots(KEY) == 2


def test_drv_04_n_keys_are_independent_namespaces(slots):
    s = slots.store
    assert s.acquire_slot(KEY, 1, TTL, "a") == 0
    assert s.acquire_slot(OTHER, 1, TTL, "b") == 0
    assert s.acquire_slot("job:tests.jobs.ok ", 1, TTL, "c") == 0  # exact text, nothing normalised
    assert (s.held_slots(KEY), s.held_slots(OTHER)) == (1, 1)
    assert not s.release_slot(OTHER, 0, "a")  # a holder of one key owns nothing under another


# --- SLOT-06: limit <= 0, held, expiry --------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -1, -100])
def test_slot_06_a_limit_at_or_below_zero_grants_nothing(slots, limit):
    assert slots.store.acquire_slot(KEY, limit, TTL, "w:j") is None
    assert slots.rows() == {} and slots.store.held_slots(KEY) == 0


def test_slot_06_held_counts_live_rows_only(slots):
    s = slots.store
    assert s.held_slots(KEY) == 0
    s.acquire_slot(KEY, 3, 10, "short")
    s.acquire_slot(KEY, 3, 60, "long")
    assert s.held_slots(KEY) == 2
    slots.advance(10)
    assert s.held_slots(KEY) == 1  # expires_at == now is no longer live
    assert slots.rows() == {0: "short", 1: "long"}  # the lapsed row stays until taken over


def test_slot_06_an_expired_slot_is_acquirable_by_anyone(slots):
    s = slots.store
    assert s.acquire_slot(KEY, 2, TTL, "a") == 0
    assert s.acquire_slot(KEY, 2, TTL, "b") == 1
    assert s.acquire_slot(KEY, 2, TTL, "c") is None
    slots.advance(TTL + 1)
    assert s.acquire_slot(KEY, 2, TTL, "c") == 0  # the lowest lapsed slot is taken over
    assert s.acquire_slot(KEY, 2, TTL, "d") == 1
    assert slots.rows() == {0: "c", 1: "d"}
    assert s.held_slots(KEY) == 2


def test_slot_06_a_slot_at_its_exact_expiry_is_free(slots):
    s = slots.store
    s.acquire_slot(KEY, 1, TTL, "a")
    slots.advance(TTL)  # expires_at == now: not live (the row is live only while > now)
    assert s.acquire_slot(KEY, 1, TTL, "b") == 0
    assert slots.rows() == {0: "b"}


def test_slot_06_a_slot_just_before_its_expiry_is_live(slots):
    s = slots.store
    s.acquire_slot(KEY, 1, TTL, "a")
    slots.advance(TTL - 0.5)
    assert s.acquire_slot(KEY, 1, TTL, "b") is None
    assert s.renew_slot(KEY, 0, TTL, "a")


# --- SLOT-06, SE-08, DRV-04 (l): renew fenced on holder and expiry ------------------------


def test_drv_04_l_renew_extends_only_for_the_holder(slots):
    s = slots.store
    s.acquire_slot(KEY, 1, 10, "a")
    assert not s.renew_slot(KEY, 0, 60, "b")
    assert s.renew_slot(KEY, 0, 60, "a")
    slots.advance(30)  # past the first ttl, within the renewed one
    assert s.held_slots(KEY) == 1
    assert s.acquire_slot(KEY, 1, TTL, "b") is None
    assert s.renew_slot(KEY, 0, 60, "a")


def test_drv_04_l_se_08_renew_never_revives_a_lapsed_slot(slots):
    s = slots.store
    s.acquire_slot(KEY, 1, TTL, "a")
    slots.advance(TTL + 1)
    assert not s.renew_slot(KEY, 0, TTL, "a")  # nobody took it over, still refused
    assert s.held_slots(KEY) == 0
    assert s.acquire_slot(KEY, 1, TTL, "b") == 0


def test_drv_04_l_se_08_renew_at_the_exact_expiry_is_refused(slots):
    s = slots.store
    s.acquire_slot(KEY, 1, TTL, "a")
    slots.advance(TTL)
    assert not s.renew_slot(KEY, 0, TTL, "a")
    assert s.held_slots(KEY) == 0


def test_drv_04_l_the_old_holder_of_a_taken_over_slot_cannot_renew_or_release_it(slots):
    s = slots.store
    s.acquire_slot(KEY, 1, TTL, "old")
    slots.advance(TTL + 1)
    assert s.acquire_slot(KEY, 1, TTL, "new") == 0
    assert not s.renew_slot(KEY, 0, TTL, "old")
    assert not s.release_slot(KEY, 0, "old")
    assert slots.rows() == {0: "new"}
    assert s.renew_slot(KEY, 0, TTL, "new")


def test_slot_06_renew_of_a_slot_never_granted_is_refused(slots):
    s = slots.store
    assert not s.renew_slot(KEY, 0, TTL, "a")
    s.acquire_slot(KEY, 2, TTL, "a")
    assert not s.renew_slot(KEY, 1, TTL, "a")  # the holder's key, a slot it does not hold
    assert not s.renew_slot(OTHER, 0, TTL, "a")
    assert slots.rows() == {0: "a"}


# --- SLOT-06: release only the own row ------------------------------------------------------


def test_slot_06_release_deletes_only_the_holders_own_row(slots):
    s = slots.store
    s.acquire_slot(KEY, 2, TTL, "a")
    s.acquire_slot(KEY, 2, TTL, "b")
    assert not s.release_slot(KEY, 0, "b")
    assert not s.release_slot(KEY, 2, "a")  # no such row
    assert slots.rows() == {0: "a", 1: "b"}
    assert s.release_slot(KEY, 0, "a")
    assert slots.rows() == {1: "b"}
    assert not s.release_slot(KEY, 0, "a")  # a second release frees nothing more
    assert s.held_slots(KEY) == 1


def test_slot_06_a_holder_may_release_its_own_lapsed_row(slots):
    s = slots.store
    s.acquire_slot(KEY, 1, TTL, "a")
    slots.advance(TTL + 1)
    assert s.release_slot(KEY, 0, "a")
    assert slots.rows() == {}


# --- bad arguments: both drivers refuse alike -----------------------------------------------


@pytest.mark.parametrize("ttl", [0, -1, 0.0, float("nan"), float("inf"), True, "30"])
def test_a_ttl_that_is_not_a_positive_number_is_refused(slots, ttl):
    s = slots.store
    with pytest.raises(InvariantError):
        s.acquire_slot(KEY, 1, ttl, "a")
    assert slots.rows() == {}
    s.acquire_slot(KEY, 1, TTL, "a")
    with pytest.raises(InvariantError):
        s.renew_slot(KEY, 0, ttl, "a")
    assert s.held_slots(KEY) == 1


@pytest.mark.parametrize("limit", [1.5, "3", None, True])
def test_a_limit_that_is_not_an_integer_is_refused(slots, limit):
    with pytest.raises(InvariantError):
        slots.store.acquire_slot(KEY, limit, TTL, "a")
    assert slots.rows() == {}


# --- the memory store reads the driver's clock ------------------------------------------------


def test_slot_06_memory_times_come_from_the_drivers_clock():
    clock = FrozenClock()
    driver = MemoryDriver(clock=clock)
    s = driver.limits()
    assert s.acquire_slot(KEY, 1, TTL, "a") == 0
    assert driver._lease_store._slots[(KEY, 0)].expires_at == clock.now() + timedelta(seconds=TTL)
    clock.advance(TTL - 1)
    assert s.renew_slot(KEY, 0, TTL, "a")
    clock.advance(TTL)  # exactly at the renewed expiry
    assert not s.renew_slot(KEY, 0, TTL, "a")
    assert s.acquire_slot(KEY, 1, TTL, "b") == 0


def test_slot_06_postgres_times_come_from_the_database_clock(db):
    s = PostgresDriver("default").limits()
    assert s.acquire_slot(KEY, 1, 90, "a") == 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT expires_at - now() FROM x_job_leases WHERE lease_key = %s", [KEY])
        [(remaining,)] = cursor.fetchall()
    assert remaining == timedelta(seconds=90)  # now() is fixed inside the test's transaction


# --- SLOT-03 under races: threads with their own connections -------------------------------


def _race(store, n: int, attempt) -> list:
    """Run ``attempt(store, i)`` on ``n`` threads released together; each closes its own
    database connection when done."""
    barrier = threading.Barrier(n)
    results: list = [None] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[i] = attempt(store, i)
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors
    return results


@pytest.mark.parametrize("round_", range(3))
def test_slot_03_racing_workers_get_exactly_limit_distinct_slots(live_slots, round_):
    n = 12
    results = _race(live_slots.store, n, lambda s, i: s.acquire_slot(KEY, 3, TTL, f"w{i}:j"))
    granted = [slot for slot in results if slot is not None]
    assert sorted(granted) == [0, 1, 2]
    winners = {slot: f"w{i}:j" for i, slot in enumerate(results) if slot is not None}
    assert live_slots.rows() == winners
    assert live_slots.store.held_slots(KEY) == 3


@pytest.mark.parametrize("round_", range(3))
def test_slot_03_racing_workers_for_the_last_slot_one_wins(live_slots, round_):
    s = live_slots.store
    assert s.acquire_slot(KEY, 3, TTL, "early0") == 0
    assert s.acquire_slot(KEY, 3, TTL, "early1") == 1
    results = _race(s, 10, lambda s, i: s.acquire_slot(KEY, 3, TTL, f"w{i}:j"))
    assert [r for r in results if r is not None] == [2]
    assert s.held_slots(KEY) == 3


@pytest.mark.parametrize("round_", range(3))
def test_slot_06_racing_takeovers_of_expired_slots_grant_each_once(live_slots, round_):
    s = live_slots.store
    for i in range(3):
        s.acquire_slot(KEY, 3, TTL, f"old{i}")
    live_slots.advance(TTL + 1)
    results = _race(s, 12, lambda s, i: s.acquire_slot(KEY, 3, TTL, f"w{i}:j"))
    granted = [slot for slot in results if slot is not None]
    assert sorted(granted) == [0, 1, 2]
    winners = {slot: f"w{i}:j" for i, slot in enumerate(results) if slot is not None}
    assert live_slots.rows() == winners
    assert not any(s.renew_slot(KEY, slot, TTL, f"old{slot}") for slot in range(3))


def test_slot_03_racing_renew_and_takeover_of_one_slot_never_both_hold(live_slots):
    """SE-08 under a race: the lapsed holder's renew and a newcomer's acquire of the same
    slot — the newcomer wins and the renew is refused, whichever runs first."""
    s = live_slots.store
    for _ in range(5):
        s.acquire_slot(KEY, 1, TTL, "old")
        live_slots.advance(TTL + 1)

        def attempt(store, i):
            if i == 0:
                return store.renew_slot(KEY, 0, TTL, "old")
            return store.acquire_slot(KEY, 1, TTL, "new")

        renewed, acquired = _race(s, 2, attempt)
        assert (renewed, acquired) == (False, 0)
        assert live_slots.rows() == {0: "new"}
        assert s.release_slot(KEY, 0, "new")


# --- (f) heartbeat predicate ----------------------------------------------------------------


def test_lease_02_heartbeat_renews_only_the_holders_lease(harness):
    jobs.ok.enqueue(n=1)
    [job] = claim(harness.driver, vis=5)
    harness.advance(4)
    assert harness.driver.runs().heartbeat(job.id, job.lease_token, 5) is True
    harness.advance(4)
    assert claim(harness.driver, worker="w2") == []  # renewed: 5 s from the heartbeat
    assert harness.driver.runs().heartbeat(job.id, uuid.uuid4(), 5) is False
    assert harness.driver.runs().heartbeat(uuid.uuid4(), job.lease_token, 5) is False


def test_lease_02_heartbeat_after_settle_or_reclaim_is_false(harness):
    jobs.ok.enqueue(n=1)
    jobs.ok.enqueue(n=2)
    a, b = claim(harness.driver, vis=5)
    harness.driver.runs().complete([Complete(a.id, a.lease_token)])
    assert harness.driver.runs().heartbeat(a.id, a.lease_token, 5) is False
    harness.advance(5)
    [b2] = claim(harness.driver, worker="w2")
    assert b2.id == b.id
    assert harness.driver.runs().heartbeat(b.id, b.lease_token, 5) is False
    assert harness.driver.runs().heartbeat(b2.id, b2.lease_token, 5) is True
