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
from ..conf.concurrency import parse_concurrency
from ..declarations import registry
from ..drivers import failures, get_driver
from ..drivers.connections import close_stale_connections, role_connections
from ..drivers.contract import ClaimedJob, JobDriver, Settle, Shed
from ..errors import ConcurrencyUnenforceableError, InvariantError
from ..ids import uuid7
from ..limits.worker import Limiter, LimitPlan
from ..run.execute import execute
from ..run.execution import Execution, Outcome
from ..run.settle import settle
from ..run.verdicts import cut_short, failure
from ..text import check_name
from .admission import Admission
from .breaker import Breaker, report_failure, report_resumed
from .guard import SettleGuard
from .heartbeat import Heartbeat
from .inflight import InFlight
from .isolation import Isolation
from .paused import PausedQueues
from .pools import Lane, describe, lanes
from .presence import WorkerPresence
from .retention import Retention
from .run import Run
from .settling import Settler, refused
from .tick import Tick, Ticker
from .watchdog import Watchdog
from .window import ClaimWindow

#: the longest the claim loop waits between tries while the database fails
_CLAIM_BACKOFF_CAP = 10.0
#: the longest pause between single claims while job connections are refused: short, as the
#: claim that ends it is the probe that finds a free connection again (issue 25 item 2)
_WINDOW_PAUSE_CAP = 2.0
#: how long a settle that gave up in an outage stays owed (issue 25 item 1)
_OWED_FOR = 600.0
#: while settles are owed, how often the claim loop tries the oldest one, whatever the claims'
#: backoff: the runs an outage cut short go back the moment the database answers (SPEC LEASE-20)
_REPAY_EVERY = 0.5


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

    It is composed of parts, each handed what it needs: ``runs`` (worker/inflight.py) owns the
    runs in flight; ``admission`` admits or sheds each claimed job into it; ``settler`` settles
    finished runs and hands back what they held; ``tick()`` drives the same two in the calling
    thread (worker/tick.py). The worker itself keeps the claim loop and the job threads.
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
        settings = conf.get()
        self.queues = tuple(queues)
        given = None if concurrency is None else parse_concurrency(concurrency, field="concurrency")
        pools = settings.concurrency if given is None else given
        #: the pools: one shared by every queue, or one per queue; a mapping given here may
        #: name only these queues, the setting's may name others (workers elsewhere work them)
        self._lanes = lanes(
            self.queues,
            pools,
            settings.prefetch if prefetch is None else prefetch,
            strict=given is not None,
        )
        #: threads in all: the most handlers that ever run at once
        self.concurrency = sum(lane.size for lane in self._lanes)
        #: threads per queue with per-queue pools; None for one pool every queue shares
        self.shares = (
            None if isinstance(pools, int) else {lane.queues[0]: lane.size for lane in self._lanes}
        )
        #: claimed runs queued ahead of the threads (the first pool's, with per-queue pools)
        self.prefetch = self._lanes[0].prefetch
        self.driver = driver or get_driver()
        self.visibility_timeout = visibility_timeout or settings.visibility_timeout
        if heartbeat_interval is None:  # SPEC LEASE-03: a third of the timeout unless configured
            configured = visibility_timeout is None
            heartbeat_interval = (
                settings.heartbeat_interval if configured else self.visibility_timeout / 3
            )
        self.heartbeat_interval = heartbeat_interval
        if self.visibility_timeout < 3 * self.heartbeat_interval:
            raise InvariantError(
                f"a visibility timeout of {self.visibility_timeout:g}s is shorter than three "
                f"heartbeats of {self.heartbeat_interval:g}s; one slow renewal would lose the lease",
                hint="raise the visibility timeout or shorten the heartbeat interval",
            )
        #: SPEC HANG-04: a claim or a settle blocked this long ends the process
        self.stall_timeout = stall_timeout or settings.stall_timeout
        self.watchdog: Watchdog | None = None
        self.limiter = Limiter(settings.limits, clock)
        self.poll_interval = poll_interval or settings.poll_interval
        check_name(worker_id, "worker id")  # stored in claimed_by and x_workers
        self.worker_id = worker_id or f"worker-{uuid7()}"
        self.burst = burst
        self.clock = clock
        self.state = "idle"
        self._start_lock = threading.Lock()
        self.outcomes: Counter[str] = Counter()
        self._database = self.driver.database
        #: the runs this worker holds: the one object its parts share (worker/inflight.py)
        self.runs = InFlight(self._lanes)
        self._threads: list[threading.Thread] = []
        self._guard = SettleGuard(
            runs=self.runs.by_token,
            lock=self.runs.lock,
            visibility_timeout=self.visibility_timeout,
            stall_timeout=self.stall_timeout,
            worker_id=self.worker_id,
        )
        self._wake = threading.Event()
        self._draining = threading.Event()
        #: the presence renewal landed after failing: the claim loop tries now, not after its
        #: backoff (set by the heartbeat's thread, read by the claim loop's)
        self._answered = False
        #: when the claim loop last tried the settles owed since an outage
        self._repaid_at = float("-inf")
        #: the claim loop and the presence renewal both send what is owed: one at a time
        self._repaying = threading.Lock()
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
        )
        self._ticker = Ticker(
            self.runs,
            self.driver,
            self.admission,
            self.settler,
            body=functools.partial(self._body, fresh_connection=False),
            worker_id=self.worker_id,
            visibility_timeout=self.visibility_timeout,
            stall_timeout=self.stall_timeout,
        )
        self._breaker = Breaker(base=self.poll_interval, cap=_CLAIM_BACKOFF_CAP)
        #: narrows the claims while job connections are refused (issue 25 item 2)
        self._window = ClaimWindow(
            self.concurrency,
            base=self.poll_interval,
            cap=_WINDOW_PAUSE_CAP,
            worker_id=self.worker_id,
        )
        self._retention = Retention(self.driver)
        #: runs suspects in child processes (worker/isolation.py), listed for /readyz
        self.isolation = Isolation(
            worker_id=self.worker_id, visibility_timeout=self.visibility_timeout
        )
        #: the lapsed-lease sweep rides on a claim every pass while the queue looks idle, else
        #: once a poll interval: the same bound a ready job with a lost notification waits
        self._idle, self._swept_at = True, float("-inf")
        #: a notification came since the last pass: a job is due now, so the next claim takes
        #: it without the sweep, which waits for the pass after (at most a poll interval)
        self._notified = False
        #: queues an operator paused, left out of every claim (worker/paused.py)
        self._paused = PausedQueues(
            self.driver, self.queues, interval=self.poll_interval, worker_id=self.worker_id
        )
        #: declared limits and operators' caps, decided in the claim (limits/worker.py)
        self._limits = LimitPlan(self.driver, self.queues, interval=self.poll_interval)

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
        # a past run's drain left its stop marker queued: fresh threads would take it and quit
        for lane in self._lanes:
            lane.ready = queue_module.SimpleQueue()
        self._threads = []
        settler = threading.Thread(target=self.settler.loop, name="xjobs-settler", daemon=True)
        presence = WorkerPresence(
            self.driver,
            worker_id=self.worker_id,
            queues=self.queues,
            ttl=self.visibility_timeout,
            in_flight=lambda: len(self.runs),
            answered=self._on_answered,
            settle_first=self._settle_owed,
        )
        presence.renew()  # present before the first claim, so its lapses are judged fairly
        self._presence = presence
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
                self.queues, self._on_ready, on_control=self._on_control
            )
        )
        settler.start()
        heartbeat.start()
        self.watchdog.start()
        for lane in self._lanes:
            for _ in range(lane.size):
                self._start_thread(lane)
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
        try:
            with role_connections():
                self._loop()
        finally:
            try:
                self._drain(settler, heartbeat, notifier)
            finally:
                presence.release(
                    wait=2.0
                )  # a clean stop: gone, not lapsed (bounded: a drain adds up)
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
        isolated = self.isolation.running()
        if not isolated:
            return None, {"isolated": []}
        names = ", ".join(f"{c['job']} {c['id'][:8]} (pid {c['pid']})" for c in isolated)
        runs = "run" if len(isolated) == 1 else "runs"
        return f"{len(isolated)} suspect {runs} alone in a child process: {names}", {
            "isolated": isolated
        }

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

    # --- the claim loop ---------------------------------------------------------------------

    def _on_ready(self) -> None:
        """The listener's callback: a job was made ready in one of this worker's queues."""
        self._notified = True
        self._wake.set()

    def _on_control(self) -> None:
        """The listener's control callback: an operator paused or resumed a queue."""
        self._paused.changed()
        self._limits.changed()
        self._wake.set()

    def _on_answered(self) -> None:
        """The heartbeat's presence renewal landed after an outage: the database is back."""
        self._answered = True
        self._wake.set()

    def _loop(self) -> None:
        runs = self.runs
        while not self._draining.is_set():
            self._wake.clear()
            notified, self._notified = self._notified, False
            # every pass, full pools too: runs queued ahead of a paused queue must not start
            with self._watch("claim"):  # a read of the paused set is bounded like a claim
                self._paused.refresh()
                self._limits.refresh()
            if self._answered:
                self._answered = False
                self._breaker.retry_now()  # claim now, not at the end of a 10 s backoff
            if runs.owed and (
                self._breaker.wait() <= 0 or time.monotonic() - self._repaid_at >= _REPAY_EVERY
            ):
                self._repay()
            # results in hand go first: while a settle is retried through an outage, claiming
            # would overtake it and re-run the very jobs it is trying to settle (a suspect holds
            # nothing back: it runs in a child, on one thread, SPEC LEASE-19)
            held_back = self._guard.retrying.is_set()
            wants = [] if held_back else self._free_lanes()
            # read before the claim: a run of ours in flight may hold the very cap or key slot
            # that made the claim come back empty, and settle before the idle check below
            in_flight = bool(runs.by_token)
            claims: list[tuple[Lane, int, list[ClaimedJob], float]] = []
            swept, started = False, 0
            if wants:
                pause = self._breaker.wait()
                if pause > 0:  # open: a notification wakes it, but the wait is measured again
                    self._wake.wait(min(pause, _REPAY_EVERY) if runs.owed else pause)
                    continue
                # lapsed leases are swept while idle and at least once a poll interval; a
                # notified job is claimed first, without the sweep's extra reads
                due = time.monotonic() - self._swept_at >= self.poll_interval
                swept = due or (self._idle and not notified)
                failed = self._claim(wants, swept, claims)
                # what was claimed before a failure is this worker's now: admit it all the same
                started = self._start(claims)
                if failed is not None:
                    self._claim_failed(failed)
                    continue
                self._claim_resumed()
                self._idle = all(len(claimed) < free for _, free, claimed, _ in claims)
                if swept and claims:  # every pool's queues paused: nothing was claimed
                    self._swept_at = claims[0][3]
            self._retention.maybe_prune()
            # nothing runnable now: shed jobs wait for a slot, not for this burst
            idle_now = not started and not runs.by_token
            # SPEC LIMIT-13: a burst ends on a claim made with nothing of its own in flight, so
            # rows held back only by a slot its last run freed are claimed, not left ready
            if self.burst and idle_now and not in_flight and (swept or not wants):
                return
            full = any(len(claimed) == free for _, free, claimed, _ in claims)
            if wants and (full or not (swept or notified)):
                continue  # the queue may hold more (or lapsed rows): claim again when a slot frees
            self._wake.wait(
                min(self.poll_interval, _REPAY_EVERY) if runs.owed else self.poll_interval
            )

    def _settle_owed(self) -> bool:
        """The presence renewal's first step after an outage (heartbeat thread): the settles
        owed are sent before the worker says it is present again, so no other worker takes a
        run as lapsed while its holder's result is on its way (a completion that landed first
        would have been refused, and the body run twice). True once nothing is owed."""
        if self.runs.owed:
            self._repay(section=False)
        return not self.runs.owed

    def _repay(self, *, section: bool = True) -> None:
        """Send the settles owed since the outage, each fenced on its lease token: a run cut
        short goes back to ready at once instead of waiting for its lapse to be swept (issue
        25 item 1). It is tried every ``_REPAY_EVERY`` s whatever the claims' backoff, the oldest
        settle first, alone: while it fails on a connection, nothing else is sent, so a pass
        during an outage costs one statement (SPEC LEASE-20). One that fails on a connection
        again stays owed for the next pass; any other failure, or ten minutes owed, drops it:
        its lease hands the job back as before."""
        with self._repaying:  # the claim loop's pass or the presence renewal's, one at a time
            watch = self._watch("claim") if section else contextlib.nullcontext()
            with watch:
                self._repay_owed()

    def _repay_owed(self) -> None:
        now = self._repaid_at = time.monotonic()
        runs = self.runs
        with runs.lock:
            for token in [t for t, (_, at) in runs.owed.items() if now - at > _OWED_FOR]:
                del runs.owed[token]
            owed = [value for value, _ in sorted(runs.owed.values(), key=lambda owe: owe[1])]
        if not owed:
            return
        kept: set[Any] = set()

        def guard(call: Any, values: Sequence[Settle], failed: Any) -> Any:
            try:
                return call()
            except Exception as error:
                if failures.is_transient(error):
                    kept.update(v.lease_token for v in values)
                return failed

        landed = settle(self.driver, owed[:1], guard)  # the probe
        if kept and self._database is not None:
            # the first statement after an outage meets the connection it broke: once more on a
            # fresh one, before this pass's claim could sweep these very rows
            connections[self._database].close()
            kept.clear()
            landed = settle(self.driver, owed[:1], guard)
        if kept:
            kept.update(value.lease_token for value in owed)  # still away: all stay owed
        else:
            landed |= settle(self.driver, owed[1:], guard)
        with runs.lock:
            for value in owed:
                if value.lease_token not in kept:
                    runs.owed.pop(value.lease_token, None)
        if len(kept) == len(owed):
            return  # the database still refuses them: nothing was sent
        log.event(
            logging.WARNING,
            "xjobs.worker.settled_after_outage",
            worker=self.worker_id,
            landed=len(landed),
            refused=len(owed) - len(landed) - len(kept),
        )
        self._answered = True  # the database answers: the loop claims now, not after its backoff
        self._wake.set()  # the runs handed back are due now

    def _free_lanes(self) -> list[tuple[Lane, int]]:
        """Each pool with room, and how many runs it can take: its threads plus the runs it
        keeps queued ahead, less what it holds (SPEC WORK-04: ``free = slots(q) - in flight``)."""
        wants = []
        for lane in self._lanes:
            ahead = lane.prefetch.ahead()
            if lane.ready.qsize() > ahead // 2:
                continue  # enough queued ahead: claim once the threads have eaten into it
            # an abandoned body still holds a thread: it counts against its pool
            free = lane.size + ahead - lane.held - self.runs.abandoned_in(lane)
            if free > 0:
                wants.append((lane, free))
        room = self._window.room(len(self.runs))
        if room is None:
            return wants
        narrowed = []
        for lane, free in wants:  # job connections are refused: claim what can get one
            if room > 0:
                narrowed.append((lane, min(free, room)))
                room -= min(free, room)
        return narrowed

    def _claim(
        self,
        wants: Sequence[tuple[Lane, int]],
        swept: bool,
        claims: list[tuple[Lane, int, list[ClaimedJob], float]],
    ) -> Exception | None:
        """Claim for each pool in turn, at most its free room, into ``claims``; the failure
        that stopped it, if one did. A drain that began meanwhile stops it before the next
        pool (SPEC WORK-14): what is claimed already is handed back by the drain. A paused
        queue is left out of the queues claimed from; a pool whose queues are all paused claims
        nothing (CTRL-02)."""
        paused = self._paused.now
        for lane, free in wants:
            if self._draining.is_set():
                break
            queues = [name for name in lane.queues if name not in paused] if paused else lane.queues
            if not queues:
                continue
            sent = time.monotonic()  # SPEC LEASE-15: the lease's window opened after this
            # no limit on these queues: the plain claim, called exactly as before
            limits = self._limits.for_queues(queues, swept)
            more = {} if limits is None else {"limits": limits}
            try:
                with self._watch("claim"):
                    claimed = self.driver.runs().claim(
                        queues=queues,
                        limit=free,
                        visibility_timeout=self.visibility_timeout,
                        worker_id=self.worker_id,
                        lapsed=swept,
                        **more,
                    )
            except Exception as error:
                return error
            lane.prefetch.claimed(time.monotonic() - sent)
            claims.append((lane, free, claimed, sent))
        return None

    def _start(self, claims: Sequence[tuple[Lane, int, list[ClaimedJob], float]]) -> int:
        """Admit every claimed job (or shed it back), then queue the admitted for their pools'
        threads: the whole batch is decided before any of it starts. How many it queued."""
        admitted = []
        for _, _, claimed, sent in claims:
            admitted += self.admission.admit_all(claimed, sent)[0]
        for run in admitted:
            self.runs.lane_of[run.job.queue].ready.put(run)
        return len(admitted)

    def _watch(self, section: str) -> Any:
        """A blocking stretch the watchdog bounds (SPEC HANG-04)."""
        if self.watchdog is None:
            return contextlib.nullcontext()
        return self.watchdog.section(section)

    def _claim_failed(self, error: Exception) -> None:
        """Open the breaker: the next claim waits, longer after each failure in a row."""
        report_failure(self.worker_id, self._breaker.failure(), error)

    def _claim_resumed(self) -> None:
        closed = self._breaker.success()
        if closed is not None:  # claims failed, and answer again: an outage ended
            self._window.reopen()
        report_resumed(self.worker_id, closed)

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
                run = ready.get()
                if run is None:
                    ready.put(None)  # one marker stops every thread of the lane
                    return
                if self._draining.is_set():
                    self._hand_back([run])  # SPEC WORK-12: a drain starts nothing new
                    continue
                if run.job.queue in self._paused.now:  # CTRL-02: claimed ahead, then paused
                    self._hand_back([run], reason="queue paused")
                    continue
                if self._execute(run):
                    return  # its body still runs past its timeout: it holds this thread's place
        finally:
            connections.close_all()  # this thread's connections only

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
                self._connect_first(run)
            if run.signal.is_set():  # lost or cancelled while it waited for a thread
                execution = self._unstarted(run)
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

    def _connect_first(self, run: Run) -> None:
        """While job connections are refused (the claim window is narrowed), a run takes its
        connection to the jobs database before its body starts, and waits for one, its lease
        renewed meanwhile, rather than start, fail at its first query and be handed back (issue
        25 item 2). A body with a timeout runs on its own thread: for it the connection is a
        probe, closed at once. It stops waiting when its signal is set (it goes back unstarted)
        or on a drain (the body meets the refusal as usual). With no refusal in the last minute
        nothing changes: a job that never queries opens no connection."""
        if self._database is None or not self._window.wary:
            return
        pause, narrowed = 0.05, False
        handle = run.handle
        while not run.signal.is_set() and not self._draining.is_set():
            try:
                connections[self._database].ensure_connection()
                if handle is not None and handle.timeout is not None:
                    # its body runs on a thread of its own, which opens its own connection:
                    # this one was the probe, and its slot is the body's to take
                    connections[self._database].close()
                return
            except Exception as error:
                if not failures.connection_failed(error):
                    return  # not a refusal: the body meets it, and fails as it would
                if not narrowed:  # once per run: a wait is one refusal, not one per try
                    narrowed = True
                    self._window.refused(len(self.runs))
            run.signal.wait(pause)
            pause = min(pause * 2, 1.0)

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

    def _unstarted(self, run: Run) -> Execution:
        """A queued run that lost its lease (or was cancelled) before a thread took it: it goes
        back unrun, fenced on its token, so a new holder's row is never touched."""
        job = run.job
        shed = Shed(job.id, job.lease_token, delay=0.0, reason="never started", keep_place=True)
        outcome = Outcome.CANCELLED if run.cancelled else Outcome.LEASE_LOST
        return Execution(outcome, job, 0.0, shed)

    def _hand_back(self, runs: Sequence[Run], reason: str = "draining") -> None:
        """Give queued runs back unstarted: ready at once in their place, no attempt spent."""
        if not runs:
            return
        for run in runs:
            run.settled.set()  # SPEC LEASE-12: a renewal racing the shed reports no loss
            self.runs.handed_back(run)
            self.settler.release(run)
            job = run.job
            self.admission.shed(
                job, Shed(job.id, job.lease_token, delay=0.0, reason=reason, keep_place=True)
            )

    # --- shutdown ---------------------------------------------------------------------------

    def _drain(self, settler: threading.Thread, heartbeat: Heartbeat, notifier: Any) -> None:
        self.state = "draining"
        self._draining.set()
        log.event(
            logging.INFO, "xjobs.worker.draining", worker=self.worker_id, in_flight=len(self.runs)
        )
        try:
            if notifier is not None:
                notifier.stop()
            unstarted = []
            for lane in self._lanes:
                with contextlib.suppress(queue_module.Empty):
                    while True:
                        run = lane.ready.get_nowait()
                        if run is not None:
                            unstarted.append(run)
            with role_connections():
                self._hand_back(unstarted)  # queued, never started: back at once, no attempt spent
            for lane in self._lanes:
                lane.ready.put(None)
            for thread in list(self._threads):
                thread.join()  # running handlers finish (SPEC WORK-12)
            self.settler.queue.put(None)
            settler.join()
            heartbeat.stop()
            if self.watchdog is not None:
                self.watchdog.stop()
            for run in self.abandoned():  # they end with the process; their slots by TTL
                log.event(
                    logging.WARNING,
                    "xjobs.worker.body_left_running",
                    worker=self.worker_id,
                    job=run.job.name,
                    id=run.job.id,
                )
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
