"""Helpers for testing code that enqueues or runs jobs.

``run_until_idle()`` drains what is due in the calling thread, so a test asserts on results
without starting a worker or waiting::

    def test_receipt_is_sent(db):
        send_receipt.enqueue(order_id=7)
        executions = run_until_idle()
        assert [e.outcome for e in executions] == ["completed"]

``run_to_completion()`` runs one job to its end, moving stored times back instead of waiting,
so a three-day ``sleep`` or a ``wait_for_event`` completes at once::

    def test_follow_up(db):
        job_id = follow_up.enqueue(order_id=7).id
        runs = run_to_completion(job_id, events={"order.shipped": {"order_id": 7}})
        assert runs[-1].outcome == "completed"

``memory_driver()`` installs the in-process driver for the duration of a ``with`` block.

Time follows freezegun: under ``freeze_time`` a delay, a retry's backoff, a step's sleep and a
cron occurrence become due when the frozen clock says, on both drivers (``frozen.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from uuid import UUID

from .. import conf
from ..clock import Clock, FrozenClock, system_clock
from ..declarations import registry
from ..drivers import create, get_driver, install, uninstall
from ..drivers.contract import JobDriver
from ..run.execution import Execution
from ..states import FINISHED_STATES
from ..worker.worker import Worker
from . import frozen

if TYPE_CHECKING:
    from ..scheduler.role import Dispatch

# the store keeps in step with freezegun from the first statement of a test that freezes time
frozen.install()


def run_until_idle(
    *,
    queues: Sequence[str] | None = None,
    driver: JobDriver | None = None,
    clock: Clock = system_clock,
    max_runs: int = 1000,
    worker_id: str = "test-worker",
) -> list[Execution]:
    """Claim and run due jobs one at a time until none is due; return every execution.

    Each pass is a ``Worker.tick()`` of a one-thread worker: a job goes through the worker's
    admission (per-process limits, its fleet ``concurrency=`` slot) and its settle. A job shed
    by a full limit or slot is ready again after a poll interval and is not returned. Jobs
    that are retried with a delay are not waited for: move time (or the rows) and call
    it again. ``max_runs`` guards against a job that re-enqueues itself forever::

        send_receipt.enqueue(order_id=7)
        [execution] = run_until_idle()
        assert execution.outcome == "completed"
    """
    driver = driver or get_driver()
    frozen.catch_up()
    names = list(queues or sorted(registry.known_queues(conf.get().queues)))
    # the worker's own parts, one job a pass: its admission applies the per-process limits
    # and the fleet slots, its settler settles, records and sends job_finished
    worker = Worker(queues=names, concurrency=1, driver=driver, clock=clock, worker_id=worker_id)
    executions: list[Execution] = []
    while len(executions) < max_runs:
        # on the test's session as it is, and a body past its timeout is not waited for
        done = worker.tick(limit=1, bounded=False, wait=False)
        if not done.executions and not done.shed:
            return executions
        executions += done.executions
    raise AssertionError(f"run_until_idle ran {max_runs} jobs and the queue is still not idle")


def relay_staged(driver: JobDriver | None = None) -> int:
    """Publish outbox rows this connection can see, as the relay would.

    Inside a test transaction (``TestCase``, pytest's ``db``) nothing commits, so neither the
    on-commit fast path nor a relay process ever sees a staged job; this does, with either
    driver, under the id ``enqueue()`` returned::

        with transaction.atomic():
            result = send_receipt.enqueue(order_id=7)  # staged
        relay_staged()
        assert inspect_job(result.id)["state"] == "ready"
    """
    from ..outbox.relay import publish_visible

    return publish_visible(driver or get_driver(), "test-relay")


def run_to_completion(
    job_id: UUID,
    *,
    clock: Clock = system_clock,
    events: dict[str, Any] | None = None,
    max_rounds: int = 100,
) -> list[Execution]:
    """Run the job ``job_id`` (and anything else due) until it ends; return the executions.

    Between rounds the job's wait is skipped by moving stored times back, as waiting would:
    the row's ``run_at`` (a sleep, an event poll, a retry backoff), and every step's and
    event's times. Steps and events keep to the store's clock, so ``clock`` is only the one the
    executor reads. ``events`` maps an event name to its data, published (once) when a step
    first waits for that name::

        runs = run_to_completion(job_id, events={"order.shipped": {"order_id": 7}})
        assert runs[-1].outcome == "completed"
    """
    from ..steps.events import publish_event

    driver = get_driver()
    executions: list[Execution] = []
    published: set[str] = set()
    for _ in range(max_rounds):
        executions += run_until_idle(driver=driver, clock=clock)
        row = driver.reads().get_job(job_id)
        if row is None:
            raise AssertionError(f"no job {job_id}")
        if row.state in FINISHED_STATES:
            return executions
        wanted = events or {}
        for record in driver.steps().list(row.run_id):
            name = record.event
            if record.status == "waiting" and name in wanted and name not in published:
                published.add(name)
                publish_event(
                    name,
                    wanted[name],
                    correlation_key=record.correlation_key,
                    tenant_id=row.tenant_id,  # the waiting run's: a waiter matches its tenant
                )
        _fast_forward(driver, job_id)
    raise AssertionError(f"job {job_id} did not finish in {max_rounds} rounds")


def _fast_forward(driver: JobDriver, job_id: UUID) -> None:
    """Move every stored time back by as long as the job has left to wait, on the store's
    clock: the same as that much time passing."""
    row = driver.reads().get_job(job_id)
    assert row is not None
    now = driver.steps().now()
    waits = [
        r.wake_at
        for r in driver.steps().list(row.run_id)
        if r.status in ("sleeping", "waiting") and r.wake_at is not None
    ]
    ahead = max((when - now).total_seconds() for when in [row.run_at, *waits])
    if ahead > 0:
        driver.jobs().age(ahead)  # rows, steps and events, as the frozen clock used to move for all


def age_steps(driver: JobDriver, seconds: float) -> None:
    """Make every stored step time ``seconds`` earlier, as if that much time had passed::

        age_steps(get_driver(), 3600)  # a one-hour step sleep is now due

    Works on both drivers; ``run_to_completion`` does this for you.
    """
    driver.jobs().age(seconds, only={"steps"})


def age_events(driver: JobDriver, seconds: float) -> None:
    """Make every stored event ``seconds`` older, as if that much time had passed::

        age_events(get_driver(), 8 * 86400)  # a 7-day event ttl has run out

    Works on both drivers.
    """
    driver.jobs().age(seconds, only={"events"})


def run_crons(cron_names: Sequence[str] | None = None) -> list[Dispatch]:
    """Run one scheduler round now, as the leader: enqueue every cron occurrence that is due on
    the clock (the frozen one under freezegun) and return the dispatches. The first round only
    sets each cron's starting point; a later one enqueues what came due since::

        with freeze_time("2026-03-01 08:59") as freezer:
            run_crons(["nightly_report"])           # starts the cron's schedule
            freezer.tick(timedelta(minutes=1))
            [dispatch] = run_crons(["nightly_report"])
    """
    from ..scheduler.role import Scheduler

    frozen.catch_up()
    names = list(cron_names) if cron_names is not None else None
    return Scheduler(cron_names=names, holder="test-scheduler").tick()


@contextmanager
def memory_driver(clock: Clock | None = None) -> Iterator[JobDriver]:
    """Use a fresh in-process driver inside the block (no table is read or written)::

        with memory_driver() as driver:
            job_id = send_receipt.enqueue(order_id=7).id
            run_until_idle()
            assert driver.reads().get_job(job_id).state == "done"

    The previous driver is put back when the block ends.
    """
    driver = create("memory", clock=clock)
    install(driver)
    try:
        yield driver
    finally:
        uninstall(driver)


__all__ = [
    "FrozenClock",
    "age_events",
    "age_steps",
    "memory_driver",
    "relay_staged",
    "run_crons",
    "run_to_completion",
    "run_until_idle",
]
