"""The worker role: claim due jobs into free threads, run them, settle them in batches."""

from __future__ import annotations

import contextlib
import functools
import logging
import queue as queue_module
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connections

from .. import conf, log
from ..clock import Clock, system_clock
from ..declarations import registry
from ..drivers import get_driver
from ..drivers.connections import close_stale_connections, role_connections
from ..drivers.contract import JobDriver, Shed
from ..errors import ConcurrencyUnenforceableError, InvariantError
from ..limits.worker import Limiter, LimitPlan
from ..run.execute import execute
from ..run.execution import Execution, Outcome
from ..run.verdicts import cut_short, failure
from .admission import Admission
from .config import WorkerConfig
from .drain import Drain, Running, unstarted
from .guard import SettleGuard
from .heartbeat import Heartbeat
from .inflight import InFlight
from .isolation import Isolation
from .loop import ClaimLoop
from .paused import PausedQueues
from .pools import Lane, Urgent, describe
from .prefetch import Prefetch
from .presence import WorkerPresence
from .retention import Retention
from .run import Run
from .settling import Settler, refused
from .tick import Tick, Ticker
from .watchdog import Watchdog
from .window import ClaimWindow

#: the longest pause between single claims while job connections are refused: short, as the
#: claim that ends it is the probe that finds a free connection again (issue 25 item 2)
_WINDOW_PAUSE_CAP = 2.0


@dataclass
class WorkerStats:
    worker_id: str
    queues: tuple[str, ...]
    state: str
    in_flight: int
    outcomes: Counter[str] = field(default_factory=Counter)
    #: bodies past their timeout that still run, each holding its capacity (SPEC EXEC-05)
    abandoned: int = 0


