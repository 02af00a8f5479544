"""The worker's claim loop: each pass claims due jobs into the pools' free room and queues them
for the job threads, until the worker drains (or, in burst mode, has nothing left to do).

A pass, in named steps: ``begin_pass`` (wake-ups, paused queues and caps read again),
``repay_if_due`` (the settles an outage left owed), ``claim_pass`` (claim, admit, queue: a
``PassResult``), then ``burst_done``, ``claim_again`` or ``wait_for_work`` decide what comes
next. The loop runs in the thread that called ``Worker.run()``; the listener, the heartbeat and
the settler only set its flags and wake it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from ..declarations import registry
from ..drivers.contract import ClaimedJob, JobDriver
from ..limits.worker import LimitPlan
from .admission import Admission
from .breaker import Breaker, report_failure, report_resumed
from .config import WorkerConfig
from .guard import SettleGuard
from .inflight import InFlight
from .paused import PausedQueues
from .pools import Lane
from .retention import Retention
from .settling import Settler
from .window import ClaimWindow

#: the longest the claim loop waits between tries while the database fails
_CLAIM_BACKOFF_CAP = 10.0
#: while settles are owed, how often the claim loop tries the oldest one, whatever the claims'
#: backoff: the runs an outage cut short go back the moment the database answers (SPEC LEASE-20)
_REPAY_EVERY = 0.5

#: one pool's claim in a pass: the pool, the room it claimed for, what came back, and when the
#: claim was sent
Claim = tuple[Lane, int, list[ClaimedJob], float]


@dataclass
class SweepClock:
    """When a claim also sweeps lapsed leases: every pass while the queue looks idle, else once
    a poll interval (``every``): the same bound a ready job with a lost notification waits."""

    every: float
    #: the last claims came back short of the room asked: nothing more is due
    idle: bool = True
    swept_at: float = float("-inf")
    #: a notification came since the last pass: a job is due now, so the next claim takes
    #: it without the sweep, which waits for the pass after (at most a poll interval)
    notified: bool = False

    def take_notified(self) -> bool:
        """Whether a notification came since the last pass; the next pass starts afresh."""
        notified, self.notified = self.notified, False
        return notified

    def sweeps(self, notified: bool) -> bool:
        """Whether this pass's claim sweeps: lapsed leases are swept while idle and at least
        once a poll interval; a notified job is claimed first, without the sweep's extra
        reads."""
        due = time.monotonic() - self.swept_at >= self.every
        return due or (self.idle and not notified)

    def claimed(self, claims: Sequence[Claim], swept: bool) -> None:
        self.idle = all(len(claimed) < free for _, free, claimed, _ in claims)
        if swept and claims:  # every pool's queues paused: nothing was claimed
            self.swept_at = claims[0][3]


@dataclass(frozen=True)
class PassResult:
    """What one pass of the claim loop did, for the steps that decide the next."""

    #: each pool with room and how much it could take; empty when none had room, or while a
    #: settle is retried (results in hand go first)
    wants: list[tuple[Lane, int]]
    #: a notification came since the last pass
    notified: bool
    #: runs of this worker were in flight before the claim
    in_flight: bool
    #: the claim swept lapsed leases too
    swept: bool = False
    #: how many claimed runs it queued for the threads
    started: int = 0
    claims: tuple[Claim, ...] = ()


class ClaimLoop:
    """Claims due jobs into the pools' free room, admits them (``admission``) and queues them
    for the job threads, one pass at a time, until ``draining`` is set. Backs off while claims
    fail (``Breaker``) and narrows them while job connections are refused (``window``)."""

    def __init__(
        self,
        runs: InFlight,
        driver: JobDriver,
        admission: Admission,
        settler: Settler,
        *,
        config: WorkerConfig,
        guard: SettleGuard,
        paused: PausedQueues,
        limits: LimitPlan,
        retention: Retention,
        window: ClaimWindow,
        wake: threading.Event,
        draining: threading.Event,
        watch: Callable[[str], AbstractContextManager[None]],
    ) -> None:
        self.runs = runs
        self.driver = driver
        self.admission = admission
        self.settler = settler
        self.worker_id = config.worker_id
        self.visibility_timeout = config.visibility_timeout
        self.poll_interval = config.poll_interval
        self._lanes = runs.lanes
        self._guard = guard
        #: queues an operator paused, left out of every claim (worker/paused.py)
        self._paused = paused
        #: declared limits and operators' caps, decided in the claim (limits/worker.py)
        self._limits = limits
        self._retention = retention
        #: narrows the claims while job connections are refused (issue 25 item 2)
        self._window = window
        self._breaker = Breaker(base=self.poll_interval, cap=_CLAIM_BACKOFF_CAP)
        #: set by whatever may have made work: a notification, a settle, a stop
        self._wake = wake
        self._draining = draining
        self._watch = watch
        self.sweep = SweepClock(self.poll_interval)
        #: the presence renewal landed after failing: the claim loop tries now, not after its
        #: backoff (set by the heartbeat's thread, read by the claim loop's)
        self._answered = False

    def run(self, *, burst: bool) -> None:
        """Claim until the drain begins; with ``burst``, until nothing is due or running."""
        while not self._draining.is_set():
            notified = self.begin_pass()
            self.repay_if_due()
            done = self.claim_pass(notified)
            if done is None:
                continue  # the breaker held the claim back, or the claim failed
            self._retention.maybe_prune()
            if burst and self.burst_done(done):
                return
            if self.claim_again(done):
                continue  # the queue may hold more (or lapsed rows): claim again when a slot frees
            self.wait_for_work()

    # --- what wakes it (the listener's and the heartbeat's threads) -------------------------

    def on_ready(self) -> None:
        """The listener's callback: a job was made ready in one of this worker's queues."""
        self.sweep.notified = True
        self._wake.set()

    def on_urgent(self, queue: str, priority: int) -> None:
        """The listener's callback for a job enqueued ready above priority 0 (SPEC PRIO-01).
        Above the priority of what this worker's pool has been claiming, it is claimed now, on
        the listener's own thread and connection, beside a bulk claim the loop may have in
        flight, and queued ahead of the runs claimed before it: it waits for neither."""
        lane = self.runs.lane_of.get(queue)
        if lane is None or priority <= lane.floor or not self._may_claim_urgent(queue):
            return
        sent = time.monotonic()
        try:
            with self._watch("urgent claim"):
                claimed = self.driver.runs().claim(
                    queues=[queue],
                    limit=1,
                    visibility_timeout=self.visibility_timeout,
                    worker_id=self.worker_id,
                    lapsed=False,
                    versions=registry.declared_versions(),
                    paused=self._paused.jobs,
                )
        except Exception:  # the claim loop meets the same fault and reports it; this waits
            return
        self._start([(lane, 1, claimed, sent)], urgent=True)

    def _may_claim_urgent(self, queue: str) -> bool:
        """Whether a claim outside the loop may go now: nothing the loop would hold back (a
        drain, an open breaker, settles owed, a pause, a limit decided in the claim, refused
        job connections) stands in its way."""
        if self._draining.is_set() or self._guard.retrying.is_set():
            return False
        # the breaker's own state, read, not waited on: wait() may move it to half-open, a
        # change only the claim loop's thread makes
        if self._breaker.state != "closed" or queue in self._paused.now:
            return False
        if self._limits.for_queues([queue], False) is not None:
            return False  # a limited queue's claim takes its slots: the loop's alone
        room = self._window.room(len(self.runs))
        return room is None or room > 0

    def on_control(self) -> None:
        """The listener's control callback: an operator paused or resumed a queue, a job or a
        key."""
        self._paused.changed()
        self._limits.changed()
        self._wake.set()

    def on_answered(self) -> None:
        """The database answers after an outage: the heartbeat's presence renewal landed, or
        the settles owed did (worker/settling.py)."""
        self._answered = True
        self._wake.set()

    # --- one pass --------------------------------------------------------------------------

    def begin_pass(self) -> bool:
        """Read again what a claim is made within; whether a notification came since the
        last pass."""
        self._wake.clear()
        notified = self.sweep.take_notified()
        # every pass, full pools too: runs queued ahead of a paused queue must not start
        with self._watch("claim"):  # a read of the paused set is bounded like a claim
            self._paused.refresh()
            self._limits.refresh()
        if self._answered:
            self._answered = False
            self._breaker.retry_now()  # claim now, not at the end of a 10 s backoff
        return notified

    def repay_if_due(self) -> None:
        """The settles owed since an outage (worker/settling.py) are tried every
        ``_REPAY_EVERY`` s whatever the claims' backoff, and at once when a claim may go."""
        if self.runs.owed and (
            self._breaker.wait() <= 0 or time.monotonic() - self.settler.repaid_at >= _REPAY_EVERY
        ):
            self.settler.repay()

    def claim_pass(self, notified: bool) -> PassResult | None:
        """Claim into each pool with room and queue what came back for the threads; None when
        the pass ends here (the breaker is open, or the claim failed)."""
        runs = self.runs
        # results in hand go first: while a settle is retried through an outage, claiming
        # would overtake it and re-run the very jobs it is trying to settle (a suspect holds
        # nothing back: it runs in a child, on one thread, SPEC LEASE-19)
        held_back = self._guard.retrying.is_set()
        wants = [] if held_back else self._free_lanes()
        # read before the claim: a run of ours in flight may hold the very cap or key slot
        # that made the claim come back empty, and settle before the idle check (burst_done)
        in_flight = bool(runs.by_token)
        if not wants:
            return PassResult(wants, notified, in_flight)
        pause = self._breaker.wait()
        if pause > 0:  # open: a notification wakes it, but the wait is measured again
            self._wake.wait(min(pause, _REPAY_EVERY) if runs.owed else pause)
            return None
        swept = self.sweep.sweeps(notified)
        claims: list[Claim] = []
        failed = self._claim(wants, swept, claims)
        # what was claimed before a failure is this worker's now: admit it all the same
        started = self._start(claims)
        if failed is not None:
            self._claim_failed(failed)
            return None
        self._claim_resumed()
        self.sweep.claimed(claims, swept)
        return PassResult(wants, notified, in_flight, swept, started, tuple(claims))

    def burst_done(self, done: PassResult) -> bool:
        """A burst ends here: nothing was started, nothing runs, and the claim could have
        found what there is."""
        # nothing runnable now: shed jobs wait for a slot, not for this burst
        idle_now = not done.started and not self.runs.by_token
        # SPEC LIMIT-13: a burst ends on a claim made with nothing of its own in flight, so
        # rows held back only by a slot its last run freed are claimed, not left ready
        return idle_now and not done.in_flight and (done.swept or not done.wants)

    def claim_again(self, done: PassResult) -> bool:
        """Claim again at once, not after a wait: a pool's claim came back full (the queue may
        hold more), or the claim neither swept nor took a notified job (lapsed rows may wait)."""
        full = any(len(claimed) == free for _, free, claimed, _ in done.claims)
        return bool(done.wants) and (full or not (done.swept or done.notified))

    def wait_for_work(self) -> None:
        """Until something wakes the loop, or a poll interval (less while settles are owed)."""
        runs = self.runs
        self._wake.wait(min(self.poll_interval, _REPAY_EVERY) if runs.owed else self.poll_interval)

    # --- the claim ---------------------------------------------------------------------------

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
        claims: list[Claim],
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
                        versions=registry.declared_versions(),  # SPEC VER-05
                        paused=self._paused.jobs,  # SPEC PAUSE-04/05
                        **more,
                    )
            except Exception as error:
                return error
            lane.prefetch.claimed(time.monotonic() - sent)
            claims.append((lane, free, claimed, sent))
        return None

    def _start(self, claims: Sequence[Claim], *, urgent: bool = False) -> int:
        """Admit every claimed job (or shed it back), then queue the admitted for their pools'
        threads: the whole batch is decided before any of it starts. How many it queued.
        ``urgent``: an urgent claim's, on the listener's thread (its own watchdog section)."""
        admitted = []
        section = "urgent admit" if urgent else "admit"
        for _, _, claimed, sent in claims:
            admitted += self.admission.admit_all(claimed, sent, section=section)[0]
        for run in admitted:
            self.runs.lane_of[run.job.queue].queue_run(run, urgent=urgent)
        return len(admitted)

    def _claim_failed(self, error: Exception) -> None:
        """Open the breaker: the next claim waits, longer after each failure in a row."""
        report_failure(self.worker_id, self._breaker.failure(), error)

    def _claim_resumed(self) -> None:
        closed = self._breaker.success()
        if closed is not None:  # claims failed, and answer again: an outage ended
            self._window.reopen()
        report_resumed(self.worker_id, closed)
