"""Retry decided by the error as well as the attempt count (SPEC CLASS-01..11, SE-17..19).

Durations are seconds (DESIGN §7): the retry-after examples use
``Retry(backoff="fixed", delay=1, max_delay=60)``.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Any

import pytest

import django_xjobs
from django_xjobs import (
    Retry,
    RetryAfterError,
    TerminalError,
    XJobsError,
    classify,
    job,
    register_error_retry,
    retry_class,
)
from django_xjobs.classify import BUILTIN, _isolated_registry, is_declared, retry_for
from django_xjobs.declarations.registry import get_job
from django_xjobs.drivers.contract import Finish, RetryAt
from django_xjobs.errors import (
    DriverUnavailableError,
    ErrorRetryInvalidError,
    JobCrashedError,
    JobTimeoutError,
    LeaseLostError,
    ResultInvalidError,
    SlotLostError,
    StepDuplicateError,
)
from django_xjobs.retry import RetryDecision, backoff_delay, decide
from django_xjobs.run.execution import Outcome
from django_xjobs.run.verdicts import failure
from django_xjobs.testing import relay_staged, run_until_idle


@pytest.fixture(autouse=True)
def _registry():
    """Each test starts from, and leaves, the registry as it found it."""
    with _isolated_registry():
        yield


# --- app errors and jobs the executor-level tests run ------------------------------------------


@retry_class("terminal")
class CardDeclined(Exception):
    """An app's own exception class, declared terminal."""