class Worker:
    """Claims jobs from ``queues`` into ``concurrency`` threads until stopped.

    ``concurrency`` is one pool every queue shares (an int), or threads per queue (a mapping,
    or ``"default=8,emails=2"``; a queue it leaves out gets 5, SPEC WORK-01): each queue then
    claims only into its own free threads, so a backlog in one never starves another
    (worker/pools.py).

    * The claim loop keeps claimed runs queued ahead of the threads (worker/prefetch.py), so a
      thread whose handler returns starts the next run at once instead of waiting on a claim
      (SPEC WORK-04/05, SE-51): a long job never holds back the others, and no more than
      ``concurrency`` handlers ever run at once.
    * A thread is free the moment its handler returns: the ack is the settler's business.
    * Each run, queued or running or settling, is fenced by its lease token; a heartbeat
      thread renews the leases.
    * Results are settled by one thread, many acks per statement.
    * ``stop()`` drains: no new claims, queued runs go back unstarted (no attempt spent),
      running ones finish and settle, then it returns.

    ``burst=True`` returns once nothing is due and nothing is running.

    It is composed of parts, each handed what it needs: ``config`` (worker/config.py) is what
    it was given, resolved once; ``runs`` (worker/inflight.py) owns the runs in flight;
    ``admission`` admits or sheds each claimed job into it; ``settler`` settles finished runs
    and hands back what they held; ``tick()`` drives the same two in the calling thread
    (worker/tick.py); the claim loop (worker/loop.py) claims into the pools' free room, and the
    drain (worker/drain.py) hands back what is queued and stops what a run started. The worker
    itself keeps the job threads and its state.
    """

    def __init__(
        self,
        *,
        queues: Sequence[str],
        concurrency: int | Mapping[str, int] | str | None = None,
        driver: JobDriver | None = None,
        visibility_timeout: float | None = None,
        heartbeat_interval: float | None = None,
        poll_interval: float | None = None,
        worker_id: str | None = None,
        burst: bool = False,
        clock: Clock = system_clock,
        stall_timeout: float | None = None,
        prefetch: int | str | None = None,
    ) -> None:
        #: what this worker is: its queues, pools, timeouts and id (worker/config.py)
        self.config = WorkerConfig.resolve(
            queues=queues,
            concurrency=concurrency,
            visibility_timeout=visibility_timeout,
            heartbeat_interval=heartbeat_interval,
            poll_interval=poll_interval,
            worker_id=worker_id,
            stall_timeout=stall_timeout,
            prefetch=prefetch,
        )
        self.driver = driver or get_driver()
        self.burst = burst
        self.clock = clock
        self.state = "idle"
        self.outcomes: Counter[str] = Counter()
        self.watchdog: Watchdog | None = None
        self._assemble()

    def _assemble(self) -> None:
        """Build the worker's parts by name, each handed what it needs (none is handed the
        worker): the runs they share, the parts that admit and settle them, the drain, the
        claim loop."""
        self._lanes = self.config.lanes
        self._start_lock = threading.Lock()
        self._database = self.driver.database
        self._threads: list[threading.Thread] = []
        self._wake = threading.Event()
        self._draining = threading.Event()
        self.limiter = Limiter(conf.get().limits, self.clock)
        #: the runs this worker holds: the one object its parts share (worker/inflight.py)
        self.runs = InFlight(self._lanes)
        #: runs suspects in child processes (worker/isolation.py), listed for /readyz
        self.isolation = Isolation(
            worker_id=self.worker_id, visibility_timeout=self.visibility_timeout
        )
        #: what an operator paused, left out of every claim and tick (worker/paused.py)
        self._paused = PausedQueues(
            self.driver, self.queues, interval=self.poll_interval, worker_id=self.worker_id
        )
        self._assemble_runs()
        self._drainer = Drain(self.runs, self.admission, self.settler, worker_id=self.worker_id)
        self._assemble_claims()

    def _assemble_runs(self) -> None:
        """What admits a claimed job, settles its run, and does both in ``tick()``."""
        self._guard = SettleGuard(
            runs=self.runs.by_token,
            lock=self.runs.lock,
            visibility_timeout=self.visibility_timeout,
            stall_timeout=self.stall_timeout,
            worker_id=self.worker_id,
        )
        self.admission = Admission(
            self.runs,
            self.driver,
            self.limiter,
            worker_id=self.worker_id,
            poll_interval=self.poll_interval,
            visibility_timeout=self.visibility_timeout,
            outcomes=self.outcomes,
            watch=self._watch,
        )
        self.settler = Settler(
            self.runs,
            self.driver,
            self._guard,
            worker_id=self.worker_id,
            outcomes=self.outcomes,
            wake=self._wake,
            database=self._database,
            restart=self._restart_thread,
            watch=self._watch,
            # the claim loop, built next, is told the database answers when owed settles land
            answered=lambda: self._claims.on_answered(),
        )
        self._ticker = Ticker(
            self.runs,
            self.driver,
            self.admission,
            self.settler,
            body=functools.partial(self._body, fresh_connection=False),
            paused=self._paused,
            worker_id=self.worker_id,
            visibility_timeout=self.visibility_timeout,
            stall_timeout=self.stall_timeout,
        )

    def _assemble_claims(self) -> None:
        """What the claim loop claims within, and the loop itself (worker/loop.py)."""
        #: narrows the claims while job connections are refused (issue 25 item 2)
        self._window = ClaimWindow(
            self.concurrency,
            base=self.poll_interval,
            cap=_WINDOW_PAUSE_CAP,
            worker_id=self.worker_id,
        )
        self._retention = Retention(self.driver)
        #: declared limits and operators' caps, decided in the claim (limits/worker.py)
        self._limits = LimitPlan(self.driver, self.queues, interval=self.poll_interval)
        self._claims = ClaimLoop(
            self.runs,
            self.driver,
            self.admission,
            self.settler,
            config=self.config,
            guard=self._guard,
            paused=self._paused,
            limits=self._limits,
            retention=self._retention,
            window=self._window,
            wake=self._wake,
            draining=self._draining,
            watch=self._watch,
        )

    # --- what it is (worker/config.py) ------------------------------------------------------

    @property
    def queues(self) -> tuple[str, ...]:
        return self.config.queues

    @property
    def concurrency(self) -> int:
        """Threads in all: the most handlers that ever run at once."""
        return self.config.concurrency

    @property
    def shares(self) -> dict[str, int] | None:
        """Threads per queue with per-queue pools; None for one pool every queue shares."""
        return self.config.shares

    @property
    def prefetch(self) -> Prefetch:
        """Claimed runs queued ahead of the threads (the first pool's, with per-queue pools)."""
        return self.config.prefetch

    @property
    def visibility_timeout(self) -> float:
        return self.config.visibility_timeout

    @property
    def heartbeat_interval(self) -> float:
        return self.config.heartbeat_interval

    @property
    def stall_timeout(self) -> float:
        """SPEC HANG-04: a claim or a settle blocked this long ends the process."""
        return self.config.stall_timeout

    @property
    def poll_interval(self) -> float:
        return self.config.poll_interval

    @property
    def worker_id(self) -> str:
        return self.config.worker_id

    # --- public -----------------------------------------------------------------------------

    def run(self) -> WorkerStats:
        """Work until ``stop()`` (or, in burst mode, until idle). Blocks the calling thread.

        A stopped worker can run again. Called while it runs or drains, it does nothing and
        returns the running worker's stats at once (SPEC WORK-03): no second loop.
        """
        with self._start_lock:  # two callers at once: one starts, the other sees it running
            if self.state in ("running", "draining"):
                return self.stats()
            self.check_enforceable()
            if self.state == "stopped":
                self._draining.clear()  # the past run's stop: this is a new run (WORK-03)
            # a stop() asked of a worker not yet running (a SIGTERM or a recycle while the
            # process was still starting) stays asked: the loop ends at once and drains nothing
            self.state = "running"
        running = self._start_threads()
        self._announce()
        try:
            with role_connections():
                self._claims.run(burst=self.burst)
        finally:
            try:
                self._drain(running)
            finally:
                # a clean stop: gone, not lapsed (bounded: a drain adds up)
                running.presence.release(wait=2.0)
                if self._database:
                    connections[self._database].close()
        return self.stats()

    def exiting(self) -> None:
        """The process is about to exit past its shutdown timeout, runs still in flight: mark
        its presence stopped, so screens say it exited and the re-claims record an exit."""
        presence = getattr(self, "_presence", None)
        if presence is not None:
            presence.stop()

    def stop(self) -> None:
        """Stop claiming and let in-flight runs finish (thread- and signal-safe, idempotent)."""
        if not self._draining.is_set():
            self._draining.set()
            self._wake.set()

    def check_enforceable(self) -> None:
        """SPEC WORK-02, SE-24: a fleet cap the driver cannot enforce refuses to start."""
        capped = sorted(h.name for h in registry.registered_jobs() if h.concurrency)
        if capped and not self.driver.features.supports_fleet_slots:
            raise ConcurrencyUnenforceableError(
                f"jobs {', '.join(capped)} declare concurrency, and the {self.driver.name} "
                "driver has no lease store to hold their slots",
                hint="use the postgres or memory driver, or drop concurrency= from those jobs",
            )

    def tick(self, limit: int | None = None, *, bounded: bool = True, wait: bool = True) -> Tick:
        """One pass of this worker in the calling thread, for tests (SPEC WORK-06).

        Claims up to ``limit`` due jobs (default: ``concurrency``; with per-queue pools, queue
        by queue, each for at most its own threads), admits each through the
        same per-process limits, fleet concurrency slots and sheds as ``run()``, runs the
        admitted ones one by one here, and settles them through the settler's code before it
        returns. Nothing it took stays held: every limit and slot is released, and a body
        left running past its timeout is waited for (up to the stall timeout). Staged outbox
        rows this connection can see are published first, as ``run_until_idle()`` does::

            def test_one_pass(db):
                send_receipt.enqueue(order_id=7)
                done = Worker(queues=["default"]).tick()
                assert [e.outcome for e in done.executions] == ["completed"]

        No heartbeat, settler or listener thread starts, so leases are not renewed during a
        tick: keep the bodies a test ticks shorter than the visibility timeout. Its statements
        run under the role's statement and lock timeouts, as the worker's threads' do;
        ``bounded=False`` leaves the caller's session as it is, and ``wait=False`` returns as
        soon as a body passes its timeout, its slot held until a later tick finds it returned
        (``run_until_idle()`` does both, as it always has).
        """
        if self.state in ("running", "draining"):
            raise InvariantError(
                f"worker {self.worker_id} is {self.state}: tick() would race its own claim loop",
                hint="tick() a worker that is not running, or let run() do the work",
            )
        self.check_enforceable()
        return self._ticker.tick(limit or self.concurrency, bounded=bounded, wait=wait)

    @property
    def draining(self) -> bool:
        """True once ``stop()`` was asked for (or the run ended)."""
        return self._draining.is_set()

    def in_flight(self) -> list[Run]:
        return self.runs.runs()

    def abandoned(self) -> list[Run]:
        """Runs already settled whose body passed its timeout and has not returned yet."""
        return self.runs.abandoned_runs()

    def readiness(self) -> tuple[str | None, dict[str, Any]]:
        """What ``/readyz`` adds for this worker (SPEC LEASE-19): the suspects it runs alone in
        child processes now, beside its other runs, which it keeps claiming."""
        return self.isolation.readiness()

    def held_by_abandoned(self) -> bool:
        """True while bodies past their timeout hold half the threads of a pool or more: the
        pool runs at half its size or less until they return, which they may never do."""
        return bool(self.runs.abandoned) and any(
            2 * self.runs.abandoned_in(lane) >= lane.size for lane in self._lanes
        )

    def stats(self) -> WorkerStats:
        return WorkerStats(
            self.worker_id,
            self.queues,
            self.state,
            len(self.runs),
            Counter(self.outcomes),
            abandoned=len(self.runs.abandoned),
        )

    # --- the parts' common needs ------------------------------------------------------------

    def _watch(self, section: str) -> contextlib.AbstractContextManager[None]:
        """A blocking stretch the watchdog bounds (SPEC HANG-04)."""
        if self.watchdog is None:
            return contextlib.nullcontext()
        return self.watchdog.section(section)

    # --- the job threads -------------------------------------------------------------------

    def _restart_thread(self, lane: Lane) -> None:
        """A body abandoned past its timeout returned: its pool gets its thread back, unless
        the worker stops (a tick has no threads to give back)."""
        if not self._draining.is_set() and self.state == "running":
            self._start_thread(lane)

    def _start_thread(self, lane: Lane) -> None:
        thread = threading.Thread(target=self._work, args=(lane,), name="xjobs-job", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _work(self, lane: Lane) -> None:
        """One job thread of ``lane``: take its next queued run, run it, hand the result to the
        settler."""
        ready = lane.ready
        try:
            while True:
                if ready.empty():
                    close_stale_connections()  # idle: hand back what the last run left open
                taken = ready.get()
                if taken is None:
                    ready.put(None)  # one marker stops every thread of the lane
                    return
                run = None if isinstance(taken, Urgent) else taken
                # a run queued above the priority of those ahead of it goes first (PRIO-01)
                first = lane.take_urgent() if lane.urgent or run is None else None
                if first is not None and self._take(first):
                    if run is not None:  # this thread stays with the body: back unstarted
                        self._drainer.hand_back([run], reason="thread held past a timeout")
                    return
                if run is not None and self._take(run):
                    return
        finally:
            connections.close_all()  # this thread's connections only

    def _take(self, run: Run) -> bool:
        """Start ``run`` on this thread, or hand it back if it may not start; True when its
        body was left running past its timeout, so it holds this thread's place."""
        if self._draining.is_set():
            self._drainer.hand_back([run])  # SPEC WORK-12: a drain starts nothing new
            return False
        if run.job.queue in self._paused.now:  # CTRL-02: claimed ahead, then paused
            self._drainer.hand_back([run], reason="queue paused")
            return False
        return self._execute(run)

    def _execute(self, run: Run) -> bool:
        """Run ``run`` and queue its result to settle; True when its body was left running."""
        lane = self.runs.lane_of[run.job.queue]
        began = time.monotonic()
        execution = self._body(run, fresh_connection=True)
        if run.unanswered and run.lost_reason in ("deadline", "expired"):
            execution = cut_short(execution)  # SPEC LEASE-20: handed back in its old place
        if refused(execution):  # its connection was refused: narrow the claims
            self._window.refused(len(self.runs))
        elif execution.abandoned is None:
            self._window.ran()
        self.settler.queue.put(execution)
        self.runs.returned(run)  # the thread is free now; the settle is the settler's business
        assert run.returned_at is not None  # set by _body
        lane.prefetch.ran(run.returned_at - began)
        if not self._wake.is_set() and lane.ready.qsize() <= lane.prefetch.low_water():
            self._wake.set()  # claim the next batch before the queue runs dry
        return execution.abandoned is not None

    def _body(self, run: Run, *, fresh_connection: bool) -> Execution:
        """Run ``run``'s body on this thread; the result is ready to settle, never raised."""
        try:
            if fresh_connection:  # a job that touches the ORM starts on a healthy connection
                close_stale_connections()
                self._window.connect_first(run, self._database, self._draining, self.runs)
            if run.signal.is_set():  # lost or cancelled while it waited for a thread
                execution = unstarted(run)
            elif fresh_connection and self._isolates(run):
                # SPEC LEASE-19: a suspect runs alone in a child, on this thread only
                isolated = self.isolation.run(run)
                execution = self._unisolated(run) if isolated is None else isolated
            else:
                execution = execute(
                    run.job, run.signal, driver=self.driver, clock=self.clock, handle=run.handle
                )
        except BaseException as error:  # never strand a claimed run: it must reach the settler
            execution = failure(run.job, error, handle=run.handle)
        run.returned_at = time.monotonic()  # SPEC HANG-03: its settle deadline starts now
        run.settling = True
        return execution

    def _isolates(self, run: Run) -> bool:
        """A suspect whose body would run goes to a child process, where the driver's store is
        reachable; a job that cannot run (unknown, expired, past its crash bound) ends here."""
        job = run.job
        return (
            job.suspect
            and self.driver.features.supports_child_runs
            and run.handle is not None
            and job.undecodable is None
            and not job.expired
            and job.lease_expiries < conf.get().max_lease_expiries
        )

    def _unisolated(self, run: Run) -> Execution:
        """No child could run the suspect (logged): it goes back unstarted, due again after a
        lease, rather than run beside this worker's other runs."""
        job = run.job
        shed = Shed(job.id, job.lease_token, delay=self.visibility_timeout, reason="not isolated")
        return Execution(Outcome.SUSPENDED, job, 0.0, shed)

    # --- a run's start and end --------------------------------------------------------------

    def _start_threads(self) -> Running:
        """Start what a run needs: the settler, the presence and its heartbeat, the watchdog,
        the listener, then each pool's job threads."""
        # a past run's drain left its stop marker queued: fresh threads would take it and quit
        for lane in self._lanes:
            lane.ready = queue_module.SimpleQueue()
            lane.floor = 0  # the drain handed back every urgent run
        self._threads = []
        settler = threading.Thread(target=self.settler.loop, name="xjobs-settler", daemon=True)
        presence = self._present()
        heartbeat = Heartbeat(
            self.driver,
            self.in_flight,
            abandoned=self.abandoned,
            interval=self.heartbeat_interval,
            visibility_timeout=self.visibility_timeout,
            worker_id=self.worker_id,
            database=self._database,
            presence=presence,
        )
        self.watchdog = Watchdog(self.stall_timeout, worker_id=self.worker_id)
        # a burst ends when idle, so it has nothing to be woken for
        notifier = (
            None
            if self.burst
            else self.driver.runs().notify_on_ready(
                self.queues,
                self._claims.on_ready,
                on_control=self._claims.on_control,
                on_urgent=self._claims.on_urgent,
            )
        )
        settler.start()
        heartbeat.start()
        self.watchdog.start()
        for lane in self._lanes:
            for _ in range(lane.size):
                self._start_thread(lane)
        return Running(settler, heartbeat, presence, notifier)

    def _present(self) -> WorkerPresence:
        """This worker's presence row, written before the first claim."""
        presence = WorkerPresence(
            self.driver,
            worker_id=self.worker_id,
            queues=self.queues,
            ttl=self.visibility_timeout,
            in_flight=lambda: len(self.runs),
            answered=self._claims.on_answered,
            settle_first=self.settler.settle_owed,
        )
        presence.renew()  # present before the first claim, so its lapses are judged fairly
        self._presence = presence
        return presence

    def _announce(self) -> None:
        log.event(
            logging.INFO,
            "xjobs.worker.started",
            worker=self.worker_id,
            queues=",".join(self.queues),
            concurrency=self.concurrency if self.shares is None else describe(self.shares),
            driver=self.driver.name,
        )
        if not registry.registered_jobs():  # every row it claims would be parked as unknown
            log.event(
                logging.WARNING,
                "xjobs.worker.no_jobs",
                worker=self.worker_id,
                looked_in=registry.DISCOVERY,
                hint="put the @job declarations in an installed app's jobs.py",
            )

    def _drain(self, running: Running) -> None:
        """SPEC WORK-12: no new claims, queued runs back, running ones finished and settled
        (worker/drain.py); the worker is stopped once its connection is handed back."""
        self.state = "draining"
        self._draining.set()
        log.event(
            logging.INFO, "xjobs.worker.draining", worker=self.worker_id, in_flight=len(self.runs)
        )
        try:
            self._drainer.stop(running, self._threads, self.watchdog)
        finally:
            try:
                if self._database:
                    connections[self._database].close()
            finally:
                self.state = "stopped"  # SPEC WORK-12, SE-50: even when the close raised
                log.event(
                    logging.INFO,
                    "xjobs.worker.stopped",
                    worker=self.worker_id,
                    **{str(k): v for k, v in sorted(self.outcomes.items())},
                )
