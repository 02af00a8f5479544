"""Two ``cancel_on`` cancels racing a settle for one running run (issue 43, SPEC EVT-10), on real
sessions: whichever takes the job row first decides, the others wait for it and then find the
run no longer theirs. The run ends in exactly one final state, counted once. The orders are
forced by holding the first one's transaction open until the other two wait on its lock."""

from __future__ import annotations

import threading

import pytest
from django.db import connection as django_connection
from django.db import transaction

from django_xjobs import publish_event
from django_xjobs.drivers import create, install, uninstall
from django_xjobs.drivers.contract import Complete
from tests import jobs
from tests.declarations.test_enqueue_many import own_connection
from tests.drivers.contract.support import claim
from tests.support.database import lock_waiters
from tests.support.process import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def driver():
    made = create("postgres")
    install(made)
    try:
        yield made
    finally:
        uninstall(made)


class _Session(threading.Thread):
    """``fn`` on a connection of its own, in a transaction that commits once ``hold`` is set
    (at once when it is None); what ``fn`` returned in ``result``."""

    def __init__(self, fn, hold: threading.Event | None = None) -> None:
        super().__init__(daemon=True)
        self.fn, self.hold, self.result, self.error = fn, hold, None, None
        self.start()

    def run(self) -> None:
        try:
            with transaction.atomic():
                self.result = self.fn()
                if self.hold is not None:
                    assert self.hold.wait(30), "never let go"
        except BaseException as error:  # seen by the test, not lost on the thread
            self.error = error
        finally:
            django_connection.close()


def _cancel():
    return publish_event("order.cancelled", {"order_id": 70}).cancelled


def _two_wait(watcher) -> bool:
    return lock_waiters(watcher, "") >= 2


def _running(driver):
    job_id = jobs.fulfil.enqueue(order_id=70).id
    [job] = claim(driver)
    assert job.id == job_id
    return job


def test_evt_10_a_cancel_that_takes_the_run_first_wins_and_the_settle_is_refused(driver):
    job = _running(driver)
    hold = threading.Event()
    with own_connection() as watcher:
        first = _Session(_cancel, hold)
        wait_for(lambda: first.result is not None or first.error, what="the first cancel")
        second = _Session(_cancel)
        settle = _Session(lambda: driver.runs().complete([Complete(job.id, job.lease_token)]))
        wait_for(lambda: _two_wait(watcher.cursor()), what="the cancel and the settle to wait")
        hold.set()
        for session in (first, second, settle):
            session.join(30)
    assert [s.error for s in (first, second, settle)] == [None, None, None]
    assert (first.result, second.result, settle.result) == (1, 0, set())
    row = driver.reads().get_job(job.id)
    assert (row.state, row.stop_reason, row.result) == ("cancelled", "cancelled", None)


def test_evt_10_a_settle_that_takes_the_run_first_wins_and_the_cancels_find_it_done(driver):
    job = _running(driver)
    hold = threading.Event()
    with own_connection() as watcher:
        settle = _Session(lambda: driver.runs().complete([Complete(job.id, job.lease_token)]), hold)
        wait_for(lambda: settle.result is not None or settle.error, what="the settle")
        cancels = [_Session(_cancel), _Session(_cancel)]
        wait_for(lambda: _two_wait(watcher.cursor()), what="both cancels to wait")
        hold.set()
        for session in (settle, *cancels):
            session.join(30)
    assert [s.error for s in (settle, *cancels)] == [None, None, None]
    assert (settle.result, [c.result for c in cancels]) == ({job.id}, [0, 0])
    row = driver.reads().get_job(job.id)
    assert (row.state, row.stop_reason) == ("done", None)
