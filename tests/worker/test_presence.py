"""Worker presence and the crash verdict, on both drivers (issue 12 item 2).

A lapsed lease counts towards MAX_LEASE_EXPIRIES only when its holder is really gone: it has no
presence row, or its presence lapsed while another worker kept beating (the database was
reachable). An outage silences every worker at once; its lapses are judged later, by whether the
holder came back.
"""

from __future__ import annotations

import time

import pytest

from django_xjobs.drivers.contract import Complete, Presence
from tests import jobs

VIS = 6.0


def beat(driver, worker, *, pid=100, in_flight=0, ttl=VIS):
    driver.renew_presence(Presence(worker, "host-a", pid, ("default",), in_flight), ttl)


def claim(driver, worker):
    return driver.claim(queues=["default"], limit=1, visibility_timeout=VIS, worker_id=worker)


def lapse(harness, *beating):
    """The lease runs out; ``beating`` workers renew their presence every 2 s meanwhile."""
    for _ in range(4):
        harness.advance(2)
        for worker in beating:
            beat(harness.driver, worker)


def by_id(driver):
    return {w.id: w for w in driver.workers()}


def test_a_beat_upserts_one_row_per_worker_and_a_clean_stop_removes_it(harness):
    beat(harness.driver, "w1", in_flight=2)
    beat(harness.driver, "w2")
    beat(harness.driver, "w1", in_flight=3)
    rows = by_id(harness.driver)
    assert sorted(rows) == ["w1", "w2"]
    w1 = rows["w1"]
    assert (w1.host, w1.pid, w1.queues, w1.in_flight, w1.alive) == (
        "host-a",
        100,
        ("default",),
        3,
        True,
    )
    assert w1.started_at <= w1.last_seen < w1.expires_at
    harness.driver.release_presence("w1")
    assert sorted(by_id(harness.driver)) == ["w2"]


def test_a_worker_without_a_beat_for_its_ttl_is_listed_as_lapsed(harness):
    beat(harness.driver, "w1")
    harness.advance(VIS + 1)
    lapsed = by_id(harness.driver)["w1"]
    assert lapsed.alive is False
    started = lapsed.started_at
    beat(harness.driver, "w1")
    again = by_id(harness.driver)["w1"]
    assert again.alive and again.started_at == started  # the same process came back


def test_a_new_process_under_the_same_id_restarts_the_row(harness):
    beat(harness.driver, "w1", pid=100)
    harness.advance(3)
    beat(harness.driver, "w1", pid=200)
    row = by_id(harness.driver)["w1"]
    assert row.pid == 200 and row.started_at == row.last_seen


def test_a_lapse_without_a_presence_row_counts_as_a_crash(harness):
    job_id = jobs.ok.enqueue(n=1).id
    claim(harness.driver, "gone")  # never beat: an old worker, or one that already left
    harness.advance(VIS + 1)
    [again] = claim(harness.driver, "w2")
    assert again.lease_expiries == 1
    assert harness.row(job_id).lapsed_holder is None
    assert [e.outcome for e in harness.row(job_id).errors] == ["crashed"]


def test_a_holder_that_died_while_another_worker_beat_counts_as_a_crash(harness):
    job_id = jobs.ok.enqueue(n=1).id
    beat(harness.driver, "witness")
    beat(harness.driver, "dead")
    claim(harness.driver, "dead")
    lapse(harness, "witness")  # the witness kept beating; the holder went silent
    [again] = claim(harness.driver, "witness")
    assert again.lease_expiries == 1
    assert harness.row(job_id).lapsed_holder is None


def test_an_outage_that_silenced_every_worker_is_not_a_crash(harness):
    job_id = jobs.ok.enqueue(n=1).id
    beat(harness.driver, "a")
    beat(harness.driver, "b")
    claim(harness.driver, "a")
    lapse(harness)  # nobody could reach the database
    beat(harness.driver, "b")  # b is back first: its streak starts after a was last seen
    [again] = claim(harness.driver, "b")
    assert again.lease_expiries == 0
    assert harness.row(job_id).lapsed_holder == "a"  # judged at the next lapse
    # what the operator reads agrees: the attempt lapsed, it did not crash
    [entry] = harness.row(job_id).errors
    assert (entry.attempt, entry.outcome) == (1, "lapsed") and "not counted" in entry.message

    beat(harness.driver, "a")  # a was alive all along
    lapse(harness, "a", "b")
    [third] = claim(harness.driver, "a")
    # a is alive: its old lapse was no crash; b is alive and its lapse pending in turn
    assert third.lease_expiries == 0
    assert harness.row(job_id).lapsed_holder == "b"


