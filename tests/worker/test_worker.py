"""The worker role in process (SPEC §3, §5 backoff, §7, §8 core), on both drivers; and the
lapsed-lease sweep on its own timer (SPEC LEASE-01): a busy worker's claims skip it, an idle
worker's claims make it, and a burst worker never stops before one."""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
import time
import uuid

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from django_xjobs import metrics
from django_xjobs.drivers.contract import Complete, EnqueueRequest, RetryAt
from django_xjobs.run.execution import Outcome
from django_xjobs.testing import run_until_idle
from django_xjobs.worker.heartbeat import Heartbeat
from django_xjobs.worker.run import Run
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.models import Ledger
from tests.support.process import wait_for


def burst(harness, concurrency=4, queues=("default", "other"), **options):
    worker = Worker(
        queues=queues, concurrency=concurrency, driver=harness.driver, burst=True, **options
    )
    return worker.run()


def test_burst_runs_everything_due_and_settles_each_run_once(live_harness):
    """SPEC EXEC-02: a handler that returns settles its run ``done`` with its result, each run
    with one outcome."""
    ids = [jobs.ok.enqueue(n=i).id for i in range(20)]
    stats = burst(live_harness)
    assert stats.outcomes == {Outcome.COMPLETED: 20}
    rows = [live_harness.row(i) for i in ids]
    assert {(r.state, r.attempt) for r in rows} == {("done", 1)}
    assert sorted(r.result["n"] for r in rows) == list(range(20))
    assert stats.state == "stopped"


def test_retry_with_backoff_then_success(live_harness):
    job_id = jobs.flaky.enqueue(n=1, failures=2).id
    assert burst(live_harness).outcomes == {Outcome.RETRIED: 1}
    row = live_harness.row(job_id)
    assert (row.state, row.attempt, row.last_error) == (
        "ready",
        1,
        "ConnectionError: attempt 1 failed",
    )
    assert row.run_at > row.updated_at  # waits out its backoff
    live_harness.advance(1)
    burst(live_harness)
    live_harness.advance(1)
    burst(live_harness)
    row = live_harness.row(job_id)
    assert (row.state, row.attempt, row.result) == ("done", 3, {"attempt": 3})
    assert row.stop_reason is None


def test_attempts_exhausted_dead_letters_with_stop_reason(live_harness):
    """SPEC Q-10: running out of attempts is the stop reason ``attempts-exhausted``, not an
    error of its own: ``last_error`` is the last attempt's."""
    job_id = jobs.fails.enqueue(n=1).id
    for _ in range(3):
        burst(live_harness)
        live_harness.advance(1)
    row = live_harness.row(job_id)
    assert (row.state, row.attempt, row.stop_reason) == ("dead", 3, "attempts-exhausted")
    assert row.last_error == "ValueError: boom 1"  # SPEC CLASS-09: the bare message
    assert [r.id for r in live_harness.driver.reads().dead_letters()] == [job_id]


def test_class_04_se_17_a_terminal_error_stops_on_the_first_attempt(live_harness):
    job_id = jobs.terminal.enqueue(n=1).id
    assert burst(live_harness).outcomes == {Outcome.DEAD_LETTERED: 1}
    row = live_harness.row(job_id)
    assert (row.state, row.attempt, row.max_attempts) == ("dead", 1, 5)
    assert row.stop_reason == "terminal"
    assert row.last_error.startswith("X_TERMINAL: the card was declined")
    assert "not retried" in row.last_error  # SPEC SE-19


def test_q_02_dead_letter_false_ends_in_failed(live_harness):
    job_id = jobs.no_dead_letter.enqueue(n=1).id
    assert burst(live_harness).outcomes == {Outcome.FAILED: 1}
    row = live_harness.row(job_id)
    assert (row.state, row.stop_reason) == ("failed", "attempts-exhausted")
    live_harness.advance(3600)
    assert burst(live_harness).outcomes == {}


def test_a_non_json_result_fails_the_job_terminally(live_harness):
    job_id = jobs.bad_result.enqueue(n=1).id
    burst(live_harness)
    row = live_harness.row(job_id)
    assert (row.state, row.stop_reason) == ("dead", "terminal")
    assert row.last_error.startswith("X_RESULT_INVALID")


