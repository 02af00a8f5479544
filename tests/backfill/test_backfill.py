"""Backfills (SPEC §16, BF-01..07; issue 15): a queryset swept in primary-key pages, a durable
step per page, paced, recorded once per environment in the ``x_backfills`` ledger.

Fixtures are in tests/backfills.py; each case runs on both drivers (the ``harness``)."""

from __future__ import annotations

import logging
import math
import sys
import uuid
from dataclasses import replace

import pytest
from django.db.models import QuerySet
from django.test import override_settings

from django_xjobs import backfill as declare_backfill
from django_xjobs import metrics
from django_xjobs.backfills import Backfill, _throttle, get_backfill, registered_backfills
from django_xjobs.declarations import registry
from django_xjobs.drivers import install, uninstall
from django_xjobs.drivers.contract import DriverFeatures
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.errors import JobAbortedError, JobCancelledError, JobDefinitionError
from django_xjobs.run.execution import Outcome
from django_xjobs.run.stop import StopSignal
from django_xjobs.testing import run_until_idle
from tests import backfills
from tests.models import Order, Token

SETTINGS = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "off"}


def orders(n: int) -> list[Order]:
    return Order.objects.bulk_create([Order() for _ in range(n)])


def steps_of(harness, job_id) -> list:
    return harness.driver.steps().list(harness.row(job_id).run_id)


def ledger(harness, name: str):
    return harness.driver.backfills().history(name)


# --- BF-01: an ordinary job ---------------------------------------------------------------------


def test_bf_01_a_backfill_is_an_ordinary_job_keyed_by_its_name(harness):
    handle = registry.get_job("tests.fill_currency")
    assert handle is backfills.fill_currency
    assert handle.backfill.name == "tests.fill_currency"
    first = backfills.fill_currency.enqueue()
    again = backfills.fill_currency.enqueue(force=True)  # one live pass per name
    assert again.id == first.id and again.deduped
    row = harness.row(first.id)
    assert (row.name, row.idempotency_key, row.input) == (
        "tests.fill_currency",
        "tests.fill_currency",
        {"force": False},
    )
    assert "tests.fill_currency" in [b.name for b in registered_backfills()]
    assert get_backfill("tests.nope") is None


def test_bf_01_queue_retry_and_timeout_are_passed_to_the_job():
    from django_xjobs import Retry

    def fix(ctx, rows):
        return None

    handle = declare_backfill(
        name="tests.passthrough",
        queryset=lambda: Order.objects.all(),
        queue="other",
        retry=Retry(attempts=7),
        timeout="1h",
    )(fix)
    try:
        assert (handle.queue, handle.retry.attempts, handle.timeout) == ("other", 7, 3600.0)
    finally:
        registry.unregister("tests.passthrough")


# --- BF-02: declarations ------------------------------------------------------------------------


def _fix(ctx, rows):
    return None


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"batch": 0}, "batch=0"),
        ({"batch": 1.5}, "batch=1.5"),
        ({"batch": True}, "batch=True"),
        ({"rate": 0}, "rate=0"),
        ({"rate": -1}, "rate=-1"),
        ({"rate": math.inf}, "rate=inf"),
        ({"rate": math.nan}, "rate=nan"),
        ({"rate": "5"}, "rate='5'"),
        ({"queryset": Order.objects.all()}, "must be a callable"),
        ({"environments": "production"}, "list of names"),
        ({"environments": []}, "never run"),
        ({"requires": ("tests", "0099_nope")}, "names no migration"),
        ({"requires": ("nope", "0001_initial")}, "no app labelled 'nope'"),
        ({"requires": "tests.0002_orders"}, "(app_label, migration_name)"),
        ({"name": ""}, "non-empty string"),
    ],
)
def test_bf_02_a_bad_declaration_is_refused_at_import(options, says):
    arguments = {"name": "tests.bad", "queryset": lambda: Order.objects.all(), **options}
    with pytest.raises(JobDefinitionError, match="X_INVARIANT") as error:
        declare_backfill(**arguments)(_fix)
    assert says in str(error.value) and error.value.hint
    assert registry.get_job("tests.bad") is None


