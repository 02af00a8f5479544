"""Worker presence and the lapse verdict, on both drivers (issue 12 item 2, issue 39).

A lapsed run's holder is judged from its presence row when the run is taken again: present if
it renewed the row after the lease ran out, exited if it marked it stopped, else it died with
the run. None of these counts against the job (SPEC LEASE-16): a run that died with its worker
is only marked, to run alone next; a crash is counted when a run dies alone (LEASE-17).
"""

from __future__ import annotations

import time

import pytest

from django_xjobs.drivers.contract import Complete, DriverFeatures, Presence
from tests import jobs

VIS = 6.0


def beat(driver, worker, *, pid=100, in_flight=0, ttl=VIS):
    driver.runs().renew_presence(Presence(worker, "host-a", pid, ("default",), in_flight), ttl)


def claim(driver, worker):
    return driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=VIS, worker_id=worker
    )


def lapse(harness, *beating):
    """The lease runs out; ``beating`` workers renew their presence every 2 s meanwhile."""
    for _ in range(4):
        harness.advance(2)
        for worker in beating:
            beat(harness.driver, worker)


def by_id(driver):
    return {w.id: w for w in driver.reads().workers()}


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
    harness.driver.runs().release_presence("w1")
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


def test_lease_16_a_lapse_without_a_presence_row_marks_the_run_and_counts_nothing(harness):
    job_id = jobs.ok.enqueue(n=1).id
    claim(harness.driver, "gone")  # never beat: an old worker, or one that already left
    harness.advance(VIS + 1)
    [again] = claim(harness.driver, "w2")
    # its worker died with it: it runs alone next, and nothing is counted against it
    assert (again.lease_expiries, again.died_with, again.suspect) == (0, "gone", True)
    assert harness.row(job_id).lapsed_holder == "gone"
    [entry] = harness.row(job_id).errors
    assert (entry.attempt, entry.outcome) == (1, "lapsed") and "died" in entry.message


def test_lease_16_a_holder_that_died_while_another_beat_is_judged_at_once(harness):
    job_id = jobs.ok.enqueue(n=1).id
    beat(harness.driver, "witness")
    beat(harness.driver, "dead")
    claim(harness.driver, "dead")
    lapse(harness, "witness")  # the witness kept beating; the holder went silent
    [again] = claim(harness.driver, "witness")
    assert (again.lease_expiries, again.died_with) == (0, "dead")
    assert harness.row(job_id).lapsed_holder == "dead"


def test_lease_16_a_lone_worker_restarted_judges_its_dead_predecessor_itself(harness):
    """The verdict is the same whoever witnessed the death (issue 39 item 3): a lone worker
    killed and restarted under a new id judges its old run itself, once it has beaten through
    its predecessor's presence TTL (the database answered, and a live holder would have beaten
    too), then at each death the same way, never one lapse late."""
    job_id = jobs.ok.enqueue(n=1).id
    beat(harness.driver, "first")
    claim(harness.driver, "first")
    lapse(harness)  # first was killed: nobody beat, nobody saw it go
    beat(harness.driver, "second")
    assert claim(harness.driver, "second") == []  # too soon to tell a death from an outage
    lapse(harness, "second")
    [again] = claim(harness.driver, "second")
    assert (again.lease_expiries, again.died_with) == (0, "first")
    lapse(harness)  # second dies too
    beat(harness.driver, "third")
    lapse(harness, "third")
    [third] = claim(harness.driver, "third")
    assert (third.lease_expiries, third.died_with) == (0, "second")
    assert [e.outcome for e in harness.row(job_id).errors] == ["lapsed", "lapsed"]


def test_lease_16_20_after_an_outage_a_silent_holder_is_given_a_ttl_to_come_back(harness):
    """Every worker lost the database; once it answers, the first worker back does not take
    the other's lapsed run before that one could renew its presence (or hand the run back)."""
    job_id = jobs.ok.enqueue(n=1).id
    beat(harness.driver, "a")
    beat(harness.driver, "b")
    claim(harness.driver, "a")
    lapse(harness)  # the outage: nobody beat
    beat(harness.driver, "b")  # b is back first
    assert claim(harness.driver, "b") == []  # a may be alive: left to it
    beat(harness.driver, "a")  # it is: present after its lease ran out
    [again] = claim(harness.driver, "b")
    assert (again.id, again.died_with) == (job_id, None)


def test_lease_16_a_holder_present_after_its_lease_ran_out_is_no_death(harness):
    """An outage silences every worker; the holder renews its presence once the database is
    back, before another worker takes the run: the lapse marks nothing."""
    job_id = jobs.ok.enqueue(n=1).id
    beat(harness.driver, "a")
    beat(harness.driver, "b")
    claim(harness.driver, "a")
    lapse(harness)  # nobody could reach the database
    beat(harness.driver, "a")  # a was alive all along: present after its lease ran out
    beat(harness.driver, "b")
    [again] = claim(harness.driver, "b")
    assert (again.lease_expiries, again.died_with, again.suspect) == (0, None, False)
    [entry] = harness.row(job_id).errors
    assert (entry.attempt, entry.outcome) == (1, "lapsed") and "stayed present" in entry.message