@retry_class("retry-after")
class RateLimited(Exception):
    def __init__(self, message: str, retry_after: Any = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


#: SPEC CLASS-06's policy: fixed, 1 s, capped at 60 s (no jitter, for exact delays).
FIXED_1S = Retry(attempts=3, backoff="fixed", delay=1, max_delay=60, jitter=False)
#: Values JSON cannot carry, passed to the job by name.
SPECIAL = {"nan": math.nan, "true": True, "absent": None}


@job(name="test_classify.rate_limited", idempotency_key="classify-ra:{n}", retry=FIXED_1S)
def rate_limited(ctx, n: int = 0, after: Any = None, special: str = ""):
    stated = SPECIAL[special] if special else after
    raise RetryAfterError("rate limited", retry_after=stated)


@job(
    name="test_classify.declined",
    idempotency_key="classify-declined:{n}",
    retry=Retry(attempts=5, delay="10ms", jitter=False),
)
def declined(ctx, n: int = 0):
    raise CardDeclined("card declined")


@job(
    name="test_classify.coded",
    idempotency_key="classify-coded:{n}",
    retry=Retry(attempts=5, delay="10ms", jitter=False),
)
def coded(ctx, n: int = 0, code: str = "APP_UNDECLARED", claim: str = ""):
    error = XJobsError(f"{code} happened", code=code)
    if claim:
        error.retry = claim  # type: ignore[misc]  # an instance override (SPEC SE-18)
    raise error


@job(
    name="test_classify.plain",
    idempotency_key="classify-plain:{n}",
    retry=Retry(attempts=2, backoff="fixed", delay=1, jitter=False),
)
def plain(ctx, n: int = 0, after: float = 30.0):
    error = ValueError("plain failure")
    error.retry_after = after  # type: ignore[attr-defined]  # ignored: not retry-after
    raise error


@job(
    name="test_classify.terminal_kept",
    idempotency_key="classify-kept:{n}",
    retry=Retry(attempts=5, dead_letter=False),
)
def terminal_kept(ctx, n: int = 0):
    raise TerminalError("the account is closed")


@job(
    name="test_classify.exhausted_kept",
    idempotency_key="classify-exhausted-kept:{n}",
    retry=Retry(attempts=1, dead_letter=False),
)
def exhausted_kept(ctx, n: int = 0):
    raise ConnectionError("down")


@job(name="test_classify.once", idempotency_key="classify-once:{n}", retry=Retry(attempts=1))
def once(ctx, n: int = 0):
    return n


def _waits(row) -> float:
    """How long a retried row waits: its ``run_at`` past the retry's ``updated_at``."""
    return (row.run_at - row.updated_at).total_seconds()


# --- CLASS-01: the registry ---------------------------------------------------------------------


def test_class_01_register_and_read_back():
    register_error_retry({"APP_DECLINED": "terminal", "APP_BUSY": "retryable"})
    register_error_retry({"APP_SLOW_DOWN": "retry-after"})
    assert retry_for("APP_DECLINED") == "terminal"
    assert retry_for("APP_BUSY") == "retryable"
    assert retry_for("APP_SLOW_DOWN") == "retry-after"
    assert is_declared("APP_BUSY")


def test_class_01_unknown_code_fails_closed():
    """CLASS-01: ``retry_for`` of an unregistered code answers terminal."""
    assert retry_for("APP_NEVER_REGISTERED") == "terminal"
    assert retry_for("X_JOB_LEASE_LOST") == "terminal"
    assert not is_declared("APP_NEVER_REGISTERED")


def test_class_01_re_registering_the_same_kind_is_allowed():
    register_error_retry({"APP_DECLINED": "terminal"})
    register_error_retry({"APP_DECLINED": "terminal"})
    register_error_retry({"X_JOB_TIMEOUT": "retryable"})  # a built-in, unchanged
    assert retry_for("APP_DECLINED") == "terminal"


def test_class_01_a_different_kind_for_a_registered_code_is_refused():
    register_error_retry({"APP_DECLINED": "terminal"})
    with pytest.raises(ErrorRetryInvalidError) as caught:
        register_error_retry({"APP_DECLINED": "retryable"})
    assert caught.value.code == "X_ERROR_RETRY_INVALID"
    assert "APP_DECLINED" in caught.value.message
    assert caught.value.hint
    assert retry_for("APP_DECLINED") == "terminal"


@pytest.mark.parametrize("code", sorted(BUILTIN))
def test_class_01_overriding_a_built_in_is_refused(code):
    other = "retryable" if BUILTIN[code] != "retryable" else "terminal"
    with pytest.raises(ErrorRetryInvalidError) as caught:
        register_error_retry({code: other})
    assert caught.value.code == "X_ERROR_RETRY_INVALID"
    assert "django_xjobs" in caught.value.message
    assert caught.value.hint
    assert retry_for(code) == BUILTIN[code]


@pytest.mark.parametrize("kind", ["fatal", "Terminal", "retry_after", "", None, 1, True])
def test_class_01_an_invalid_kind_is_refused(kind):
    with pytest.raises(ErrorRetryInvalidError) as caught:
        register_error_retry({"APP_X": kind})
    assert caught.value.code == "X_ERROR_RETRY_INVALID"
    assert '"terminal"' in caught.value.hint
    assert not is_declared("APP_X")


@pytest.mark.parametrize("code", ["", "   ", None, 42, b"APP_BYTES"])
def test_class_01_a_code_must_be_a_non_empty_string(code):
    with pytest.raises(ErrorRetryInvalidError) as caught:
        register_error_retry({code: "terminal"})
    assert "non-empty string" in caught.value.message
    assert caught.value.hint


@pytest.mark.parametrize("mapping", [None, [("APP_X", "terminal")], "APP_X"])
def test_class_01_the_argument_must_be_a_mapping(mapping):
    with pytest.raises(ErrorRetryInvalidError):
        register_error_retry(mapping)


def test_class_01_all_or_nothing():
    """A refused call registers none of its entries, even the valid ones before the bad one."""
    register_error_retry({"APP_DECLINED": "terminal"})
    for bad in (
        {"APP_FIRST": "retryable", "APP_BAD": "fatal"},
        {"APP_FIRST": "retryable", "APP_DECLINED": "retryable"},
        {"APP_FIRST": "retryable", "X_TERMINAL": "retryable"},
        {"APP_FIRST": "retryable", "": "terminal"},
    ):
        with pytest.raises(ErrorRetryInvalidError):
            register_error_retry(bad)
        assert not is_declared("APP_FIRST")
    assert retry_for("APP_DECLINED") == "terminal"


def test_class_01_one_registry_for_every_thread():
    errors: list[BaseException] = []

    def register(i: int) -> None:
        try:
            register_error_retry({f"APP_T{i}": "retryable", "APP_SHARED": "terminal"})
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=register, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert all(retry_for(f"APP_T{i}") == "retryable" for i in range(16))
    assert retry_for("APP_SHARED") == "terminal"


def test_class_01_the_test_fixture_forgets_registrations():
    with _isolated_registry():
        register_error_retry({"APP_SCOPED": "terminal"})
        assert is_declared("APP_SCOPED")
    assert not is_declared("APP_SCOPED")


def test_class_01_public_names():
    for name in ("register_error_retry", "retry_class", "RetryAfterError", "classify"):
        assert name in django_xjobs.__all__
        assert getattr(django_xjobs, name)


# --- CLASS-02: built-ins ------------------------------------------------------------------------


def test_class_02_built_in_classifications():
    assert dict(BUILTIN) == {
        "X_JOB_TIMEOUT": "retryable",
        "X_DRIVER_UNAVAILABLE": "retryable",
        "X_STEP_DUPLICATE": "terminal",
        "X_RESULT_INVALID": "terminal",
        "X_TERMINAL": "terminal",
        "X_JOB_CRASHED": "terminal",
        "X_BACKFILL_STALLED": "terminal",
        "X_BACKFILL_ENVIRONMENT": "terminal",
        "X_BACKFILL_APPLIED": "terminal",
        "X_RETRY_AFTER": "retry-after",
    }


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (JobTimeoutError("slow"), "retryable"),
        (DriverUnavailableError("down"), "retryable"),
        (StepDuplicateError("twice"), "terminal"),
        (ResultInvalidError("not JSON"), "terminal"),
        (TerminalError("no"), "terminal"),
        (JobCrashedError("dies"), "terminal"),
        (RetryAfterError("later", retry_after=5), "retry-after"),
    ],
)
def test_class_02_built_in_errors_classify(error, kind):
    assert classify(error) == kind


