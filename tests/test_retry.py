"""Retry policy, backoff and the retry decision (SPEC RETRY-01..04, CLASS-04, JOB-03, SE-52).

Every duration is seconds (DESIGN §7), as in docs/reference/behaviour.md: a base ``delay=1``
gives the schedule ``[1, 2, ...]``.
"""

import math
from datetime import timedelta

import pytest

from django_xjobs import Retry, retry_schedule
from django_xjobs.errors import (
    DurationInvalidError,
    InvariantError,
    JobTimeoutError,
    TerminalError,
    XJobsError,
)
from django_xjobs.retry import DEFAULT_RETRY, RetryDecision, backoff_delay, decide

# --- RETRY-01: raw delay and cap ------------------------------------------------------------


def test_retry_01_defaults():
    """RETRY-01 / JOB-07: base 1 s, cap 3600 s, exponential, jitter on, dead letter on."""
    policy = Retry()
    assert policy.attempts == 3
    assert policy.backoff == "exponential"
    assert policy.delay_seconds == 1
    assert policy.max_delay_seconds == 3600
    assert policy.jitter is True
    assert policy.dead_letter is True
    assert policy == DEFAULT_RETRY


@pytest.mark.parametrize(
    ("backoff", "expected"),
    [
        ("exponential", [1, 2, 4, 8, 16]),
        ("linear", [1, 2, 3, 4, 5]),
        ("fixed", [1, 1, 1, 1, 1]),
    ],
)
def test_retry_01_raw_delay_by_backoff(backoff, expected):
    policy = Retry(attempts=10, backoff=backoff, delay=1, jitter=False)
    assert [backoff_delay(policy, k) for k in range(1, 6)] == expected


def test_retry_01_attempt_below_one_counts_as_one():
    """RETRY-01: ``k = max(1, attempt)``."""
    policy = Retry(backoff="exponential", delay=2, jitter=False)
    assert backoff_delay(policy, 0) == 2
    assert backoff_delay(policy, -3) == 2
    linear = Retry(backoff="linear", delay=2, jitter=False)
    assert backoff_delay(linear, 0) == 2


def test_retry_01_cap_applies_to_every_backoff():
    assert backoff_delay(Retry(delay=1, max_delay=10, jitter=False), 5) == 10
    assert backoff_delay(Retry(backoff="linear", delay=3, max_delay=10, jitter=False), 4) == 10
    assert backoff_delay(Retry(backoff="fixed", delay=30, max_delay=10, jitter=False), 1) == 10


def test_retry_01_durations_in_any_form():
    policy = Retry(delay="500ms", max_delay=timedelta(minutes=1), jitter=False)
    assert policy.delay_seconds == 0.5
    assert policy.max_delay_seconds == 60
    assert backoff_delay(policy, 3) == 2


def test_retry_01_huge_attempt_is_capped_not_overflowing():
    """RETRY-01: ``min(raw, cap)`` — a long-lived policy's late attempt waits ``max_delay``.

    ``base * 2**(k-1)`` exceeds the float range past k≈1025; the capped delay is still the cap.
    """
    policy = Retry(attempts=5000, delay=1, max_delay=3600, jitter=False)
    assert backoff_delay(policy, 1500) == 3600
    schedule = retry_schedule(policy)
    assert len(schedule) == 4999
    assert schedule[-1] == 3600


# --- RETRY-02: equal jitter -----------------------------------------------------------------


@pytest.mark.parametrize(("rand", "delay"), [(0.0, 2.0), (0.5, 3.0), (1.0, 4.0)])
def test_retry_02_equal_jitter(rand, delay):
    """RETRY-02: exponential, base 1 s, attempt 3: r=0 -> 2 s, r=0.5 -> 3 s, r=1 -> 4 s."""
    policy = Retry(backoff="exponential", delay=1, jitter=True)
    assert backoff_delay(policy, 3, rand=rand) == pytest.approx(delay)