def test_bf_02_the_handler_takes_ctx_and_rows():
    def three(ctx, rows, extra):
        return None

    async def coroutine(ctx, rows):
        return None

    for handler in (three, coroutine):
        with pytest.raises(JobDefinitionError, match="X_INVARIANT"):
            declare_backfill(name="tests.bad", queryset=lambda: Order.objects.all())(handler)


# --- BF-03: pages are steps ---------------------------------------------------------------------


def test_bf_03_every_page_is_a_step_holding_the_cursor_and_totals_never_the_rows(harness):
    made = orders(7)
    job_id = backfills.fill_currency.enqueue().id
    [execution] = run_until_idle()
    assert execution.outcome == Outcome.COMPLETED
    assert not Order.objects.filter(currency__isnull=True).exists()
    assert set(Order.objects.values_list("handled", flat=True)) == {1}
    records = steps_of(harness, job_id)
    assert [r.name for r in records] == ["batch:0", "batch:1", "batch:2"]
    assert [r.output for r in records] == [
        {"cursor": made[2].pk, "rows": 3, "pages": 1, "done": False},
        {"cursor": made[5].pk, "rows": 6, "pages": 2, "done": False},
        {"cursor": made[6].pk, "rows": 7, "pages": 3, "done": True},
    ]
    assert harness.row(job_id).result == {"rows": 7, "pages": 3}


def test_bf_03_a_pass_that_died_resumes_at_the_next_page(harness):
    orders(9)
    job_id = backfills.fill_currency.enqueue().id
    backfills.FAIL_ON_CALL["n"] = 2  # the second page raises
    try:
        [first] = run_until_idle()
    finally:
        backfills.FAIL_ON_CALL["n"] = None
    assert first.outcome == Outcome.RETRIED
    assert Order.objects.filter(currency__isnull=True).count() == 6
    harness.advance(60)
    [second] = run_until_idle()
    assert second.outcome == Outcome.COMPLETED and second.replayed == ("batch:0",)
    assert set(Order.objects.values_list("handled", flat=True)) == {1}  # no page twice
    [row] = ledger(harness, "tests.fill_currency")
    assert (row.status, row.rows_processed, row.pages) == ("completed", 9, 3)
    assert harness.row(job_id).state == "done"


def test_bf_03_a_table_keyed_by_uuid_pages_by_its_text_cursor(harness):
    Token.objects.bulk_create([Token(id=uuid.uuid4()) for _ in range(5)])
    job_id = backfills.finish_tokens.enqueue().id
    run_until_idle()
    assert not Token.objects.filter(done=False).exists()
    records = steps_of(harness, job_id)
    assert [r.output["rows"] for r in records] == [2, 4, 5]
    ordered = sorted(str(t) for t in Token.objects.values_list("id", flat=True))
    assert records[0].output["cursor"] == ordered[1]


def test_an_empty_source_completes_with_one_empty_page(harness):
    job_id = backfills.fill_currency.enqueue().id
    [execution] = run_until_idle()
    assert execution.outcome == Outcome.COMPLETED
    assert [r.output for r in steps_of(harness, job_id)] == [
        {"cursor": None, "rows": 0, "pages": 0, "done": True}
    ]


# --- BF-04: the pace ----------------------------------------------------------------------------


def test_bf_04_replayed_pages_pay_no_wait(harness, monkeypatch):
    paced: list[int] = []
    original = _throttle

    def watched(spec, ctx, pace):
        paced.append(Order.objects.filter(currency__isnull=True).count())
        original(spec, ctx, pace)

    monkeypatch.setattr(sys.modules["django_xjobs.backfills"], "_throttle", watched)
    orders(9)
    backfills.fill_currency.enqueue()
    backfills.FAIL_ON_CALL["n"] = 3
    try:
        run_until_idle()
    finally:
        backfills.FAIL_ON_CALL["n"] = None
    assert paced == [9, 6, 3]  # three pages began; the third died
    paced.clear()
    harness.advance(60)
    run_until_idle()
    assert paced == [3, 0]  # only the page that died and the empty end: none replayed


