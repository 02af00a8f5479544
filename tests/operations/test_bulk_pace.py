"""A bulk action leaves the database's CPU to the workers a share of its time (issue 45, SPEC
BULK-28): between two batches the walk waits ``XJOBS["BULK_PACE"]`` of the batch before's own
time, at most ``PACE_MOST``; none before the first batch or after the last. The clock and the
wait are the module's, replaced here: nothing sleeps."""

from __future__ import annotations

import re

import pytest

from django_xjobs import operations
from django_xjobs.conf import validate
from django_xjobs.errors import ConfigInvalidError
from django_xjobs.operations import bulk
from tests.drivers.contract.test_bulk import _dead


class Clock:
    """``time`` as the walk sees it: each batch takes ``batch`` seconds, each wait is kept."""

    def __init__(self, store, batch: float) -> None:
        self.now, self.batch, self.waits = 0.0, batch, []
        act = store.act

        def timed(action, ids, where):
            self.now += self.batch
            return act(action, ids, where)

        store.act = timed

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(round(seconds, 6))
        self.now += seconds


@pytest.fixture
def clock(harness, monkeypatch):
    store = harness.driver.jobs().bulk()
    monkeypatch.setattr(type(harness.driver.jobs()), "bulk", lambda self: store)
    made = Clock(store, batch=0.04)
    monkeypatch.setattr(bulk, "time", made)
    monkeypatch.setattr(bulk, "BATCH", 2)
    return made


def test_bulk_28_the_walk_waits_a_share_of_each_batch_between_batches(harness, clock, settings):
    ids = [_dead(harness.driver, f"k{i}") for i in range(5)]
    settings.XJOBS = {**settings.XJOBS, "BULK_PACE": 0.5}
    answer = operations.retry_jobs(state="dead")
    assert (answer.batches, answer.changed) == (3, 5)
    # half of each 40 ms batch, between the three batches: none before the first, none after
    # the last
    assert clock.waits == [0.02, 0.02]
    assert {harness.row(i).state for i in ids} == {"ready"}


def test_bulk_28_a_slow_batch_is_followed_by_a_wait_of_at_most_a_tenth_of_a_second(
    harness, clock, settings
):
    for i in range(3):
        _dead(harness.driver, f"k{i}")
    clock.batch = 2.0  # a batch that waited on locks: the wait after it is bounded
    settings.XJOBS = {**settings.XJOBS, "BULK_PACE": 1}
    assert operations.retry_jobs(state="dead").changed == 3
    assert clock.waits == [bulk.PACE_MOST]


def test_bulk_28_a_pace_of_zero_never_waits(harness, clock, settings):
    for i in range(5):
        _dead(harness.driver, f"k{i}")
    settings.XJOBS = {**settings.XJOBS, "BULK_PACE": 0}
    assert operations.retry_jobs(state="dead").changed == 5
    assert clock.waits == []


def test_bulk_28_the_pace_is_a_share_from_0_to_1_half_by_default():
    assert validate({}).bulk_pace == 0.5
    assert validate({"BULK_PACE": 0}).bulk_pace == 0.0
    for raw in (-0.1, 1.5, "0.5", True, None):
        with pytest.raises(ConfigInvalidError, match=re.escape('XJOBS["BULK_PACE"]')):
            validate({"BULK_PACE": raw})