def test_a_pending_holder_whose_presence_lapsed_is_counted_at_the_next_lapse(harness):
    """A single worker killed and restarted under a new id: no one witnessed the death, so it is
    pending; once the holder's presence has lapsed the next lapse counts it (the poison bound
    stays, one lapse late)."""
    job_id = jobs.ok.enqueue(n=1).id
    beat(harness.driver, "first")
    claim(harness.driver, "first")
    lapse(harness)
    beat(harness.driver, "second")
    [again] = claim(harness.driver, "second")
    assert again.lease_expiries == 0
    lapse(harness)
    beat(harness.driver, "third")
    [third] = claim(harness.driver, "third")
    assert third.lease_expiries == 1  # "first" is gone; "second" is pending now
    assert harness.row(job_id).lapsed_holder == "second"


@pytest.mark.parametrize("settle", ["ack", "retry"])
def test_a_settle_clears_a_pending_holder(harness, settle):
    from django_xjobs.drivers.contract import RetryAt

    job_id = jobs.ok.enqueue(n=1).id
    beat(harness.driver, "a")
    claim(harness.driver, "a")
    lapse(harness)
    beat(harness.driver, "b")
    [held] = claim(harness.driver, "b")
    assert harness.row(job_id).lapsed_holder == "a"
    if settle == "ack":
        assert harness.driver.ack([Complete(held.id, held.lease_token)]) == {held.id}
    else:
        assert harness.driver.retry(RetryAt(held.id, held.lease_token, delay=0))
    assert harness.row(job_id).lapsed_holder is None


def test_a_renewal_queued_before_a_clean_stop_does_not_bring_the_row_back(harness):
    from django_xjobs.worker.presence import WorkerPresence

    presence = WorkerPresence(
        harness.driver, worker_id="w1", queues=("default",), ttl=VIS, in_flight=lambda: 0
    )
    presence.renew()
    assert sorted(by_id(harness.driver)) == ["w1"]
    presence.release()
    presence.renew()  # the heartbeat's pool ran it late
    assert harness.driver.workers() == []


def test_a_worker_that_has_not_beaten_lately_cannot_vouch_for_a_death(harness):
    """b's streak covers a's last beat, but b too has been silent past half a lease since: the
    database may have been unreachable for both, so the lapse stays pending."""
    job_id = jobs.ok.enqueue(n=1).id
    beat(harness.driver, "a")
    beat(harness.driver, "b")
    claim(harness.driver, "a")
    lapse(harness)
    [again] = claim(harness.driver, "c")  # c never beat: it cannot vouch either
    assert again.lease_expiries == 0
    assert harness.row(job_id).lapsed_holder == "a"


def test_the_heartbeat_renews_presence_once_per_tick_however_many_runs():
    from django_xjobs.worker.heartbeat import Heartbeat
    from django_xjobs.worker.presence import WorkerPresence
    from tests.worker.test_heartbeat import make_run

    class Counting:
        leases = None

        def __init__(self):
            self.presence_calls = self.lease_calls = 0

        def renew_presence(self, presence, ttl):
            self.presence_calls += 1

        def heartbeat(self, job_id, lease_token, visibility_timeout):
            self.lease_calls += 1
            return True

    driver = Counting()
    presence = WorkerPresence(
        driver, worker_id="w1", queues=("default",), ttl=VIS, in_flight=lambda: 50
    )
    runs = [make_run(time.monotonic) for _ in range(5)]
    beat_ = Heartbeat(
        driver,
        lambda: runs,
        interval=VIS / 3,
        visibility_timeout=VIS,
        worker_id="w1",
        database=None,
        submit=lambda call, arg: call(arg),
        presence=presence,
    )
    for _ in range(3):
        beat_.beat()
    assert (driver.presence_calls, driver.lease_calls) == (3, 15)
