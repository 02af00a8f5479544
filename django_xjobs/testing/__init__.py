"""Helpers for testing code that enqueues or runs jobs.

``run_until_idle()`` drains what is due in the calling thread, so a test asserts on results
without starting a worker or waiting::

    def test_receipt_is_sent(db):
        send_receipt.enqueue(order_id=7)
        executions = run_until_idle()
        assert [e.outcome for e in executions] == ["completed"]

``memory_driver()`` installs the in-process driver for the duration of a ``with`` block.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .. import conf, registry
from ..clock import system_clock
from ..context import Signal
from ..drivers import get_driver, install, uninstall
from ..drivers.base import Ack, JobDriver
from ..drivers.memory import MemoryDriver
from ..execute import Execution, Outcome, execute


def run_until_idle(
    *,
    queues: Sequence[str] | None = None,
    driver: JobDriver | None = None,
    clock: Any = system_clock,
    max_runs: int = 1000,
    worker_id: str = "test-worker",
) -> list[Execution]:
    """Claim and run due jobs one at a time until none is due; return every execution.

    Jobs that are retried with a delay are not waited for: move time (or the rows) and call
    it again. ``max_runs`` guards against a job that re-enqueues itself forever.
    """
    driver = driver or get_driver()
    names = list(queues or sorted(registry.known_queues(conf.get().queues)))
    executions: list[Execution] = []
    while len(executions) < max_runs:
        claimed = driver.claim(
            queues=names,
            limit=1,
            visibility_timeout=conf.get().visibility_timeout,
            worker_id=worker_id,
        )
        if not claimed:
            return executions
        execution = execute(claimed[0], Signal(), clock.now())
        if isinstance(execution.settle, Ack):
            held = claimed[0].id in driver.ack([execution.settle])
        else:
            held = driver.nack(execution.settle)
        if not held:
            execution = Execution(
                Outcome.LEASE_LOST, execution.job, execution.duration, execution.settle
            )
        executions.append(execution)
    raise AssertionError(f"run_until_idle ran {max_runs} jobs and the queue is still not idle")


@contextmanager
def memory_driver(clock: Any = None) -> Iterator[MemoryDriver]:
    """Use a fresh in-process driver inside the block."""
    driver = MemoryDriver(clock=clock)
    install(driver)
    try:
        yield driver
    finally:
        uninstall(driver)


__all__ = ["memory_driver", "run_until_idle"]
