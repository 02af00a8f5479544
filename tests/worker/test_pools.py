"""Per-queue worker pools (issue 16 item 3, SPEC WORK-01, WORK-04): ``--concurrency
default=8,emails=2`` gives each queue threads of its own, so a backlog in one queue cannot take
the threads another queue needs; a plain number keeps one pool every queue shares. Both drivers
where storage is touched; ``other`` plays the second queue (tests.jobs declares it)."""

from __future__ import annotations

import logging
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_xjobs import Retry, conf
from django_xjobs.conf.concurrency import parse_concurrency
from django_xjobs.declarations.job import job
from django_xjobs.errors import ConfigInvalidError, InvariantError
from django_xjobs.management import checks
from django_xjobs.run.execution import Outcome
from django_xjobs.testing import run_until_idle
from django_xjobs.worker.pools import DEFAULT_SHARE
from django_xjobs.worker.supervisor import child_argv
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.support.process import wait_for

BASE = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "off"}
#: runs of one test share it; a new one per process keeps their keys apart
TOKEN = f"pools-{uuid.uuid4()}"
#: per queue, gated handlers block on these until the test opens them
GATES = {"default": threading.Event(), "other": threading.Event()}
_lock = threading.Lock()
RUNNING: Counter[str] = Counter()
#: the most handlers of each queue that ever ran at once
MOST: Counter[str] = Counter()
STARTED: Counter[str] = Counter()


def _hold(queue: str) -> None:
    with _lock:
        RUNNING[queue] += 1
        STARTED[queue] += 1
        MOST[queue] = max(MOST[queue], RUNNING[queue])
    try:
        GATES[queue].wait(20)  # bounded: a broken test ends rather than hangs
    finally:
        with _lock:
            RUNNING[queue] -= 1


@job(name="test_pools.backlog", idempotency_key="backlog:{token}:{n}")
def backlog(ctx, token: str, n: int):
    _hold("default")


@job(name="test_pools.urgent", idempotency_key="urgent:{token}:{n}", queue="other")
def urgent(ctx, token: str, n: int):
    _hold("other")


@job(
    name="test_pools.overruns",
    idempotency_key="overruns:{token}",
    queue="other",
    timeout="100ms",
    retry=Retry(attempts=1),
)
def overruns(ctx, token: str):
    """Ignores its signal: runs on past its timeout until the test opens the ``other`` gate."""
    _hold("other")


@pytest.fixture(autouse=True)
def _reset():
    for counter in (RUNNING, MOST, STARTED):
        counter.clear()
    for gate in GATES.values():
        gate.clear()
    yield
    for gate in GATES.values():
        gate.set()  # never leave a handler blocked past its test


@contextmanager
def _recording_claims(driver) -> Iterator[list[tuple[tuple[str, ...], int]]]:
    """Record each claim's queues and limit on ``driver`` for the block."""
    calls: list[tuple[tuple[str, ...], int]] = []
    real = driver.runs().claim

    def claim(*, queues, limit, **kwargs):
        calls.append((tuple(queues), limit))
        return real(queues=queues, limit=limit, **kwargs)

    driver.runs().claim = claim
    try:
        yield calls
    finally:
        del driver.runs().claim


# --- the pools at work ------------------------------------------------------------------------