def test_class_02_lease_and_slot_loss_are_deliberately_unclassified():
    assert not is_declared("X_JOB_LEASE_LOST")
    assert not is_declared("X_JOB_SLOT_LOST")
    assert classify(LeaseLostError("lapsed")) is None
    assert classify(SlotLostError("taken")) is None


# --- CLASS-03: classify --------------------------------------------------------------------------


def test_class_03_plain_exceptions_are_unclassified():
    assert classify(ValueError("boom")) is None
    assert classify(ConnectionError("down")) is None
    assert classify(SystemExit(3)) is None


def test_class_03_a_registered_code_classifies_its_errors():
    register_error_retry({"APP_DECLINED": "terminal", "APP_BUSY": "retryable"})
    assert classify(XJobsError("no", code="APP_DECLINED")) == "terminal"
    assert classify(XJobsError("busy", code="APP_BUSY")) == "retryable"


def test_class_03_an_undeclared_code_is_unclassified():
    assert classify(XJobsError("what", code="APP_UNDECLARED")) is None
    assert classify(XJobsError("default code X_INVARIANT")) is None


def test_class_03_se_18_an_undeclared_terminal_instance_override_is_unclassified():
    """SE-18: reading ``error.retry`` alone would dead-letter every such error."""
    error = XJobsError("claims terminal", code="APP_UNDECLARED")
    error.retry = "terminal"  # type: ignore[misc]
    assert classify(error) is None
    assert decide(Retry(attempts=5), 1, error).retry is True


def test_class_03_a_declared_code_with_a_terminal_instance_override_is_terminal():
    """CLASS-03: ``X_TIMEOUT`` with ``retry="terminal"`` on the instance classifies terminal."""
    error = JobTimeoutError("slow, and it will stay slow")
    error.retry = "terminal"  # type: ignore[misc]
    assert classify(error) == "terminal"
    register_error_retry({"APP_BUSY": "retryable"})
    busy = XJobsError("busy", code="APP_BUSY")
    busy.retry = "terminal"  # type: ignore[misc]
    assert classify(busy) == "terminal"


