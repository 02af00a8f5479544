"""The runs a worker holds: the one owner the claim loop, admission, the job threads, the
settler and ``tick()`` share, each handed this object rather than reaching into the worker."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ..drivers.contract import Settle
from .pools import Lane
from .run import Run


class InFlight:
    """Every run this worker holds, by lease token, and what they hold of its pools.

    Counts and maps change under ``lock``.
    """

    def __init__(self, lanes: Sequence[Lane]) -> None:
        self.lock = threading.Lock()
        #: every run held, by lease token: after a lost lease the same job may be claimed
        #: again here while the run that lost it has yet to settle
        self.by_token: dict[Any, Run] = {}
        #: runs settled while their body still runs past its timeout, by lease token
        self.abandoned: dict[Any, Run] = {}
        #: settles the guard gave up on while the database was away, by lease token: sent
        #: again, fenced, as soon as it answers (issue 25 item 1)
        self.owed: dict[Any, tuple[Settle, float]] = {}
        self.lanes = tuple(lanes)
        self.lane_of = {name: lane for lane in self.lanes for name in lane.queues}

    def __len__(self) -> int:
        return len(self.by_token)

    def runs(self) -> list[Run]:
        with self.lock:
            return list(self.by_token.values())

    def abandoned_runs(self) -> list[Run]:
        with self.lock:
            return list(self.abandoned.values())

    def admit(self, run: Run) -> None:
        """``run`` is held now, and takes a place in its queue's pool until its body returns."""
        with self.lock:
            self.by_token[run.job.lease_token] = run
            self.lane_of[run.job.queue].held += 1

    def returned(self, run: Run) -> None:
        """``run``'s body returned: its thread is free; the run stays held until it settles."""
        with self.lock:
            self.lane_of[run.job.queue].held -= 1

    def handed_back(self, run: Run) -> None:
        """``run`` went back unstarted: neither held nor in its pool any more."""
        with self.lock:
            self.by_token.pop(run.job.lease_token, None)
            self.lane_of[run.job.queue].held -= 1

    def forget(self, run: Run) -> bool:
        """Drop ``run`` however far it got (a tick that raised midway); False when it had
        settled already."""
        with self.lock:
            held = self.by_token.pop(run.job.lease_token, None)
            if held is not None and not run.settling:
                self.lane_of[run.job.queue].held -= 1
        return held is not None

    def settled(self, run_token: object, *, abandoned: bool) -> Run | None:
        """The run of ``run_token`` has settled: no longer held; kept among the abandoned when
        its body still runs. None when this worker held no such run."""
        with self.lock:
            run = self.by_token.pop(run_token, None)
            if run is not None and abandoned:
                # in the same lock as the pop: the claim loop never sees its thread as free
                self.abandoned[run_token] = run
        return run

    def body_ended(self, run: Run) -> bool:
        """An abandoned body returned; False when it was not (or no longer) abandoned."""
        with self.lock:
            return self.abandoned.pop(run.job.lease_token, None) is not None

    def abandoned_in(self, lane: Lane) -> int:
        if len(self.lanes) == 1:
            return len(self.abandoned)
        with self.lock:
            return sum(1 for run in self.abandoned.values() if run.job.queue in lane.queues)