def test_bf_04_a_cancel_during_the_wait_is_x_aborted():
    spec = replace(get_backfill("tests.fill_currency"), rate=0.001)  # 1000 s between pages
    signal = StopSignal()
    signal.abort(JobCancelledError("cancelled by an operator"))

    class Ctx:
        pass

    ctx = Ctx()
    ctx.signal = signal
    pace = {"last": None}
    _throttle(spec, ctx, pace)  # the first page never waits
    with pytest.raises(JobAbortedError, match="X_ABORTED") as error:
        _throttle(spec, ctx, pace)
    assert "cancelled by an operator" in error.value.hint


# --- BF-05: the ledger --------------------------------------------------------------------------


def test_bf_05_a_completed_pass_blocks_a_new_one_until_force(harness):
    orders(4)
    backfills.fill_currency.enqueue()
    run_until_idle()
    again = backfills.fill_currency.enqueue().id
    [refused] = run_until_idle()
    assert refused.outcome == Outcome.DEAD_LETTERED and refused.stop_reason == "terminal"
    assert harness.row(again).last_error.startswith("X_BACKFILL_APPLIED")
    assert len(ledger(harness, "tests.fill_currency")) == 1  # the refused pass wrote no row
    orders(2)
    forced = backfills.fill_currency.enqueue(force=True).id
    [ran] = run_until_idle()
    assert ran.outcome == Outcome.COMPLETED and harness.row(forced).state == "done"
    newest, oldest = ledger(harness, "tests.fill_currency")
    assert (newest.status, newest.rows_processed, oldest.rows_processed) == ("completed", 2, 4)


def test_bf_05_only_a_completed_pass_blocks(harness):
    orders(3)
    backfills.forgets_rows.enqueue()
    run_until_idle()  # stalled: the ledger says failed
    [failed] = ledger(harness, "tests.forgets_rows")
    assert failed.status == "failed" and failed.error.startswith("X_BACKFILL_STALLED")
    Order.objects.update(currency="EUR")
    backfills.forgets_rows.enqueue()
    [execution] = run_until_idle()
    assert execution.outcome == Outcome.COMPLETED


def test_bf_05_a_resumed_pass_adopts_its_own_row(harness):
    orders(6)
    job_id = backfills.fill_currency.enqueue().id
    backfills.FAIL_ON_CALL["n"] = 2
    try:
        run_until_idle()
    finally:
        backfills.FAIL_ON_CALL["n"] = None
    [failed] = ledger(harness, "tests.fill_currency")
    assert (failed.status, failed.rows_processed, failed.pages) == ("failed", 3, 1)
    assert failed.last_cursor is not None and failed.job_id == job_id
    harness.advance(60)
    run_until_idle()
    [done] = ledger(harness, "tests.fill_currency")
    assert done.run_id == failed.run_id and done.started_at == failed.started_at
    assert (done.status, done.rows_processed, done.last_cursor, done.error) == (
        "completed",
        6,
        None,
        None,
    )


def test_bf_05_a_changed_declaration_warns_and_does_not_block(harness, caplog):
    earlier = uuid.uuid4()  # a pass completed by an earlier declaration of the backfill
    harness.driver.backfills().start(
        run_id=earlier,
        job_id=uuid.uuid4(),
        name="tests.fill_currency",
        checksum="f" * 16,
        app_version="an earlier release",
        environment=None,
    )
    harness.driver.backfills().finish(earlier, status="completed")
    orders(1)
    backfills.fill_currency.enqueue(force=True)
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        [execution] = run_until_idle()
    assert execution.outcome == Outcome.COMPLETED
    [warning] = [
        r.getMessage() for r in caplog.records if "xjobs.backfill.changed" in r.getMessage()
    ]
    assert "f" * 16 in warning and get_backfill("tests.fill_currency").checksum in warning


# --- BF-06: environments, a stall, the count ----------------------------------------------------


def test_bf_06_an_excluded_environment_is_refused_before_the_ledger_is_written(harness):
    orders(2)
    job_id = backfills.production_only.enqueue().id
    with override_settings(XJOBS={**SETTINGS, "ENVIRONMENT": "staging"}):
        [execution] = run_until_idle()
    assert execution.outcome == Outcome.DEAD_LETTERED and execution.stop_reason == "terminal"
    assert harness.row(job_id).last_error.startswith("X_BACKFILL_ENVIRONMENT")
    assert ledger(harness, "tests.production_only") == []
    assert Order.objects.filter(currency__isnull=True).count() == 2