def test_class_03_a_non_terminal_claim_wins_over_the_registered_kind():
    register_error_retry({"APP_DECLINED": "terminal"})
    assert classify(RetryAfterError("later", code="APP_DECLINED", retry_after=1)) == "retry-after"
    retryable = XJobsError("try again", code="APP_DECLINED")
    retryable.retry = "retryable"  # type: ignore[misc]
    assert classify(retryable) == "retryable"


def test_class_03_an_invalid_claim_is_ignored():
    register_error_retry({"APP_DECLINED": "terminal"})
    error = XJobsError("typo", code="APP_DECLINED")
    error.retry = "terminl"  # type: ignore[misc]
    assert classify(error) == "terminal"  # the registered kind
    stray = XJobsError("typo", code="APP_UNDECLARED")
    stray.retry = "terminl"  # type: ignore[misc]
    assert classify(stray) is None


def test_class_03_retry_class_on_a_plain_exception_class():
    assert classify(CardDeclined("no")) == "terminal"
    assert classify(RateLimited("later", retry_after=3)) == "retry-after"

    class ExpiredCard(CardDeclined):
        pass

    assert classify(ExpiredCard("no")) == "terminal"  # inherited

    @retry_class("retryable")
    class SoftDecline(CardDeclined):
        pass

    assert classify(SoftDecline("maybe")) == "retryable"  # a subclass declares its own
    assert classify(CardDeclined("no")) == "terminal"  # the parent is untouched


def test_class_03_retry_class_wins_on_an_xjobs_error_subclass():
    @retry_class("retryable")
    class NotReallyTerminal(TerminalError):
        pass

    assert classify(NotReallyTerminal("soft")) == "retryable"


def test_class_03_an_xjobs_error_subclass_with_a_class_level_retry_is_declared():
    """The class, not the instance, declares it: no registration needed."""

    class PaymentDeclined(XJobsError):
        code = "APP_PAYMENT_DECLINED"
        retry = "terminal"

    class Declined(TerminalError):
        code = "APP_DECLINED_UNREGISTERED"

    assert not is_declared("APP_PAYMENT_DECLINED")
    assert classify(PaymentDeclined("no")) == "terminal"
    assert classify(Declined("no")) == "terminal"
    assert classify(TerminalError("no", code="APP_OTHER")) == "terminal"


@pytest.mark.parametrize("kind", ["fatal", "", None, 3, "Terminal"])
def test_class_03_retry_class_checks_its_kind_at_declaration(kind):
    with pytest.raises(ErrorRetryInvalidError) as caught:
        retry_class(kind)
    assert caught.value.code == "X_ERROR_RETRY_INVALID"
    assert caught.value.hint


@pytest.mark.parametrize("target", [object(), int, KeyboardInterrupt, lambda: None])
def test_class_03_retry_class_decorates_exception_classes_only(target):
    with pytest.raises(ErrorRetryInvalidError):
        retry_class("terminal")(target)


def test_class_03_retry_class_twice_with_different_kinds_is_refused():
    with pytest.raises(ErrorRetryInvalidError):

        @retry_class("terminal")
        @retry_class("retryable")
        class Confused(Exception):
            pass


def test_class_03_an_instance_cannot_declare_retry_class():
    error = ValueError("boom")
    error.__xjobs_retry__ = "terminal"  # type: ignore[attr-defined]
    assert classify(error) is None


# --- CLASS-04: terminal stops at once -------------------------------------------------------------


@pytest.mark.parametrize("attempt", [1, 2, 5])
def test_class_04_terminal_on_any_attempt(attempt):
    decision = decide(Retry(attempts=5), attempt, CardDeclined("no"))
    assert decision == RetryDecision(False, 0, "dead", "terminal")


def test_class_04_registered_terminal_code_stops_at_once():
    register_error_retry({"APP_DECLINED": "terminal"})
    decision = decide(Retry(attempts=5), 1, XJobsError("no", code="APP_DECLINED"))
    assert decision == RetryDecision(False, 0, "dead", "terminal")