def test_lease_16_a_holder_told_to_stop_is_no_death_and_no_suspect(harness):
    """A worker that exited past its --shutdown-timeout marked its presence stopped: its run
    comes back as any other, not as a suspect (issue 39 item 2)."""
    job_id = jobs.ok.enqueue(n=1).id
    beat(harness.driver, "told")
    claim(harness.driver, "told")
    harness.driver.runs().stop_presence("told")
    harness.advance(VIS + 1)
    beat(harness.driver, "next")
    [again] = claim(harness.driver, "next")
    assert (again.lease_expiries, again.died_with, again.suspect) == (0, None, False)
    [entry] = harness.row(job_id).errors
    assert entry.outcome == "lapsed" and "told to stop" in entry.message


def test_lease_16_a_shed_keeps_the_mark_and_any_other_settle_clears_it(harness):
    from django_xjobs.drivers.contract import RetryAt, Shed

    job_id = jobs.ok.enqueue(n=1).id
    claim(harness.driver, "gone")
    harness.advance(VIS + 1)
    [held] = claim(harness.driver, "b")
    assert harness.driver.runs().shed(Shed(held.id, held.lease_token, keep_place=True))
    assert harness.row(job_id).lapsed_holder == "gone"
    [held] = claim(harness.driver, "b")
    assert held.died_with == "gone"
    assert harness.driver.runs().retry(RetryAt(held.id, held.lease_token, delay=0))
    row = harness.row(job_id)
    assert (row.lapsed_holder, row.lease_expiries) == (None, 0)


@pytest.mark.parametrize("settle", ["complete", "retry"])
def test_a_settle_clears_the_mark(harness, settle):
    from django_xjobs.drivers.contract import RetryAt

    job_id = jobs.ok.enqueue(n=1).id
    beat(harness.driver, "a")
    claim(harness.driver, "a")
    beat(harness.driver, "b")
    lapse(harness, "b")  # a died while b beat on
    [held] = claim(harness.driver, "b")
    assert harness.row(job_id).lapsed_holder == "a"
    if settle == "complete":
        assert harness.driver.runs().complete([Complete(held.id, held.lease_token)]) == {held.id}
    else:
        assert harness.driver.runs().retry(RetryAt(held.id, held.lease_token, delay=0))
    assert harness.row(job_id).lapsed_holder is None


def test_lease_17_a_run_that_died_alone_is_counted_and_any_other_settle_resets_it(harness):
    """``RetryAt(crashed=True)``: the worker that isolated the run saw its child die; the count
    goes up by one (and the mark goes), where any other retry puts it back to 0."""
    from django_xjobs.drivers.contract import RetryAt

    job_id = jobs.ok.enqueue(n=1).id
    for expected in (1, 2):
        [held] = claim(harness.driver, "w")
        assert harness.driver.runs().retry(
            RetryAt(held.id, held.lease_token, delay=0, crashed=True)
        )
        row = harness.row(job_id)
        assert (row.state, row.lease_expiries, row.lapsed_holder) == ("ready", expected, None)
    [held] = claim(harness.driver, "w")
    assert (held.lease_expiries, held.suspect) == (2, True)
    assert harness.driver.runs().retry(RetryAt(held.id, held.lease_token, delay=0))
    assert harness.row(job_id).lease_expiries == 0


def test_a_renewal_queued_before_a_clean_stop_does_not_bring_the_row_back(harness):
    from django_xjobs.worker.presence import WorkerPresence

    presence = WorkerPresence(
        harness.driver, worker_id="w1", queues=("default",), ttl=VIS, in_flight=lambda: 0
    )
    presence.renew()
    assert sorted(by_id(harness.driver)) == ["w1"]
    presence.release()
    presence.renew()  # the heartbeat's pool ran it late
    assert harness.driver.reads().workers() == []


def test_the_heartbeat_renews_presence_once_per_tick_however_many_runs():
    from django_xjobs.worker.heartbeat import Heartbeat
    from django_xjobs.worker.presence import WorkerPresence
    from tests.worker.test_heartbeat import make_run

    class Counting:
        features = DriverFeatures(supports_fleet_slots=False)

        def __init__(self):
            self.presence_calls = self.lease_calls = 0

        def runs(self):
            return self

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


def test_lease_20_a_holder_back_from_an_outage_lands_its_owed_result_before_it_is_present(
    harness,
):
    """The outage struck between a's body returning and its completion landing (the chaos
    restart scenario): a's result is owed, and its lease ran out meanwhile. Once the database
    answers, a's first presence renewal sends the owed completion first: renewed first, a would
    count as present after its lease ran out, b's claim could take the run at once, and a's
    completion would be refused while b ran the body a second time."""
    from django_xjobs.worker.presence import WorkerPresence
    from django_xjobs.worker.worker import Worker

    job_id = jobs.ok.enqueue(n=1).id
    beat(harness.driver, "a")
    beat(harness.driver, "b")
    [held] = claim(harness.driver, "a")
    worker = Worker(queues=["default"], concurrency=1, worker_id="a")
    worker.runs.owed[held.lease_token] = (Complete(held.id, held.lease_token), time.monotonic())
    presence = WorkerPresence(
        harness.driver,
        worker_id="a",
        queues=("default",),
        ttl=VIS,
        in_flight=lambda: 0,
        settle_first=worker.settler.settle_owed,
    )
    presence._failing = True  # its last renewal met the outage
    lapse(harness)  # nobody reached the database; a's lease ran out
    presence.renew()  # the database answers: a's first beat back
    beat(harness.driver, "b")
    assert claim(harness.driver, "b") == []  # nothing to take: the body never runs twice
    assert harness.row(job_id).state == "done"  # a's completion landed, fenced on its token
    assert not worker.runs.owed and "a" in by_id(harness.driver)  # then a said it is present