def test_bf_06_a_listed_environment_runs_and_is_recorded(harness):
    orders(2)
    backfills.production_only.enqueue()
    with override_settings(XJOBS={**SETTINGS, "ENVIRONMENT": "production"}):
        [execution] = run_until_idle()
    assert execution.outcome == Outcome.COMPLETED
    [row] = ledger(harness, "tests.production_only")
    assert (row.environment, row.status) == ("production", "completed")


def test_bf_06_a_pass_that_leaves_rows_matching_is_stalled_and_terminal(harness):
    orders(5)
    job_id = backfills.forgets_rows.enqueue().id
    [execution] = run_until_idle()
    assert execution.outcome == Outcome.DEAD_LETTERED and execution.stop_reason == "terminal"
    assert harness.row(job_id).last_error.startswith("X_BACKFILL_STALLED")
    assert "5 row(s)" in harness.row(job_id).last_error


class _BadCount(QuerySet):
    def count(self) -> int:
        return -1


def test_bf_06_a_count_that_is_not_a_row_count_is_x_invariant():
    spec = replace(
        get_backfill("tests.fill_currency"),
        queryset=lambda: _BadCount(model=Order),
    )
    with pytest.raises(Exception, match=r"X_INVARIANT.*count"):
        spec.remaining()


def test_a_queryset_of_values_is_x_invariant_before_any_page():
    spec = replace(get_backfill("tests.fill_currency"), queryset=lambda: Order.objects.values())
    with pytest.raises(Exception, match=r"X_INVARIANT.*values\(\)") as error:
        spec.source()
    assert ".only(" in error.value.hint


def test_a_queryset_factory_that_returns_no_queryset_is_x_invariant():
    spec: Backfill = replace(get_backfill("tests.fill_currency"), queryset=lambda: [1, 2])
    with pytest.raises(Exception, match=r"X_INVARIANT.*not a QuerySet"):
        spec.source()


# --- BF-07: a driver without a ledger -----------------------------------------------------------


class _NoLedger(MemoryDriver):
    features = DriverFeatures(supports_backfill_ledger=False)


@pytest.mark.django_db
def test_bf_07_a_driver_without_a_ledger_runs_passes_with_no_bookkeeping():
    driver = _NoLedger()
    install(driver)
    try:
        orders(4)
        backfills.fill_currency.enqueue()
        [execution] = run_until_idle()
        assert execution.outcome == Outcome.COMPLETED
        assert not Order.objects.filter(currency__isnull=True).exists()
        backfills.fill_currency.enqueue()  # nothing recorded, so nothing blocks a second pass
        [again] = run_until_idle()
        assert again.outcome == Outcome.COMPLETED
    finally:
        uninstall(driver)


# --- metrics ------------------------------------------------------------------------------------


def test_a_pass_counts_its_rows_and_pages(harness):
    rows = metrics.value("xjobs_backfill_rows_total", backfill="tests.fill_currency")
    pages = metrics.value("xjobs_backfill_pages_total", backfill="tests.fill_currency")
    orders(4)
    backfills.fill_currency.enqueue()
    run_until_idle()
    assert metrics.value("xjobs_backfill_rows_total", backfill="tests.fill_currency") == rows + 4
    assert metrics.value("xjobs_backfill_pages_total", backfill="tests.fill_currency") == pages + 2


def test_a_failed_pass_stores_an_unstorable_error_escaped(harness):
    """The ledger's error is a stored text (issue 24 §3): a NUL or a lone surrogate in it
    must not make the ledger's own write fail and leave the pass marked running."""
    orders(4)
    backfills.fill_currency.enqueue()
    backfills.FAIL_ON_CALL["n"] = 1
    backfills.FAIL_MESSAGE["text"] = "died \x00 on \ud83d"
    try:
        run_until_idle()
    finally:
        backfills.FAIL_ON_CALL["n"] = None
        backfills.FAIL_MESSAGE["text"] = "the pass died on this page"
    [failed] = ledger(harness, "tests.fill_currency")
    assert failed.status == "failed"
    assert failed.error == "ConnectionError: died \\x00 on \\ud83d"
