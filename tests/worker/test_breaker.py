"""The claim loop's circuit breaker (issue 12, item 6): pure decisions on an injected clock."""

from __future__ import annotations

from django_xjobs.worker.breaker import Breaker, Closed, Opened


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_closed_claims_at_once_and_a_success_without_failures_is_no_recovery():
    breaker = Breaker(base=0.5, cap=10, clock=Clock(), jitter=lambda: 0.0)
    assert (breaker.state, breaker.wait(), breaker.success()) == ("closed", 0.0, None)


def test_failures_in_a_row_double_the_wait_up_to_the_cap():
    breaker = Breaker(base=0.5, cap=5, clock=Clock(), jitter=lambda: 0.0)
    delays = [breaker.failure().delay for _ in range(6)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert breaker.state == "open"


def test_open_waits_out_its_delay_then_lets_one_half_open_trial_through():
    clock = Clock()
    breaker = Breaker(base=1, cap=10, clock=clock, jitter=lambda: 0.0)
    assert breaker.failure() == Opened(failures=1, delay=1.0)
    clock.now += 0.25
    assert breaker.wait() == 0.75
    clock.now += 0.75
    assert (breaker.wait(), breaker.state) == (0.0, "half-open")
    assert breaker.failure() == Opened(failures=2, delay=2.0)  # the trial failed: open again
    clock.now += 2
    assert breaker.wait() == 0.0
    assert breaker.success() == Closed(failures=2, outage=3.0)
    assert (breaker.state, breaker.failures) == ("closed", 0)
    assert breaker.failure().delay == 1.0  # reset: the next outage starts from the base


def test_jitter_takes_at_most_a_fifth_off():
    breaker = Breaker(base=1, cap=10, clock=Clock(), jitter=lambda: 1.0)
    assert breaker.failure().delay == 0.8