def test_a_handler_calling_sys_exit_fails_its_attempt_not_the_worker(live_harness):
    job_id = jobs.exits.enqueue(n=1).id
    assert burst(live_harness).outcomes == {Outcome.DEAD_LETTERED: 1}
    row = live_harness.row(job_id)
    assert (row.state, row.last_error) == ("dead", "SystemExit: 3")


def test_async_handlers_run(live_harness):
    job_id = jobs.async_ok.enqueue(n=4).id
    burst(live_harness)
    assert live_harness.row(job_id).result == {"n": 4}


def test_only_the_named_queues_are_worked(live_harness):
    other = jobs.on_other_queue.enqueue(n=1).id
    mine = jobs.ok.enqueue(n=1).id
    burst(live_harness, queues=("default",))
    assert live_harness.row(mine).state == "done"
    assert live_harness.row(other).state == "ready"


def test_exec_10_an_unknown_job_name_is_parked_never_run_never_lost(live_harness, caplog):
    request = EnqueueRequest(
        name="gone.from.this.deploy",
        queue="default",
        input={},
        input_json="{}",
        idempotency_key="x",
        max_attempts=3,
    )
    job_id = live_harness.driver.jobs().enqueue(request).id
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        assert burst(live_harness).outcomes == {Outcome.SUSPENDED: 1}
    row = live_harness.row(job_id)
    assert (row.state, row.attempt) == ("suspended", 0)  # no attempt burned
    assert row.last_error.startswith("X_JOB_UNKNOWN")
    assert "xjobs.job.unknown" in caplog.text
    assert burst(live_harness).outcomes == {}  # parked: not claimed again at once
    live_harness.advance(30)
    assert burst(live_harness).outcomes == {Outcome.SUSPENDED: 1}
    live_harness.advance(86400)  # past the grace period
    assert burst(live_harness).outcomes == {Outcome.DEAD_LETTERED: 1}
    row = live_harness.row(job_id)
    assert (row.state, row.stop_reason) == ("dead", "terminal")
    assert "still unknown" in row.last_error


@pytest.mark.parametrize("prefetch", [0, 2])
def test_claims_are_sized_to_free_slots_and_the_prefetch(live_harness, prefetch):
    for i in range(7):
        jobs.ok.enqueue(n=i)
    sizes = []
    real_claim = live_harness.driver.runs().claim

    def recording_claim(**kwargs):
        sizes.append(kwargs["limit"])
        return real_claim(**kwargs)

    live_harness.driver.runs().claim = recording_claim
    try:
        stats = burst(live_harness, concurrency=3, prefetch=prefetch)
    finally:
        del live_harness.driver.runs().claim
    assert stats.outcomes == {Outcome.COMPLETED: 7}
    assert sizes[0] == 3 + prefetch
    assert all(1 <= size <= 3 + prefetch for size in sizes)


def test_stop_drains_the_job_in_flight(live_harness):
    token = f"drain-{uuid.uuid4()}"
    job_id = jobs.ledger.enqueue(token=token, hold=0.5, heed_signal=False).id
    worker = Worker(queues=["default"], concurrency=2, driver=live_harness.driver)
    started = threading.Event()
    original = worker._execute

    def execute_and_flag(run):
        started.set()
        original(run)

    worker._execute = execute_and_flag
    thread = threading.Thread(target=worker.run)
    thread.start()
    assert started.wait(20)
    worker.stop()
    thread.join(20)
    assert not thread.is_alive()
    assert worker.state == "stopped"
    assert live_harness.row(job_id).state == "done"


def test_lease_08_11_heartbeat_aborts_a_run_whose_lease_was_taken(live_harness, caplog):
    jobs.ok.enqueue(n=1)
    [job] = live_harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=5, worker_id="w1"
    )
    run = Run(job, "w1")
    beat = Heartbeat(
        live_harness.driver,
        lambda: [run],
        interval=1,
        visibility_timeout=5,
        worker_id="w1",
        database=None,
        submit=lambda renew, run: renew(run),  # renew inline: the test reads the outcome at once
    )
    beat.beat()
    assert not run.signal.is_set()
    live_harness.advance(5)
    [taken] = live_harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=5, worker_id="w2"
    )
    with caplog.at_level(logging.ERROR, logger="django_xjobs"):
        beat.beat()
        beat.beat()
    assert run.lost and run.signal.is_set()
    assert run.signal.reason.code == "X_JOB_LEASE_LOST"
    assert caplog.text.count("xjobs.lease.lost") == 1  # SPEC LEASE-11: reported once
    assert live_harness.row(taken.id).lease_token == taken.lease_token


