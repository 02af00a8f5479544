"""Moving a queue's waiting jobs from one jobs database to another (issue 48), with no job lost
or run twice:

    move_queue("reports", to="jobs_b", by="ops:alice")   # QueueMove(moved=..., left=0, ...)

The queue is routed to its new database first (``XJOBS["QUEUE_DATABASES"]``, deployed to every
process), so every new job lands there and every worker claims it there. The move then takes
what is left where it lived: it pauses the queue there (the fence against a worker still
running the old settings), refuses while a run of it is running there, and moves its waiting
jobs a page at a time, lowest ids first — each page read and locked in the source, written in
the target with its steps, deleted in the source in the read's own transaction — then resumes
the queue there. A move that dies between the two databases' commits leaves the page in both,
paused in the source: the next move finds the target holding each job by its id and deletes it
in the source (docs/howto/sharding.md, "Moving a queue").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from .. import conf, log
from ..drivers import get_driver
from ..drivers.contract import JobDriver, MoveHolds, MovingJob
from ..drivers.routing import RoutingDriver
from ..errors import (
    InvariantError,
    QueueMoveInvalidError,
    QueueMoveRunningError,
    RouteSpansError,
    RouteUnknownError,
)
from . import audit
from .answers import Answer
from .shared import check_by

#: who a move's own pause in a source database is by: the move resumes only a pause it made
MOVER = "xjobs:move-queue"
DEFAULT_BATCH = 500
MAX_BATCH = 10_000


@dataclass(frozen=True, eq=False)
class QueueMove(Answer):
    """What ``move_queue`` did (with ``dry_run``, would do): ``waiting`` jobs of ``queue`` found
    in the ``sources`` databases, ``moved`` of them written in ``to`` and deleted where they
    were, ``merged`` deleted where they were because ``to`` already held them (by id: a move
    repeated after a crash; or by live idempotency key), in ``pages`` pages; ``left`` waiting or
    running there once it ended (a run that retried meanwhile: move again; with ``dry_run``,
    the runs running there, which refuse the move)."""

    queue: str
    to: str
    sources: list[str]
    dry_run: bool
    waiting: int
    moved: int
    merged: int
    pages: int
    left: int


def move_queue(
    queue: str,
    *,
    to: str,
    from_: str | None = None,
    by: str | None = None,
    dry_run: bool = False,
    batch: int = DEFAULT_BATCH,
) -> QueueMove:
    """Move queue ``queue``'s waiting jobs into jobs database ``to`` from every other jobs
    database (or from ``from_`` only) (SPEC SHARD-30). The settings must route the queue to
    ``to`` already; refused before anything is written (SPEC SHARD-31): an alias that is not a
    jobs database (``X_ROUTE_UNKNOWN``), a move to where the jobs are moved from or a queue not
    routed to ``to`` (``X_MOVE_INVALID``), waiting jobs that belong to a batch or a chain of
    dependencies there (``X_ROUTE_SPANS``); a run still running there is refused after the
    pause that drains it (``X_MOVE_RUNNING``, SPEC SHARD-32). A repeated move moves nothing."""
    conf.check_queue_name(queue, error=InvariantError)
    check_by(by)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise InvariantError(f"batch={batch!r} must be an integer from 1 to {MAX_BATCH:,}")
    drivers = _jobs_databases()
    sources = _sources(queue, to, from_, drivers)
    holds = {alias: drivers[alias].jobs().moves().holds(queue) for alias in sources}
    for alias, held in holds.items():
        if held.linked:
            shown = ", ".join(str(i) for i in held.linked)
            raise RouteSpansError(
                f"queue {queue!r} has waiting jobs in database {alias!r} that belong to a batch "
                f"or a chain of dependencies ({shown}{', ...' if len(held.linked) > 1 else ''}): "
                "they live with it there, and nothing was moved",
                hint="let them finish there (keep the database among the jobs' databases until "
                "they do), or cancel them; then move the queue",
            )
    waiting = sum(held.waiting for held in holds.values())
    if dry_run:
        running = sum(held.running for held in holds.values())
        return QueueMove(queue, to, sources, True, waiting, 0, 0, 0, running)
    paused = [alias for alias in sources if _pause(drivers[alias], queue, by)]
    for alias in sources:
        running = drivers[alias].jobs().moves().holds(queue).running
        if running:
            raise QueueMoveRunningError(
                f"queue {queue!r} has {running} run(s) running in database {alias!r}: it is "
                "paused there so they drain, and nothing was moved",
            )
    moved = merged = pages = 0
    target = drivers[to].jobs().moves()
    for alias in sources:
        while True:
            written: list[UUID] = []

            def into(jobs: Sequence[MovingJob], written: list[UUID] = written) -> None:
                written.extend(target.take(jobs))

            gone = drivers[alias].jobs().moves().move_out(queue, limit=batch, into=into)
            if not gone:
                break
            pages += 1
            moved += len(set(gone) & set(written))
            merged += len(set(gone) - set(written))
    after = {alias: drivers[alias].jobs().moves().holds(queue) for alias in sources}
    for alias in paused:
        drivers[alias].limits().resume_queue(queue)
    left = _left(after)
    log.event(
        logging.WARNING if left else logging.INFO,
        "xjobs.queue.moved",
        queue=queue,
        to=to,
        sources=",".join(sources),
        moved=moved,
        merged=merged,
        left=left,
        by=by,
    )
    audit.record(  # SPEC AUDIT-01
        "move_queue",
        by=by,
        target=queue,
        reason=f"from {', '.join(sources)} to {to}",
        counts=(waiting, moved + merged, left),
    )
    return QueueMove(queue, to, sources, False, waiting, moved, merged, pages, left)


def _jobs_databases() -> dict[str, JobDriver]:
    """Each jobs database's own driver, the jobs database first."""
    driver = get_driver()
    if isinstance(driver, RoutingDriver):
        return dict(driver.place.drivers)
    return {conf.get().database: driver}