def test_class_04_se_17_terminal_at_attempt_1_of_5_through_the_executor(harness):
    """SPEC CLASS-04: ``attempts=5``, a terminal error at attempt 1 → dead at attempt 1, one
    settle, ``Finish`` in ``dead`` (no delay, the attempt spent)."""
    from tests import jobs

    job_id = jobs.terminal.enqueue(n=901).id
    (execution,) = run_until_idle()
    assert execution.outcome == Outcome.DEAD_LETTERED
    assert execution.stop_reason == "terminal"
    assert isinstance(execution.settle, Finish)
    assert (execution.settle.state, execution.settle.stop_reason) == ("dead", "terminal")
    row = harness.row(job_id)
    assert (row.state, row.attempt, row.max_attempts) == ("dead", 1, 5)
    assert row.stop_reason == "terminal"


@pytest.mark.parametrize("how", ["retry_class", "registered"])
def test_class_04_app_declared_terminal_through_the_executor(harness, how):
    if how == "retry_class":
        job_id = declined.enqueue(n=1).id
    else:
        register_error_retry({"APP_PAYMENT_DECLINED": "terminal"})
        job_id = coded.enqueue(n=1, code="APP_PAYMENT_DECLINED").id
    (execution,) = run_until_idle()
    assert execution.outcome == Outcome.DEAD_LETTERED
    row = harness.row(job_id)
    assert (row.state, row.attempt, row.stop_reason) == ("dead", 1, "terminal")


def test_class_04_se_18_undeclared_terminal_claim_is_retried_through_the_executor(harness):
    job_id = coded.enqueue(n=2, code="APP_UNDECLARED", claim="terminal").id
    (execution,) = run_until_idle()
    assert execution.outcome == Outcome.RETRIED
    row = harness.row(job_id)
    assert (row.state, row.attempt, row.stop_reason) == ("ready", 1, None)


# --- CLASS-05: the ceiling beats every other classification ---------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        JobTimeoutError("slow"),
        RetryAfterError("later", retry_after=5),
        RateLimited("later", retry_after=5),
        ValueError("boom"),
        XJobsError("what", code="APP_UNDECLARED"),
    ],
    ids=["retryable", "retry-after", "retry-after-class", "plain", "unclassified"],
)
@pytest.mark.parametrize("dead_letter", [True, False])
def test_class_05_exhausted_attempts_stop_whatever_the_classification(error, dead_letter):
    policy = Retry(attempts=3, dead_letter=dead_letter)
    decision = decide(policy, 3, error)
    final = "dead" if dead_letter else "failed"
    assert decision == RetryDecision(False, 0, final, "attempts-exhausted")
    assert decide(policy, 2, error).retry is True


def test_class_05_retry_after_exhausted_through_the_executor(harness):
    job_id = rate_limited.enqueue(n=5, after=30).id
    for _ in range(3):
        run_until_idle()
        harness.advance(61)
    row = harness.row(job_id)
    assert (row.state, row.attempt, row.stop_reason) == ("dead", 3, "attempts-exhausted")


# --- CLASS-06: the delay a retry-after error states ---------------------------------------------


@pytest.mark.parametrize(
    ("stated", "delay"),
    [
        (30, 30),
        (30.5, 30.5),
        (0, 0),
        (86_400, 60),
        (10**400, 60),  # an int past the float range is still finite: capped
        (None, 1),
        (-5, 1),
        (math.nan, 1),
        (math.inf, 1),
        (-math.inf, 1),
        ("soon", 1),
        ("30", 1),
        (True, 1),
        (False, 1),
        ([30], 1),
    ],
)
def test_class_06_worked_example_in_seconds(stated, delay):
    """CLASS-06: fixed/1 s/max 60 s: 30 → 30 s; 86 400 → 60 s; absent → 1 s; a value that is
    not a finite number >= 0 falls back to the backoff."""
    decision = decide(FIXED_1S, 1, RetryAfterError("rate limited", retry_after=stated))
    assert decision == RetryDecision(True, delay, None, None)


