"""FLOOR: what the drain's two statements cost a job on their own, with no worker around them.

One thread claims ready ``noop`` rows through the driver, ``--floor-batch`` at a time, until none
is left; then, on a fresh fill, claims a batch and acks it, again and again: the same ``claim``
and ``ack`` statements a worker sends, with no job thread, no run, no handler context, no
settler, no heartbeat. Both loops are measured (statements, Python CPU, PostgreSQL CPU per
job); the ack's share is the difference. Acking only after every row was claimed is not
measured: in the one run tried it cost the ack about five times the PostgreSQL CPU (the cause
was not examined), and no worker acks that way (it acks what it claimed a moment ago).

Read beside W2: what W2 spends per job above these rows is the worker's own machinery, and these
rows are what no worker built on these two statements can go below (bench/README.md, "The
floor under the drain").
"""

from __future__ import annotations

import time
from typing import Any

from bench.run import Report, fill_ready, measured, say, state_counts, truncate

VIS = 300.0  # long enough that no claimed row lapses between the two phases


def _claim(driver: Any, batch: int) -> list[Any]:
    return driver.runs().claim(
        queues=["default"], limit=batch, visibility_timeout=VIS, worker_id="floor", lapsed=False
    )


def _ack(driver: Any, runs: list[Any]) -> None:
    from django_xjobs.drivers.contract import Complete

    acked = driver.runs().complete([Complete(run.id, run.lease_token) for run in runs])
    if len(acked) != len(runs):
        raise RuntimeError(f"FLOOR: {len(runs) - len(acked)} of {len(runs)} acks were refused")


def floor(report: Report, count: int, batch: int, rounds: int) -> None:
    """FLOOR rows: claim alone, then claim and ack alternated; ``rounds`` times."""
    from django_xjobs.drivers import get_driver

    driver = get_driver()
    for round_ in range(1, rounds + 1):
        truncate()
        fill_ready(count)
        say(f"FLOOR {round_}/{rounds}: claiming {count} jobs, {batch} a statement ...")
        held = 0
        with measured() as claims:
            started = time.perf_counter()
            while got := _claim(driver, batch):
                held += len(got)
            claimed_in = time.perf_counter() - started
        if held != count:
            report.problem(f"FLOOR: expected to claim {count} rows, claimed {held}")
        truncate()
        fill_ready(count)
        done = 0
        with measured() as both:
            started = time.perf_counter()
            while got := _claim(driver, batch):
                _ack(driver, got)
                done += len(got)
            both_in = time.perf_counter() - started
        _check(report, count, done)
        for label, seconds, window in (
            ("claim only", claimed_in, claims),
            ("claim + ack", both_in, both),
        ):
            report.add(
                f"FLOOR {label}, batch {batch}",
                f"{count / seconds:,.0f}",
                "jobs/s",
                f"round {round_}: {count} jobs in {seconds:.2f}s, one thread, no worker",
                window.cost.per_job(count),
            )


def _check(report: Report, count: int, settled: int) -> None:
    stored = state_counts()
    if settled != count or stored != {"done": count}:
        report.problem(f"FLOOR: expected {count} done rows, settled {settled}, found {stored}")