@pytest.mark.parametrize("prefetch", [0, 1])
def test_work_01_04_a_backlog_in_one_queue_leaves_the_other_queue_its_threads(
    live_harness, prefetch
):
    """default=2,other=1: four blocked ``default`` runs older than the ``other`` jobs take
    their two threads only; both ``other`` jobs run, one at a time, while ``default`` is still
    saturated. With one shared pool of three the backlog would take every thread. A run claimed
    ahead (``prefetch``) waits for a thread of its own queue's pool. A thread is refilled as
    soon as its own run ends (SPEC SE-51)."""
    backlog_ids = [backlog.enqueue(token=TOKEN, n=n).id for n in range(4)]
    urgent_ids = [urgent.enqueue(token=TOKEN, n=n).id for n in range(2)]
    with _recording_claims(live_harness.driver) as claims:
        worker = Worker(
            queues=["default", "other"],
            concurrency={"default": 2, "other": 1},
            prefetch=prefetch,
            driver=live_harness.driver,
        )
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            wait_for(lambda: STARTED["default"] == 2 and STARTED["other"] == 1, what="3 handlers")
            # nothing claimed beyond each pool's free threads and the runs it queues ahead
            assert len(worker.in_flight()) == 3 + 2 * prefetch
            GATES["other"].set()
            wait_for(
                lambda: all(live_harness.row(i).state == "done" for i in urgent_ids),
                what="both urgent jobs to finish while the backlog holds its threads",
            )
            assert (STARTED["default"], RUNNING["default"]) == (2, 2)  # still saturated
            GATES["default"].set()
            wait_for(
                lambda: all(live_harness.row(i).state == "done" for i in backlog_ids),
                what="the backlog to drain",
            )
        finally:
            for gate in GATES.values():
                gate.set()
            worker.stop()
            thread.join(20)
    assert not thread.is_alive()
    assert MOST == {"default": 2, "other": 1}  # SPEC WORK-05: never more than the pool
    assert worker.stats().outcomes == {Outcome.COMPLETED: 6}
    # SPEC WORK-04: each claim is for one queue, and asks at most its free threads
    share = {("default",): 2 + prefetch, ("other",): 1 + prefetch}
    assert claims and all(limit <= share[queues] for queues, limit in claims), claims


def test_work_04_a_tick_claims_each_queue_for_at_most_its_threads(harness):
    for n in range(5):
        jobs.ok.enqueue(n=n)
    for n in range(3):
        jobs.on_other_queue.enqueue(n=n)
    with _recording_claims(harness.driver) as claims:
        worker = Worker(
            queues=["default", "other"],
            concurrency="default=3,other=1",
            driver=harness.driver,
            burst=True,
        )
        done = worker.tick()
    assert claims == [(("default",), 3), (("other",), 1)]
    assert Counter(e.job.queue for e in done.executions) == {"default": 3, "other": 1}
    assert {e.outcome for e in done.executions} == {Outcome.COMPLETED}


def test_work_04_a_tick_with_a_limit_claims_no_more_than_it_in_all(harness):
    for n in range(3):
        jobs.ok.enqueue(n=n)
        jobs.on_other_queue.enqueue(n=n)
    with _recording_claims(harness.driver) as claims:
        worker = Worker(
            queues=["default", "other"],
            concurrency={"default": 2, "other": 2},
            driver=harness.driver,
        )
        done = worker.tick(limit=3)
    assert claims == [(("default",), 2), (("other",), 1)]
    assert len(done.executions) == 3


def test_work_01_a_number_keeps_one_claim_for_every_queue(harness):
    """The shared pool (the benchmarked path) is unchanged: one claim over every queue."""
    for n in range(3):
        jobs.ok.enqueue(n=n)
        jobs.on_other_queue.enqueue(n=n)
    with _recording_claims(harness.driver) as claims:
        worker = Worker(queues=["default", "other"], concurrency=4, driver=harness.driver)
        done = worker.tick()
    assert (worker.shares, worker.concurrency) == (None, 4)
    assert claims == [(("default", "other"), 4)]
    assert len(done.executions) == 4


def test_work_01_a_burst_worker_with_pools_drains_every_queue(live_harness):
    GATES["default"].set()
    GATES["other"].set()
    ids = [backlog.enqueue(token=TOKEN, n=n).id for n in range(5)]
    ids += [urgent.enqueue(token=TOKEN, n=n).id for n in range(3)]
    worker = Worker(
        queues=["default", "other"],
        concurrency={"default": 2, "other": 1},
        driver=live_harness.driver,
        burst=True,
    )
    stats = worker.run()
    assert stats.outcomes == {Outcome.COMPLETED: 8}
    assert {live_harness.row(i).state for i in ids} == {"done"}
    assert MOST["default"] <= 2 and MOST["other"] == 1