def _sources(queue: str, to: str, from_: str | None, drivers: Mapping[str, JobDriver]) -> list[str]:
    """The databases the move takes ``queue``'s jobs from, every refusal checked."""
    for alias in (to, from_):
        if alias is not None and alias not in drivers:
            raise RouteUnknownError(
                f"{alias!r} is not one of the jobs' databases",
                hint=f"one of {', '.join(drivers)}; a new one is named in "
                'XJOBS["QUEUE_DATABASES"] or XJOBS["JOB_DATABASES"] and migrated first',
            )
    sources = [a for a in drivers if a != to] if from_ is None else [from_]
    if not sources or from_ == to:
        raise QueueMoveInvalidError(
            f"queue {queue!r} already lives in database {to!r}: there is no other jobs "
            "database to move it from",
            hint="name another database to move it to (--to), or the one it lived in (--from)",
        )
    routing = conf.get().routing
    if routing is not None and routing.router is not None:
        raise QueueMoveInvalidError(
            f'XJOBS["ROUTER"] places queue {queue!r} by tenant: a move takes a queue that '
            'XJOBS["QUEUE_DATABASES"] routes to one database',
        )
    routed = routing.queue_aliases(queue) if routing is not None else tuple(drivers)[:1]
    if routed != (to,):
        raise QueueMoveInvalidError(
            f"queue {queue!r} is routed to database {routed[0]!r}, not {to!r}: its new jobs "
            "would keep landing where it is moved from, and nothing was moved",
        )
    return sources


def _pause(driver: JobDriver, queue: str, by: str | None) -> bool:
    """Pause ``queue`` in ``driver``'s database unless it is paused there already: True when
    this move paused it (it resumes only that pause). A pause this move left after a refusal
    or a crash counts as its own."""
    limits = driver.limits()
    held = next((c for c in limits.queue_controls() if c.queue == queue), None)
    if held is not None and held.paused and held.paused_by != MOVER:
        return False
    limits.pause_queue(queue, MOVER)
    log.event(logging.WARNING, "xjobs.queue.paused", queue=queue, by=by or MOVER, until=None)
    return True


def _left(holds: Mapping[str, MoveHolds]) -> int:
    return sum(held.waiting + held.running for held in holds.values())