def test_lease_12_a_settled_run_never_reports_a_lost_lease(live_harness, caplog):
    jobs.ok.enqueue(n=1)
    [job] = live_harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=5, worker_id="w1"
    )
    run = Run(job, "w1")
    live_harness.driver.runs().complete([Complete(job.id, job.lease_token)])
    run.settled.set()
    beat = Heartbeat(
        live_harness.driver,
        lambda: [run],
        interval=1,
        visibility_timeout=5,
        worker_id="w1",
        database=None,
        submit=lambda renew, run: renew(run),  # renew inline: the test reads the outcome at once
    )
    with caplog.at_level(logging.ERROR, logger="django_xjobs"):
        beat.beat()
    assert not run.lost and not run.signal.is_set()
    assert "xjobs.lease.lost" not in caplog.text


@pytest.mark.parametrize("failures", [0, 1])
def test_run_until_idle_reports_outcomes(harness, failures):
    jobs.flaky.enqueue(n=1, failures=failures)
    expected = Outcome.COMPLETED if failures == 0 else Outcome.RETRIED
    assert [e.outcome for e in run_until_idle()] == [expected]


def test_cancel_05_q_08_a_running_job_is_stopped_by_its_next_heartbeat(live_harness, caplog):
    """The next step's function still runs, but its write is refused: the name never appears."""
    token = f"cancel-{uuid.uuid4()}"
    job_id = jobs.step_then_wait.enqueue(token=token).id
    worker = Worker(
        queues=["default"], concurrency=1, driver=live_harness.driver, heartbeat_interval=0.05
    )
    thread = threading.Thread(target=worker.run)
    with caplog.at_level(logging.INFO, logger="django_xjobs"):
        thread.start()
        try:
            # cancelled once step one is recorded, while the run waits: a cancel between the
            # step's body (its ledger row) and its record is refused at that record instead
            run_id = live_harness.row(job_id).run_id
            deadline = time.monotonic() + 20
            while [r.name for r in live_harness.driver.steps().list(run_id)] != ["one"]:
                assert time.monotonic() < deadline, "step one was never recorded"
                time.sleep(0.02)
            assert Ledger.objects.filter(token=token, phase="one").exists()
            live_harness.driver.jobs().cancel(job_id, "operator said stop")
            deadline = time.monotonic() + 20  # its own bound: a slow start must not eat it
            while not Ledger.objects.filter(token=token, phase="two").exists():
                assert time.monotonic() < deadline, _never_stopped(worker, caplog)
                time.sleep(0.02)
        finally:
            worker.stop()
            thread.join(20)
    row = live_harness.row(job_id)
    assert (row.state, row.last_error, row.stop_reason) == (
        "cancelled",
        "operator said stop",
        "cancelled",
    )
    names = [r.name for r in live_harness.driver.steps().list(row.run_id)]
    assert names == ["one"]
    assert worker.outcomes == {Outcome.CANCELLED: 1}
    mine = [r.getMessage() for r in caplog.records if str(job_id) in r.getMessage()]
    assert any("xjobs.job.cancelled" in m for m in mine), mine
    assert not any("xjobs.lease.lost" in m or "settle_refused" in m for m in mine), mine


def _never_stopped(worker: Worker, caplog) -> str:
    """What a failure of the cancel test needs to be understood: the runs' lease state, the log."""
    now = time.monotonic()
    runs = [
        f"attempt={r.job.attempt} renewing={r.renewing} lost={r.lost} cancelled={r.cancelled} "
        f"settling={r.settling} settled={r.settled.is_set()} since_renewal={now - r.renewed_at:.2f}s"
        for r in worker.in_flight()
    ]
    lines = [r.getMessage() for r in caplog.records][-20:]
    return f"the run was never stopped; in flight: {runs}; log: {lines}"


def _lapse_and_reclaim(harness, times):
    """``times`` runs die with their worker: each claim's lease lapses and the row is re-claimed."""
    claimed = None
    for _ in range(times):
        [claimed] = harness.driver.runs().claim(
            queues=["default"], limit=1, visibility_timeout=5, worker_id="doomed"
        )
        harness.advance(5)
    return claimed