def test_exec_05_a_body_past_its_timeout_holds_a_thread_of_its_own_queue_only(live_harness):
    """default=1,other=1: an ``other`` body left running past its timeout keeps ``other``'s
    only thread, so the next ``other`` job waits for it; ``default`` runs on meanwhile, and
    once the body returns its pool gets its thread back."""
    GATES["default"].set()
    stuck = overruns.enqueue(token=TOKEN).id
    worker = Worker(
        queues=["default", "other"],
        concurrency={"default": 1, "other": 1},
        prefetch=0,
        poll_interval=0.05,
        driver=live_harness.driver,
    )
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: worker.stats().abandoned == 1, what="the body to be abandoned")
        waiting = urgent.enqueue(token=TOKEN, n=1).id
        ran = backlog.enqueue(token=TOKEN, n=1).id
        wait_for(lambda: live_harness.row(ran).state == "done", what="default to run meanwhile")
        assert (STARTED["other"], live_harness.row(waiting).state) == (1, "ready")
        GATES["other"].set()
        wait_for(lambda: live_harness.row(waiting).state == "done", what="other's thread back")
    finally:
        for gate in GATES.values():
            gate.set()
        worker.stop()
        thread.join(20)
    assert not thread.is_alive()
    assert live_harness.row(stuck).last_error.startswith("X_JOB_TIMEOUT")
    assert MOST == {"default": 1, "other": 1}


def test_run_until_idle_drains_every_queue_with_per_queue_pools_set(harness):
    with override_settings(XJOBS={**BASE, "CONCURRENCY": {"default": 1}}):
        jobs.ok.enqueue(n=1)
        jobs.on_other_queue.enqueue(n=1)
        done = run_until_idle()
    assert sorted(e.job.queue for e in done) == ["default", "other"]


# --- which queues, how many threads -------------------------------------------------------------


def test_work_01_a_queue_the_mapping_leaves_out_gets_five_threads():
    worker = Worker(queues=["default", "other"], concurrency={"default": 2})
    assert worker.shares == {"default": 2, "other": DEFAULT_SHARE} and DEFAULT_SHARE == 5
    assert worker.concurrency == 7


def test_a_mapping_given_to_a_worker_may_not_name_a_queue_it_does_not_work():
    with pytest.raises(InvariantError) as caught:
        Worker(queues=["default"], concurrency={"default": 2, "other": 1})
    assert "other" in caught.value.message
    assert caught.value.hint


def test_the_settings_mapping_may_name_queues_other_workers_work():
    with override_settings(XJOBS={**BASE, "CONCURRENCY": {"default": 2, "other": 1}}):
        assert Worker(queues=["other"]).shares == {"other": 1}
        assert Worker(queues=["default"], concurrency=3).shares is None  # the argument wins


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        (8, 8),
        ("8", 8),
        (" default = 8 , emails=2 ", {"default": 8, "emails": 2}),
        ({"default": 8, "emails": 2}, {"default": 8, "emails": 2}),
    ],
)
def test_work_01_the_concurrency_forms(raw, parsed):
    assert parse_concurrency(raw, field="--concurrency") == parsed


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ("default=0", "queue default needs at least 1 thread"),
        (0, "needs at least 1 thread"),
        ("0", "needs at least 1 thread"),
        ("=3", "'' is not a queue name"),
        ("x=y", "queue x has 'y' threads"),
        ("default=2,default=3", "queue default is named twice"),
        ("default=2,", "'' is not queue=threads"),
        ("lots", "'lots' is not queue=threads"),
        ("bad name=2", "'bad name' is not a queue name"),
        ({}, "names no queue"),
        ({"default": True}, "not a whole number"),
        (2.5, "neither a number"),
        (True, "neither a number"),
    ],
)
def test_bad_concurrency_is_refused_in_one_line_with_a_hint(raw, needle):
    with pytest.raises(InvariantError) as caught:
        parse_concurrency(raw, field="--concurrency")
    assert needle in caught.value.message
    assert caught.value.code == "X_INVARIANT" and "default=8,emails=2" in caught.value.hint
    assert "\n" not in str(caught.value)


