"""The lapsed-lease sweep on its own timer (SPEC LEASE-01): a busy worker's claims skip it, an
idle worker's claims make it, and a burst worker never stops before one."""

from __future__ import annotations

import threading
import uuid

from django_xjobs.run.execute import Outcome
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.support.process import wait_for


class RecordingClaims:
    """The test's driver: remembers each claim's ``lapsed``, its limit and the rows it took."""

    def __init__(self, driver) -> None:
        self.driver = driver
        self.claims: list[tuple[bool, int, int]] = []

    def __getattr__(self, name):
        return getattr(self.driver, name)

    def claim(self, **kwargs):
        claimed = self.driver.claim(**kwargs)
        self.claims.append((kwargs.get("lapsed", True), kwargs["limit"], len(claimed)))
        return claimed


def _burst(driver, concurrency: int, poll_interval: float) -> Worker:
    worker = Worker(
        queues=["default"],
        concurrency=concurrency,
        driver=driver,
        burst=True,
        poll_interval=poll_interval,
    )
    return worker


def test_a_busy_worker_sweeps_once_a_poll_interval_and_idle_every_claim(live_harness):
    base = uuid.uuid4().int % 10**9
    for n in range(12):
        jobs.ok.enqueue(n=base + n)
    driver = RecordingClaims(live_harness.driver)
    # a poll interval far longer than the drain: only idleness may trigger a sweep
    stats = _burst(driver, concurrency=2, poll_interval=60).run()

    assert stats.outcomes == {Outcome.COMPLETED: 12}
    assert driver.claims[0][0], "a fresh worker has seen nothing yet: it sweeps"
    # a claim that filled its free slots leaves the next one on the timer
    after_full = [
        now
        for before, now in zip(driver.claims, driver.claims[1:], strict=False)
        if before[1] == before[2]
    ]
    assert after_full and not any(lapsed for lapsed, _, _ in after_full), driver.claims
    lapsed, _, taken = driver.claims[-1]
    assert (lapsed, taken) == (True, 0), "the burst ends on a sweep that found nothing"


def test_a_burst_worker_takes_a_lapsed_job_after_a_busy_stretch(live_harness):
    base = uuid.uuid4().int % 10**9
    lapsed = jobs.ok.enqueue(n=base).id
    live_harness.driver.claim(
        queues=["default"], limit=1, visibility_timeout=5, worker_id="gone", lapsed=False
    )
    live_harness.advance(5)
    jobs.ok.enqueue(n=base + 1)
    driver = RecordingClaims(live_harness.driver)
    # one thread: the lapsed job (a suspect: its holder is gone) runs alone, after the other
    worker = _burst(driver, concurrency=1, poll_interval=60)
    worker._idle = False  # mid-stretch: the last sweep was just now
    worker._swept_at = float("inf")
    stats = worker.run()

    # a suspect claimed beside a running job is handed back in its place until the worker idles
    assert stats.outcomes[Outcome.COMPLETED] == 2, stats.outcomes
    assert set(stats.outcomes) <= {Outcome.COMPLETED, "shed"}, stats.outcomes
    assert live_harness.row(lapsed).state == "done"
    first_lapsed, _, first_taken = driver.claims[0]
    assert (first_lapsed, first_taken) == (False, 1), driver.claims
    # the claims may ask for more than one thread's worth (the prefetch); one sweep takes it
    assert any(swept and taken == 1 for swept, _, taken in driver.claims[1:]), driver.claims


def test_a_notified_job_is_claimed_without_the_sweep_and_the_sweep_follows(live_harness):
    """W3 (issue 13): the claim a notification triggers takes the new job with the plain claim;
    the idle sweep comes on the pass after, so lapsed leases keep their bound."""
    driver = RecordingClaims(live_harness.driver)
    # a poll interval longer than the test: every pass is a wake-up, never the timer
    worker = Worker(queues=["default"], concurrency=1, driver=driver, poll_interval=60)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: driver.claims, timeout=20, what="the worker's first claim")
        assert driver.claims[0][0], "a fresh worker sweeps first"
        job_id = jobs.ok.enqueue(n=uuid.uuid4().int % 10**9).id
        wait_for(lambda: any(taken for _, _, taken in driver.claims), timeout=20, what="the claim")
        took = next(i for i, (_, _, taken) in enumerate(driver.claims) if taken)
        assert driver.claims[took][0] is False, driver.claims
        wait_for(
            lambda: any(lapsed for lapsed, _, _ in driver.claims[took + 1 :]),
            timeout=20,
            what="the sweep after the notified claim",
        )
    finally:
        worker.stop()
        thread.join(20)
    assert live_harness.row(job_id).state == "done"