def test_class_06_retry_after_ignores_jitter_and_backoff_growth():
    policy = Retry(attempts=5, backoff="exponential", delay=1, max_delay=60, jitter=True)
    assert decide(policy, 4, RetryAfterError("later", retry_after=7), rand=0.0).delay == 7


def test_class_06_a_missing_value_falls_back_to_the_jittered_backoff():
    policy = Retry(attempts=5, backoff="exponential", delay=1, jitter=True)
    error = RetryAfterError("later")
    assert decide(policy, 3, error, rand=0.0).delay == pytest.approx(2)
    assert decide(policy, 3, error, rand=1.0).delay == pytest.approx(4)


def test_class_06_retry_class_and_registered_codes_state_their_delay():
    assert decide(FIXED_1S, 1, RateLimited("later", retry_after=12)).delay == 12
    register_error_retry({"APP_SLOW_DOWN": "retry-after"})
    error = XJobsError("slow down", code="APP_SLOW_DOWN", retry_after=20)
    assert error.meta == {"retry_after": 20}
    assert decide(FIXED_1S, 1, error).delay == 20


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ValueError("boom"), RetryDecision(True, 1, None, None)),
        (JobTimeoutError("slow", retry_after=30), RetryDecision(True, 1, None, None)),
        (
            XJobsError("what", code="APP_UNDECLARED", retry_after=30),
            RetryDecision(True, 1, None, None),
        ),
        (TerminalError("no", retry_after=30), RetryDecision(False, 0, "dead", "terminal")),
    ],
    ids=["plain", "retryable", "unclassified", "terminal"],
)
def test_class_06_a_stated_delay_on_an_error_that_is_not_retry_after_is_ignored(error, expected):
    error.retry_after = 30  # as an attribute too, not only in meta
    assert decide(FIXED_1S, 1, error) == expected


@pytest.mark.parametrize(
    ("inputs", "delay"),
    [
        ({"after": 30}, 30),
        ({"after": 86_400}, 60),
        ({"special": "absent"}, 1),
        ({"after": -5}, 1),
        ({"special": "nan"}, 1),
        ({"after": "soon"}, 1),
        ({"special": "true"}, 1),
    ],
    ids=["30", "86400", "absent", "negative", "nan", "soon", "true"],
)
def test_class_06_the_row_waits_the_stated_delay(harness, inputs, delay):
    job_id = rate_limited.enqueue(n=6, **inputs).id
    (execution,) = run_until_idle()
    assert execution.outcome == Outcome.RETRIED
    assert execution.retry_in == delay
    assert execution.settle.delay == delay
    row = harness.row(job_id)
    assert row.state == "ready"
    assert _waits(row) == pytest.approx(delay, abs=1)


# --- CLASS-07: retryable and unclassified are exactly the backoff ---------------------------------


@pytest.mark.parametrize(
    "error",
    [
        ValueError("boom"),
        ConnectionError("down"),
        JobTimeoutError("slow"),
        DriverUnavailableError("down"),
        XJobsError("what", code="APP_UNDECLARED"),
    ],
)
@pytest.mark.parametrize("attempt", [1, 2, 3, 4])
@pytest.mark.parametrize("rand", [0.0, 0.25, 1.0])
def test_class_07_exactly_the_backoff(error, attempt, rand):
    policy = Retry(attempts=5, delay=1, jitter=True)
    decision = decide(policy, attempt, error, rand=rand)
    assert decision == RetryDecision(True, backoff_delay(policy, attempt, rand), None, None)


def test_class_07_a_registered_retryable_code_is_the_backoff():
    register_error_retry({"APP_BUSY": "retryable"})
    policy = Retry(attempts=5, delay=1, jitter=False)
    assert decide(policy, 3, XJobsError("busy", code="APP_BUSY")) == RetryDecision(
        True, 4, None, None
    )


def test_class_07_plain_error_with_a_stated_delay_waits_the_backoff(harness):
    job_id = plain.enqueue(n=7, after=30).id
    (execution,) = run_until_idle()
    assert (execution.outcome, execution.retry_in, execution.stop_reason) == (
        Outcome.RETRIED,
        1,
        None,
    )
    assert _waits(harness.row(job_id)) == pytest.approx(1, abs=1)