def test_lease_18_runs_that_died_with_their_worker_are_never_counted_as_its_crashes(harness):
    """Three runs died with their worker: nothing says they caused it, so the job is not
    dead-lettered for them; its next run goes ahead (alone, where a child can be had)."""
    token = f"victim-{uuid.uuid4()}"
    job_id = jobs.ledger.using().enqueue(token=token).id  # 5 attempts
    _lapse_and_reclaim(harness, 3)  # three runs died; the next claim is the fourth
    [run] = run_until_idle()
    assert run.outcome == Outcome.COMPLETED
    row = harness.row(job_id)
    assert (row.state, row.attempt, row.lease_expiries, row.lapsed_holder) == ("done", 4, 0, None)
    assert [e.outcome for e in row.errors] == ["lapsed"] * 3
    assert len(Ledger.objects.filter(token=token, phase="done")) == 1


def test_lease_17_a_job_at_its_crash_bound_is_dead_lettered_at_its_next_claim(harness):
    """Its counted crashes (runs that died alone) reach ``MAX_LEASE_EXPIRIES`` (3): its next
    claim dead-letters it without running it (a bound lowered since its last crash, too)."""
    job_id = jobs.ledger.using().enqueue(token=f"poison-{uuid.uuid4()}").id  # 5 attempts
    for _ in range(3):
        [held] = harness.driver.runs().claim(
            queues=["default"], limit=1, visibility_timeout=5, worker_id="isolating"
        )
        assert harness.driver.runs().retry(RetryAt(held.id, held.lease_token, crashed=True))
    [run] = run_until_idle()
    assert run.outcome == Outcome.DEAD_LETTERED
    row = harness.row(job_id)
    assert (row.state, row.stop_reason, row.attempt) == ("dead", "terminal", 4)
    assert row.last_error.startswith("X_JOB_CRASHED") and "lease expired" in row.last_error
    assert not Ledger.objects.filter(token__startswith="poison").exists()  # never run again


def test_runs_dying_past_the_attempt_budget_end_as_attempts_exhausted(harness):
    job_id = jobs.ok.enqueue(n=1).id  # 3 attempts
    with override_settings(XJOBS={"QUEUES": ["other"], "OUTBOX": "off", "MAX_LEASE_EXPIRIES": 10}):
        _lapse_and_reclaim(harness, 3)
        [run] = run_until_idle()
    row = harness.row(job_id)
    assert (run.outcome, row.state, row.stop_reason) == (
        Outcome.DEAD_LETTERED,
        "dead",
        "attempts-exhausted",
    )


def test_a_settled_run_resets_the_crash_count(harness):
    job_id = jobs.flaky.enqueue(n=1, failures=2).id
    _lapse_and_reclaim(harness, 1)
    assert harness.row(job_id).lease_expiries == 0  # the first claim is not an expiry
    [run] = run_until_idle()  # re-claimed after one expiry: fails, retried by a live worker
    assert run.outcome == Outcome.RETRIED
    assert harness.row(job_id).lease_expiries == 0


def test_work_02_se_24_a_capped_job_without_a_lease_store_refuses_to_start(live_harness):
    from django_xjobs.errors import ConcurrencyUnenforceableError

    driver = live_harness.driver
    driver.features = dataclasses.replace(driver.features, supports_fleet_slots=False)
    try:
        with pytest.raises(ConcurrencyUnenforceableError) as caught:
            Worker(queues=["default"], driver=driver, burst=True).run()
    finally:
        del driver.features  # back to the class's flags
    assert "tests.jobs.exclusive" in caught.value.message
    assert caught.value.code == "X_JOB_CONCURRENCY_UNENFORCEABLE"


