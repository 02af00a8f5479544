"""What a worker is, decided once from its arguments and ``XJOBS``: its queues and pools, its
timeouts and its id. ``Worker`` reads it; nothing changes it once the worker is built."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .. import conf
from ..conf.concurrency import parse_concurrency
from ..errors import InvariantError
from ..ids import uuid7
from ..text import check_name
from .pools import Lane, lanes
from .prefetch import Prefetch


@dataclass(frozen=True)
class WorkerConfig:
    """A worker's settings, resolved: what it was given, else what ``XJOBS`` says."""

    queues: tuple[str, ...]
    #: the pools: one shared by every queue, or one per queue; a mapping given here may
    #: name only these queues, the setting's may name others (workers elsewhere work them)
    lanes: tuple[Lane, ...]
    #: threads in all: the most handlers that ever run at once
    concurrency: int
    #: threads per queue with per-queue pools; None for one pool every queue shares
    shares: dict[str, int] | None
    #: claimed runs queued ahead of the threads (the first pool's, with per-queue pools)
    prefetch: Prefetch
    visibility_timeout: float
    heartbeat_interval: float
    #: SPEC HANG-04: a claim or a settle blocked this long ends the process
    stall_timeout: float
    poll_interval: float
    worker_id: str

    @classmethod
    def resolve(
        cls,
        *,
        queues: Sequence[str],
        concurrency: int | Mapping[str, int] | str | None = None,
        visibility_timeout: float | None = None,
        heartbeat_interval: float | None = None,
        poll_interval: float | None = None,
        worker_id: str | None = None,
        stall_timeout: float | None = None,
        prefetch: int | str | None = None,
    ) -> WorkerConfig:
        """The worker's settings from its arguments (None: the setting), checked in the order
        a reader meets them; a bad one raises its ``XJobsError`` here, before any part is
        built."""
        settings = conf.get()
        queues = tuple(queues)
        given = None if concurrency is None else parse_concurrency(concurrency, field="concurrency")
        pools = settings.concurrency if given is None else given
        lanes_ = lanes(
            queues,
            pools,
            settings.prefetch if prefetch is None else prefetch,
            strict=given is not None,
        )
        visibility = visibility_timeout or settings.visibility_timeout
        if heartbeat_interval is None:  # SPEC LEASE-03: a third of the timeout unless configured
            configured = visibility_timeout is None
            heartbeat_interval = settings.heartbeat_interval if configured else visibility / 3
        if visibility < 3 * heartbeat_interval:
            raise InvariantError(
                f"a visibility timeout of {visibility:g}s is shorter than three "
                f"heartbeats of {heartbeat_interval:g}s; one slow renewal would lose the lease",
                hint="raise the visibility timeout or shorten the heartbeat interval",
            )
        check_name(worker_id, "worker id")  # stored in claimed_by and x_workers
        shares = None if isinstance(pools, int) else {lane.queues[0]: lane.size for lane in lanes_}
        return cls(
            queues=queues,
            lanes=lanes_,
            concurrency=sum(lane.size for lane in lanes_),
            shares=shares,
            prefetch=lanes_[0].prefetch,
            visibility_timeout=visibility,
            heartbeat_interval=heartbeat_interval,
            stall_timeout=stall_timeout or settings.stall_timeout,
            poll_interval=poll_interval or settings.poll_interval,
            worker_id=worker_id or f"worker-{uuid7()}",
        )
