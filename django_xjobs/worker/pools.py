"""Per-queue worker pools: ``--concurrency default=8,emails=2`` gives each queue threads of its
own, so a backlog in one queue cannot take the threads another queue's jobs need (SPEC WORK-01,
WORK-04). A plain number keeps one pool that every queue shares.

    parse_concurrency("default=8,emails=2", field="--concurrency")  # {"default": 8, "emails": 2}
    parse_concurrency(8, field='XJOBS["CONCURRENCY"]')               # 8: one shared pool
"""

from __future__ import annotations

import queue as queue_module
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import InvariantError
from .prefetch import Prefetch

if TYPE_CHECKING:
    from .run import Run

#: threads of a queue a worker works that its per-queue mapping leaves out (SPEC WORK-01)
DEFAULT_SHARE = 5


def shares_for(
    queues: Sequence[str], concurrency: Mapping[str, int], *, strict: bool
) -> dict[str, int]:
    """Threads per queue of a worker on ``queues``: a queue the mapping leaves out gets
    ``DEFAULT_SHARE`` (SPEC WORK-01). A mapping given for this worker (``strict``) may not name
    a queue it does not work; the setting's may, since it serves workers on other queues too."""
    extra = [name for name in concurrency if name not in queues]
    if strict and extra:
        raise InvariantError(
            f"concurrency names queue(s) {', '.join(extra)} this worker does not work "
            f"({', '.join(queues)})",
            hint="add them to --queues, or drop them from --concurrency",
        )
    return {name: concurrency.get(name, DEFAULT_SHARE) for name in queues}


def describe(shares: Mapping[str, int]) -> str:
    """``default=8,emails=2``: the command-line form, for logs."""
    return ",".join(f"{name}={count}" for name, count in shares.items())


@dataclass(eq=False)
class Lane:
    """One pool of a worker: its queues, its threads, and the claimed runs queued for them.

    A worker with one shared pool has one lane on every queue; with per-queue pools, a lane per
    queue, so each queue's runs (queued or running) never take another queue's threads.
    """

    queues: tuple[str, ...]
    size: int
    prefetch: Prefetch
    #: runs waiting for one of this lane's threads; None tells them to stop, ``URGENT`` that a
    #: run waits in ``urgent``
    ready: queue_module.SimpleQueue[Run | Urgent | None] = field(
        default_factory=queue_module.SimpleQueue
    )
    #: admitted runs whose handler has not returned yet (queued for a thread, or running)
    held: int = 0
    #: runs above the priority of those queued ahead in ``ready``: a thread takes these first,
    #: so a run claimed behind a backlog of lower priority does not wait its turn (SPEC PRIO-01)
    urgent: deque[Run] = field(default_factory=deque)
    #: the priority of the run last queued in ``ready``: what an urgent run must be above
    #: (written by the claim loop's thread and the listener's; a stale read costs a claim)
    floor: int = 0

    def queue_run(self, run: Run, *, urgent: bool = False) -> None:
        """Queue ``run`` for a thread: behind the others, or, above the priority of what is
        already queued, in ``urgent`` (with a marker in ``ready`` so a waiting thread wakes).
        An ``urgent`` claim's run leaves ``floor`` as the bulk claims set it."""
        priority = run.job.priority
        if priority > self.floor and not self.ready.empty():
            self.urgent.append(run)
            self.ready.put(URGENT)
        else:
            if not urgent:
                self.floor = priority
            self.ready.put(run)

    def take_urgent(self) -> Run | None:
        """The first urgent run, if one waits (threads race for it: one gets it)."""
        try:
            return self.urgent.popleft()
        except IndexError:
            return None


class Urgent:
    """The marker queued in ``Lane.ready`` for each run queued in ``Lane.urgent``."""

    __slots__ = ()


URGENT = Urgent()


def lanes(
    queues: Sequence[str],
    concurrency: int | Mapping[str, int],
    prefetch: int | str,
    *,
    strict: bool,
) -> tuple[Lane, ...]:
    """The lanes of a worker on ``queues``: one shared lane for an int, one per queue for a
    mapping, in the order of ``queues``."""
    if isinstance(concurrency, int):
        return (Lane(tuple(queues), concurrency, Prefetch(prefetch, concurrency)),)
    shares = shares_for(queues, concurrency, strict=strict)
    return tuple(Lane((name,), n, Prefetch(prefetch, n)) for name, n in shares.items())