def test_slot_03_work_08_a_full_slot_sheds_the_job_without_an_attempt(live_harness):
    """SPEC STATE-06, SE-58: a shed run is ``ready`` again with no ``last_error`` and its
    attempt given back, never ``suspended``."""
    leases = live_harness.driver.limits()
    assert leases.acquire_slot("job:tests.jobs.exclusive", 1, 30, "elsewhere:1") == 0
    job_id = jobs.exclusive.enqueue(token=f"shed-{uuid.uuid4()}", hold=0).id
    stats = burst(live_harness, concurrency=2)
    assert stats.outcomes == {"shed": 1}
    row = live_harness.row(job_id)
    assert (row.state, row.attempt, row.last_error) == ("ready", 0, None)  # SPEC SE-58
    assert leases.release_slot("job:tests.jobs.exclusive", 0, "elsewhere:1")
    live_harness.advance(5)
    assert burst(live_harness).outcomes == {Outcome.COMPLETED: 1}
    assert leases.held_slots("job:tests.jobs.exclusive") == 0  # SPEC SLOT-02: released at settle


def test_work_10_a_settle_hands_back_limit_and_slot_and_a_failed_release_never_fails_it(
    live_harness, caplog, monkeypatch
):
    """SPEC WORK-10: a settle hands back the run's process limit and fleet slot, and the
    outcome counters and ``xjobs_jobs_total`` move; a release that raises is logged and the
    run still settles."""
    leases = live_harness.driver.limits()
    counted = metrics.value("xjobs_jobs_total", queue="default", outcome="ok")
    with override_settings(XJOBS={"QUEUES": ["other"], "LIMITS": {"global": 1}}):
        job_id = jobs.exclusive.enqueue(token=f"w10-{uuid.uuid4()}", hold=0).id
        worker = Worker(queues=["default"], driver=live_harness.driver, burst=True)
        assert worker.run().outcomes == {Outcome.COMPLETED: 1}
    assert live_harness.row(job_id).state == "done"
    assert worker.limiter.in_flight() == 0
    assert leases.held_slots("job:tests.jobs.exclusive") == 0
    assert metrics.value("xjobs_jobs_total", queue="default", outcome="ok") == counted + 1

    def unreachable(*args):
        raise ConnectionError("the slot store is gone")

    monkeypatch.setattr(leases, "release_slot", unreachable)
    job_id = jobs.exclusive.enqueue(token=f"w10-{uuid.uuid4()}", hold=0).id
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        assert burst(live_harness).outcomes == {Outcome.COMPLETED: 1}
    assert live_harness.row(job_id).state == "done"
    assert "xjobs.worker.lease_release_failed" in caplog.text