# --- CLASS-08: retry-after counts as an attempt ---------------------------------------------------


def test_class_08_retry_after_counts_as_an_attempt(harness):
    job_id = rate_limited.enqueue(n=8, after=2).id
    (first,) = run_until_idle()
    assert isinstance(first.settle, RetryAt)  # ready again, not parked
    assert first.settle.counts_as_attempt is True
    assert harness.row(job_id).attempt == 1
    harness.advance(3)
    (second,) = run_until_idle()
    assert second.job.attempt == 2
    assert second.settle.counts_as_attempt is True
    assert harness.row(job_id).attempt == 2


# --- CLASS-09 / SE-19: the terminal verdict in last_error ---------------------------------------


def test_class_09_se_19_terminal_appends_the_verdict(harness):
    job_id = declined.enqueue(n=9).id
    (execution,) = run_until_idle()
    row = harness.row(job_id)
    assert row.last_error == "CardDeclined: card declined — not retried: the error is terminal"
    assert execution.error == row.last_error


def test_class_09_retried_and_exhausted_store_the_bare_message(harness):
    job_id = rate_limited.enqueue(n=10, after=30).id
    run_until_idle()
    row = harness.row(job_id)
    assert (row.state, row.last_error) == ("ready", "X_RETRY_AFTER: rate limited")
    for _ in range(2):
        harness.advance(61)
        run_until_idle()
    row = harness.row(job_id)
    assert (row.state, row.stop_reason) == ("dead", "attempts-exhausted")
    assert row.last_error == "X_RETRY_AFTER: rate limited"
    assert "not retried" not in row.last_error


# --- CLASS-10: the attempt-failed log carries stop ----------------------------------------------


def test_class_10_stop_is_logged_only_when_the_job_stops(harness, caplog):
    caplog.set_level(logging.WARNING, logger="django_xjobs")
    rate_limited.enqueue(n=11, after=5)
    declined.enqueue(n=11)
    run_until_idle()
    failed = {
        record.fields["job"]: record
        for record in caplog.records
        if getattr(record, "event", None) == "xjobs.attempt.failed"
    }
    retried = failed["test_classify.rate_limited"]
    assert retried.levelno == logging.WARNING
    assert retried.fields["stop"] is None
    assert "stop=" not in retried.getMessage()
    stopped = failed["test_classify.declined"]
    assert stopped.levelno == logging.ERROR
    assert stopped.fields["stop"] == "terminal"
    assert "stop=terminal" in stopped.getMessage()


def test_class_10_a_timeout_on_the_final_attempt_stops_as_timeout(harness):
    once.enqueue(n=12)
    driver = harness.driver
    relay_staged(driver)
    (claimed,) = driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=60, worker_id="test-classify"
    )
    execution = failure(claimed, JobTimeoutError("slow"), handle=get_job(claimed.name))
    assert execution.stop_reason == "timeout"
    assert execution.outcome == Outcome.DEAD_LETTERED
    assert "not retried" not in execution.error


# --- CLASS-11: dead_letter=False lands in failed --------------------------------------------------


def test_class_11_terminal_without_dead_letter_ends_failed(harness):
    job_id = terminal_kept.enqueue(n=13).id
    (execution,) = run_until_idle()
    assert execution.outcome == Outcome.FAILED
    assert isinstance(execution.settle, Finish)
    assert execution.settle.state == "failed"
    row = harness.row(job_id)
    assert (row.state, row.attempt, row.stop_reason) == ("failed", 1, "terminal")
    assert row.last_error.endswith(" — not retried: the error is terminal")


def test_class_11_exhausted_without_dead_letter_ends_failed(harness):
    job_id = exhausted_kept.enqueue(n=14).id
    (execution,) = run_until_idle()
    assert execution.outcome == Outcome.FAILED
    row = harness.row(job_id)
    assert (row.state, row.stop_reason, row.last_error) == (
        "failed",
        "attempts-exhausted",
        "ConnectionError: down",
    )
    assert harness.driver.reads().dead_letters() == []