def test_retry_02_jitter_off_is_the_capped_value():
    policy = Retry(backoff="exponential", delay=1, jitter=False)
    assert backoff_delay(policy, 3) == 4
    # rand is ignored when jitter is off
    assert backoff_delay(policy, 3, rand=0.0) == 4


def test_retry_02_jitter_applies_after_the_cap():
    policy = Retry(delay=1, max_delay=10, jitter=True)
    assert backoff_delay(policy, 8, rand=0.0) == pytest.approx(5)
    assert backoff_delay(policy, 8, rand=1.0) == pytest.approx(10)


def test_retry_02_random_jitter_stays_within_half_and_full():
    policy = Retry(delay=1, jitter=True)
    for _ in range(200):
        assert 2 <= backoff_delay(policy, 3) <= 4


def test_se_52_jitter_defaults_on():
    """SE-52: an omitted ``jitter`` means on."""
    policy = Retry(delay=1)
    assert policy.jitter is True
    assert backoff_delay(policy, 3, rand=0.0) == pytest.approx(2)


# --- RETRY-03: retry_schedule ---------------------------------------------------------------


def test_retry_03_exponential():
    assert retry_schedule(Retry(attempts=5, backoff="exponential", delay=1)) == [1, 2, 4, 8]


def test_retry_03_max_delay():
    assert retry_schedule(Retry(attempts=8, max_delay=10)) == [1, 2, 4, 8, 10, 10, 10]


def test_retry_03_linear():
    assert retry_schedule(Retry(attempts=5, backoff="linear")) == [1, 2, 3, 4]


def test_retry_03_fixed():
    assert retry_schedule(Retry(attempts=5, backoff="fixed")) == [1, 1, 1, 1]


def test_retry_03_fixed_30s_attempts_3():
    assert retry_schedule(Retry(attempts=3, backoff="fixed", delay="30s")) == [30, 30]


def test_retry_03_attempts_1_has_no_retries():
    assert retry_schedule(Retry(attempts=1)) == []


def test_retry_03_schedule_forces_jitter_off():
    policy = Retry(attempts=4, jitter=True)
    assert retry_schedule(policy) == [1, 2, 4]
    assert retry_schedule(policy) == [1, 2, 4]
    assert policy.jitter is True  # the policy itself is untouched


def test_retry_03_schedule_keeps_sub_second_delays():
    assert retry_schedule(Retry(attempts=3, delay="10ms", max_delay="50ms")) == pytest.approx(
        [0.01, 0.02]
    )


# --- RETRY-04: decide() on attempts ---------------------------------------------------------


def test_retry_04_retries_below_the_ceiling():
    policy = Retry(attempts=5, delay=1, jitter=False)
    decision = decide(policy, 1, ValueError("boom"))
    assert decision == RetryDecision(retry=True, delay=1, final_state=None, stop_reason=None)
    assert decide(policy, 3, ValueError("boom")).delay == 4
    assert decide(policy, 4, ValueError("boom")).retry is True


def test_retry_04_retry_delay_uses_jitter():
    policy = Retry(attempts=5, delay=1, jitter=True)
    assert decide(policy, 3, ValueError("boom"), rand=0.0).delay == pytest.approx(2)
    assert decide(policy, 3, ValueError("boom"), rand=0.5).delay == pytest.approx(3)


@pytest.mark.parametrize("attempt", [5, 6, 50])
def test_retry_04_stops_at_the_ceiling_dead_lettered(attempt):
    """RETRY-04 / CLASS-05: at ``attempt >= attempts`` -> no retry, delay 0, dead letter."""
    decision = decide(Retry(attempts=5), attempt, ValueError("boom"))
    assert decision.retry is False
    assert decision.delay == 0
    assert decision.final_state == "dead"
    assert decision.stop_reason == "attempts-exhausted"