def test_work_15_se_48_a_worker_run_in_a_process_installs_no_signal_handler(live_harness):
    """SPEC WORK-15, SE-48: signals belong to the role commands; a ``Worker`` started and
    stopped in a process (this test's) installs no SIGTERM or SIGINT handler and leaves
    none behind."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    jobs.ok.enqueue(n=15)
    worker = Worker(queues=["default"], driver=live_harness.driver)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: worker.stats().outcomes, what="the run to settle")
        assert {sig: signal.getsignal(sig) for sig in before} == before
    finally:
        worker.stop()
        thread.join(20)
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_work_16_stats_answer_the_worker_its_queues_state_runs_and_outcomes(live_harness):
    """SPEC WORK-16: ``Worker.stats()`` answers the worker id, its queues, its state, the runs
    in flight and the counts by outcome."""
    jobs.ok.enqueue(n=16)
    jobs.flaky.enqueue(n=16, failures=1)  # retried a second later: after the burst
    worker = Worker(
        queues=["default", "other"], driver=live_harness.driver, burst=True, worker_id="w16"
    )
    assert worker.stats().state == "idle"
    stats = worker.run()
    assert (stats.worker_id, stats.queues, stats.state, stats.in_flight) == (
        "w16",
        ("default", "other"),
        "stopped",
        0,
    )
    assert stats.outcomes == {Outcome.COMPLETED: 1, Outcome.RETRIED: 1}
    assert worker.stats() == stats


def test_q_12_sync_bodies_run_on_the_pools_threads_with_their_own_sessions(live_harness):
    """SPEC Q-12: a worker runs sync handlers on its pool's threads, each thread with its own
    database connection (never the caller's), and ``async def`` handlers on an event loop."""
    ids = [jobs.where_it_runs.enqueue(n=n).id for n in range(4)]
    coroutine = jobs.where_it_runs_async.enqueue(n=1).id
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        [(ours,)] = cursor.fetchall()
    assert burst(live_harness, concurrency=2).outcomes == {Outcome.COMPLETED: 5}
    ran = [live_harness.row(i).result for i in ids]
    assert {r["thread"] for r in ran} <= {"xjobs-job"}
    assert ours not in {r["backend"] for r in ran}
    assert live_harness.row(coroutine).result == {"loop": True}


def test_slot_01_a_job_without_concurrency_never_touches_the_lease_table(live_harness):
    calls = []
    real_acquire = live_harness.driver.limits().acquire_slot

    def recording_acquire(*args):
        calls.append(args)
        return real_acquire(*args)

    live_harness.driver.limits().acquire_slot = recording_acquire
    try:
        jobs.ok.enqueue(n=1)
        assert burst(live_harness).outcomes == {Outcome.COMPLETED: 1}
    finally:
        del live_harness.driver.limits().acquire_slot
    assert calls == []


def test_limit_01_work_07_a_process_limit_sheds_the_rest(live_harness):
    """SPEC STATE-06: a run shed by a limit goes back to ``ready``."""
    settings = {"QUEUES": ["other"], "OUTBOX": "off", "LIMITS": {"per_queue": {"default": 1}}}
    tokens = [f"lim-{uuid.uuid4()}" for _ in range(2)]
    with override_settings(XJOBS=settings):
        for token in tokens:
            jobs.ledger.enqueue(token=token, hold=0.3, heed_signal=False)
        first = burst(live_harness, concurrency=2)
        live_harness.advance(5)
        second = burst(live_harness, concurrency=2)
    assert first.outcomes == {Outcome.COMPLETED: 1, "shed": 1}
    assert second.outcomes == {Outcome.COMPLETED: 1}
    assert Ledger.objects.filter(token__in=tokens, phase="done").count() == 2


def test_retention_prunes_old_finished_jobs_by_state(transactional_db):
    from datetime import timedelta

    from django_xjobs.drivers.postgres import PostgresDriver
    from django_xjobs.models import Job

    driver = PostgresDriver("default")
    old_done, recent_done = jobs.ok.enqueue(n=1).id, jobs.ok.enqueue(n=2).id
    old_dead = jobs.terminal.enqueue(n=3).id
    live = jobs.ok.using(delay="1h").enqueue(n=4).id
    first = Worker(queues=["default"], driver=driver, burst=True)
    first.run()
    # its own pass (a move to the history, on by default) may outlive run(): were it to read
    # the rows once aged below, it would move them before this test's prune looks
    deadline = time.monotonic() + 20
    while first._retention.running.is_set():
        assert time.monotonic() < deadline, "the first worker's pass never finished"
        time.sleep(0.02)
    Job.objects.filter(id__in=[old_done, old_dead]).update(
        updated_at=timezone.now() - timedelta(days=3)
    )
    # RETENTION without a history (HISTORY=False, the way out): deleted in x_jobs, by state
    settings = {"QUEUES": ["other"], "OUTBOX": "off", "RETENTION": {"done": "1d"}, "HISTORY": False}
    with override_settings(XJOBS=settings):
        worker = Worker(queues=["default"], driver=driver)
        worker._retention.maybe_prune()
        deadline = time.monotonic() + 20
        while worker._retention.running.is_set():
            assert time.monotonic() < deadline, "the prune never finished"
            time.sleep(0.02)
    assert set(Job.objects.values_list("id", flat=True)) == {recent_done, old_dead, live}


# --- the lapsed-lease sweep on its own timer (SPEC LEASE-01) -------------------------------------


class RecordingClaims:
    """The test's driver: remembers each claim's ``lapsed``, its limit and the rows it took."""

    def __init__(self, driver) -> None:
        self.driver = driver
        self.claims: list[tuple[bool, int, int]] = []

    def __getattr__(self, name):
        return getattr(self.driver, name)

    def runs(self):  # its claim stands in for the driver's
        return self

    def claim(self, **kwargs):
        claimed = self.driver.runs().claim(**kwargs)
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
    live_harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=5, worker_id="gone", lapsed=False
    )
    live_harness.advance(5)
    jobs.ok.enqueue(n=base + 1)
    driver = RecordingClaims(live_harness.driver)
    # one thread: the lapsed job (a suspect: its holder is gone) runs alone, after the other
    worker = _burst(driver, concurrency=1, poll_interval=60)
    worker._claims.sweep.idle = False  # mid-stretch: the last sweep was just now
    worker._claims.sweep.swept_at = float("inf")
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
