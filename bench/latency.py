"""W3: enqueue-to-start latency. Single enqueues, spaced out, into an idle worker. W5: the
same for an event: publish-to-resumed, each publish releasing one parked waiter."""

from __future__ import annotations

import time
from typing import Any

from bench.run import (
    LATENCY_CONCURRENCY,
    LATENCY_TIMEOUT,
    WorkerThread,
    measured,
    percentile,
    say,
    sql,
    truncate,
    wait_until,
)

EVENT_POLL = 30.0  # seconds: a waiter's own look, the default event_poll (SPEC JOB-06)


def listening() -> bool:
    """Whether some other session of this database is LISTENing on the driver's channel: its
    last statement is that LISTEN, or the control channel's, which the listener sends next."""
    from django_xjobs.drivers.postgres import CHANNEL, CONTROL_CHANNEL

    rows = sql(
        """
        SELECT count(*) FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND query = ANY(%s)
        """,
        [[f"LISTEN {CHANNEL}", f"LISTEN {CONTROL_CHANNEL}"]],
    )
    return rows[0][0] > 0


def enqueue_latency(report: Any, samples: int, spacing_ms: float) -> None:
    """W3: single enqueues into an idle worker; time from the enqueue call to the handler."""
    from bench.jobs import latencies, latency, reset_latencies
    from django_xjobs.worker.worker import Worker

    truncate()
    reset_latencies()
    say(f"W3: {samples} single enqueues {spacing_ms:g} ms apart into an idle worker ...")
    worker = Worker(queues=["default"], concurrency=LATENCY_CONCURRENCY)
    thread = WorkerThread(worker)
    thread.start()
    label = "W3"

    # Idle: the claim loop is running, its listener is subscribed, and warm-up jobs ran.
    warmups = [-1, -2, -3]
    ready = wait_until(lambda: worker.state == "running" and listening(), LATENCY_TIMEOUT)
    if ready:
        for n in warmups:
            latency.enqueue(n=n, enqueued_at=time.time())
        ready = wait_until(
            lambda: set(warmups) <= set(latencies()) and not worker.in_flight(), LATENCY_TIMEOUT
        )
    if not ready or not thread.is_alive():
        report.problem(
            f"{label}: the worker was not idle and listening within {LATENCY_TIMEOUT:g}s"
        )
        thread.finish(report, label)
        return
    reset_latencies()

    spacing = spacing_ms / 1000
    with measured() as window:
        started = time.perf_counter()
        for n in range(samples):
            latency.enqueue(n=n, enqueued_at=time.time())
            pause = started + (n + 1) * spacing - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
        complete = wait_until(lambda: len(latencies()) >= samples, LATENCY_TIMEOUT)
    values = sorted(latencies().values())
    thread.finish(report, label)
    if not complete:
        report.problem(
            f"{label}: only {len(values)} of {samples} jobs started within {LATENCY_TIMEOUT:g}s"
        )
    if not values:
        return
    note = f"{len(values)} samples, {spacing_ms:g} ms apart, concurrency {LATENCY_CONCURRENCY}"
    for pct in (50, 95, 99):
        report.add(f"W3 enqueue->start p{pct}", f"{percentile(values, pct) * 1000:.2f}", "ms", note)
    report.rows[-3].cost = window.cost.per_job(len(values))  # the enqueue and the whole run
    report.add("W3 enqueue->start max", f"{values[-1] * 1000:.2f}", "ms")
    say(
        f"    p50 {percentile(values, 50) * 1000:.2f} ms, p99 {percentile(values, 99) * 1000:.2f} ms"
    )


def event_latency(report: Any, samples: int, spacing_ms: float) -> None:
    """W5: single publishes, each answering one parked waiter of an idle worker; time from the
    ``publish_event`` call to the handler past its ``wait_for_event``, with the default
    ``event_poll`` (30 s)."""
    from bench.jobs import event_waiter, latencies, reset_latencies
    from django_xjobs import publish_event
    from django_xjobs.worker.worker import Worker

    truncate()
    sql("TRUNCATE x_job_steps, x_job_events")
    reset_latencies()
    label = "W5"
    say(f"W5: {samples} waiters parked, then released by single publishes {spacing_ms:g} ms apart")
    worker = Worker(queues=["default"], concurrency=LATENCY_CONCURRENCY)
    thread = WorkerThread(worker)
    thread.start()

    # Idle: every waiter has parked (its run suspended on its waiting step), nothing in flight,
    # and the listener is subscribed.
    ready = wait_until(lambda: worker.state == "running" and listening(), LATENCY_TIMEOUT)
    if ready:
        for n in range(samples):
            event_waiter.enqueue(n=n)

        def parked() -> bool:
            [(count,)] = sql("SELECT count(*) FROM x_jobs WHERE state = 'suspended'")
            return count == samples and not worker.in_flight()

        ready = wait_until(parked, LATENCY_TIMEOUT + samples * 0.05)
    if not ready or not thread.is_alive():
        report.problem(f"{label}: {samples} waiters did not park within the time allowed")
        thread.finish(report, label)
        return

    spacing = spacing_ms / 1000
    # a waiter's own look comes 30 s after it parked: a release lost waits that long
    timeout = EVENT_POLL + LATENCY_TIMEOUT
    with measured() as window:
        started = time.perf_counter()
        for n in range(samples):
            publish_event("bench.released", {"n": n, "sent_at": time.time()})
            pause = started + (n + 1) * spacing - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
        complete = wait_until(lambda: len(latencies()) >= samples, timeout)
    values = sorted(latencies().values())
    thread.finish(report, label)
    if not complete:
        report.problem(f"{label}: only {len(values)} of {samples} waiters resumed in {timeout:g}s")
    if not values:
        return
    note = f"{len(values)} samples, {spacing_ms:g} ms apart, event_poll 30 s"
    for pct in (50, 95, 99):
        report.add(
            f"W5 publish->resumed p{pct}", f"{percentile(values, pct) * 1000:.2f}", "ms", note
        )
    report.rows[-3].cost = window.cost.per_job(len(values))  # the publish and the resumed run
    report.add("W5 publish->resumed max", f"{values[-1] * 1000:.2f}", "ms")
    say(
        f"    p50 {percentile(values, 50) * 1000:.2f} ms, p99 {percentile(values, 99) * 1000:.2f} ms"
    )