def test_retry_04_no_dead_letter_ends_failed():
    """DESIGN Q-02: ``dead_letter=False`` ends the job in terminal ``failed``."""
    decision = decide(Retry(attempts=2, dead_letter=False), 2, ValueError("boom"))
    assert decision == RetryDecision(
        retry=False, delay=0, final_state="failed", stop_reason="attempts-exhausted"
    )


def test_retry_04_attempts_1_never_retries():
    """JOB-03: attempts counts the first run."""
    decision = decide(Retry(attempts=1), 1, ConnectionError("down"))
    assert decision.retry is False
    assert decision.stop_reason == "attempts-exhausted"


def test_retry_04_retryable_error_still_stops_at_ceiling():
    """CLASS-05: the attempt ceiling beats a retryable classification."""
    decision = decide(Retry(attempts=2), 2, JobTimeoutError("slow"))
    assert decision.retry is False
    assert decision.stop_reason == "attempts-exhausted"
    assert decide(Retry(attempts=2), 1, JobTimeoutError("slow")).retry is True


# --- CLASS-04: a terminal error stops at once -----------------------------------------------


def test_class_04_terminal_stops_at_attempt_1_of_5():
    decision = decide(Retry(attempts=5), 1, TerminalError("card declined"))
    assert decision == RetryDecision(
        retry=False, delay=0, final_state="dead", stop_reason="terminal"
    )


def test_class_04_terminal_without_dead_letter_ends_failed():
    decision = decide(Retry(attempts=5, dead_letter=False), 1, TerminalError("card declined"))
    assert decision.final_state == "failed"
    assert decision.stop_reason == "terminal"


def test_class_04_terminal_at_the_ceiling_is_still_terminal():
    decision = decide(Retry(attempts=3), 3, TerminalError("no"))
    assert decision.stop_reason == "terminal"


def test_class_04_subclass_of_terminal_error_is_terminal():
    class CardDeclined(TerminalError):
        pass

    assert decide(Retry(attempts=5), 1, CardDeclined("no")).stop_reason == "terminal"


def test_unclassified_xjobs_error_retries():
    """CLASS-07: an error without a declared class goes through the backoff."""
    decision = decide(Retry(attempts=5), 1, XJobsError("something"))
    assert decision.retry is True
    assert decision.stop_reason is None


# --- Retry() validation (JOB-03) ------------------------------------------------------------


@pytest.mark.parametrize("attempts", [0, -1, 1.5, True, False, "3", None])
def test_job_03_attempts_must_be_an_integer_of_at_least_1(attempts):
    with pytest.raises(InvariantError) as caught:
        Retry(attempts=attempts)
    assert caught.value.code == "X_INVARIANT"
    assert "attempts" in caught.value.message
    assert caught.value.hint


@pytest.mark.parametrize("backoff", ["exp", "Exponential", "", None, 2])
def test_bad_backoff_is_refused(backoff):
    with pytest.raises(InvariantError) as caught:
        Retry(backoff=backoff)
    assert caught.value.code == "X_INVARIANT"
    assert "backoff" in caught.value.message
    assert caught.value.hint


@pytest.mark.parametrize("field", ["delay", "max_delay"])
@pytest.mark.parametrize("value", ["soon", "3", "", "5 parsecs"])
def test_bad_delay_string_is_duration_invalid(field, value):
    with pytest.raises(DurationInvalidError) as caught:
        Retry(**{field: value})
    assert caught.value.code == "X_DURATION_INVALID"
    assert f"Retry.{field}" in caught.value.message


@pytest.mark.parametrize("field", ["delay", "max_delay"])
@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, "0s", timedelta(0)])
def test_non_positive_delay_is_invariant(field, value):
    with pytest.raises(InvariantError) as caught:
        Retry(**{field: value})
    assert caught.value.code == "X_INVARIANT"
    assert f"Retry.{field}" in caught.value.message


def test_retry_is_frozen():
    policy = Retry()
    with pytest.raises(AttributeError):
        policy.attempts = 9  # type: ignore[misc]
