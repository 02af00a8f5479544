"""``xjobs move-queue``: a queue's waiting jobs moved to the database the settings now route
it to, asked for first, then done and told in a line (issue 48)."""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from collections.abc import Callable, Mapping

from ..errors import ConfirmationRequiredError
from ..operations.moves import DEFAULT_BATCH, QueueMove, move_queue
from .bulk_text import operator


def add_arguments(action: Callable[[str, str], ArgumentParser]) -> None:
    """``xjobs move-queue QUEUE --to ALIAS``, made by ``action`` (which adds ``--json`` and the
    global options)."""
    move = action(
        "move-queue",
        "move a queue's waiting jobs into the database XJOBS['QUEUE_DATABASES'] routes it to",
    )
    move.add_argument("queue")
    move.add_argument("--to", required=True, help="the jobs database (alias) it lives in now")
    move.add_argument(
        "--from", dest="from_", help="move from this database only (default: every other)"
    )
    move.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="jobs per page")
    move.add_argument("--dry-run", action="store_true", help="count; move nothing")
    move.add_argument("--yes", action="store_true", help="do not ask first")


def move_queue_action(
    options: Mapping[str, object],
    *,
    ask: Callable[[str], str] = input,
    interactive: Callable[[], bool] = lambda: sys.stdin.isatty(),
) -> tuple[object, str]:
    """Check and count the move (every refusal is made here, nothing written); unless
    ``--dry-run`` or ``--yes``, ask on a terminal (refused without one:
    ``X_CONFIRMATION_REQUIRED``, nothing moved); then move (SPEC SHARD-34)."""
    queue, to = str(options["queue"]), str(options["to"])
    from_ = options.get("from_")
    source = from_ if isinstance(from_, str) else None
    batch = options.get("batch")
    size = batch if isinstance(batch, int) else DEFAULT_BATCH
    held = move_queue(queue, to=to, from_=source, dry_run=True, batch=size)
    if options.get("dry_run"):
        return held, _text(held)
    if not options.get("yes") and held.waiting:
        where = ", ".join(held.sources)
        if not interactive():
            raise ConfirmationRequiredError(
                f"xjobs move-queue would move {held.waiting} waiting job(s) of queue {queue!r} "
                f"from {where} to {to} and there is no terminal to ask on: nothing was moved",
                hint="look first with --dry-run, then add --yes",
            )
        question = (
            f"move {held.waiting} waiting job(s) of queue {queue!r} from {where} to {to}? [y/N] "
        )
        if ask(question).strip().lower() not in ("y", "yes"):
            return {"queue": queue, "confirmed": False}, "nothing moved"
    done = move_queue(queue, to=to, from_=source, by=operator(), batch=size)
    return done, _text(done)


def _text(move: QueueMove) -> str:
    where = ", ".join(move.sources)
    if move.dry_run:
        text = (
            f"queue {move.queue!r}: {move.waiting} waiting job(s) in {where} would move to "
            f"{move.to}"
        )
        if move.left:
            text += f"; {move.left} run(s) running there refuse the move until they end"
        return text
    text = (
        f"queue {move.queue!r}: moved {move.moved} job(s) from {where} to {move.to} in "
        f"{move.pages} page(s); {move.merged} already there"
    )
    if move.left:
        text += f"\n{move.left} job(s) of it are still in {where}: run the move again"
    return text