def test_the_setting_takes_every_form_and_its_errors_fail_the_system_check():
    with override_settings(XJOBS={**BASE, "CONCURRENCY": "default=3,other=1"}):
        assert conf.get().concurrency == {"default": 3, "other": 1}
        assert checks.check_settings() == []
    with override_settings(XJOBS={**BASE, "CONCURRENCY": {"default": 0}}):
        [error] = checks.check_settings()
        assert error.id == "django_xjobs.E001"
        assert 'XJOBS["CONCURRENCY"]' in error.msg and "at least 1 thread" in error.msg
        assert error.hint
        with pytest.raises(ConfigInvalidError):
            conf.get()


# --- the command line -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrency", "default=0"], "X_INVARIANT: --concurrency='default=0': queue default"),
        (["--concurrency", "x=y"], "X_INVARIANT: --concurrency='x=y': queue x has 'y' threads"),
        (["--concurrency", "nope=2"], "X_QUEUE_UNKNOWN: no job declares queue(s) nope"),
        (
            ["--queues", "default", "--concurrency", "default=2,other=1"],
            "X_INVARIANT: concurrency names queue(s) other this worker does not work",
        ),
        # refused before the supervisor starts children that would each fail on it
        (
            ["--processes", "2", "--queues", "other", "--concurrency", "default=2"],
            "concurrency names queue(s) default",
        ),
    ],
)
def test_bad_concurrency_flags_are_refused_before_anything_starts(args, message):
    with pytest.raises(CommandError) as caught:
        call_command("xjobs_worker", *args)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def _started(caplog) -> logging.LogRecord:
    [record] = [r for r in caplog.records if "xjobs.worker.started" in r.getMessage()]
    return record


def test_work_01_the_flag_names_the_queues_and_their_threads(live_harness, caplog):
    GATES["default"].set()
    GATES["other"].set()
    ids = [backlog.enqueue(token=TOKEN, n=n).id for n in range(3)]
    ids += [urgent.enqueue(token=TOKEN, n=n).id for n in range(2)]
    caplog.set_level(logging.INFO, logger="django_xjobs")
    call_command("xjobs_worker", "--burst", "--concurrency", "default=2,other=1")
    line = _started(caplog).getMessage()
    assert "queues=default,other" in line and "concurrency=default=2,other=1" in line, line
    assert {live_harness.row(i).state for i in ids} == {"done"}
    assert MOST["default"] <= 2 and MOST["other"] == 1


def test_work_01_the_setting_names_the_queues_when_queues_is_not_given(live_harness, caplog):
    """The mapping's keys are the queues a worker without ``--queues`` works: ``default`` is
    not among them here, so its job stays ready."""
    GATES["other"].set()
    left = jobs.ok.enqueue(n=1).id
    done = urgent.enqueue(token=TOKEN, n=1).id
    caplog.set_level(logging.INFO, logger="django_xjobs")
    with override_settings(XJOBS={**BASE, "CONCURRENCY": {"other": 2}}):
        call_command("xjobs_worker", "--burst")
    assert "queues=other " in _started(caplog).getMessage() + " "
    assert (live_harness.row(done).state, live_harness.row(left).state) == ("done", "ready")


def test_each_processes_child_gets_the_same_per_queue_map():
    argv = ["manage.py", "xjobs_worker", "--processes", "2", "--concurrency", "default=2,other=1"]
    assert child_argv(argv) == ["manage.py", "xjobs_worker", "--concurrency", "default=2,other=1"]
