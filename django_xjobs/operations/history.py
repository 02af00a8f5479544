"""The finished jobs' history (issue 46): its days, made ahead, and on demand the mover's and
retention's work, as the workers do it every minute and every hour (``XJOBS["HISTORY"]``)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import conf, metrics
from ..drivers import get_driver
from ..drivers.contract import HistoryPartition
from ..errors import InvariantError
from .answers import Answer

#: HISTORY_AHEAD's bound (conf.MAX_AHEAD_DAYS): a year of days ahead at most
MAX_AHEAD = conf.MAX_AHEAD_DAYS


@dataclass(frozen=True, eq=False)
class HistoryDay(Answer):
    """One day of one state's history: its partition's name."""

    state: str
    day: str  # ISO date (UTC)
    name: str


@dataclass(frozen=True, eq=False)
class HistoryReport(Answer):
    """``history_partitions``: the settings, what this call created, moved and dropped, and
    every day the history holds now, by state then day."""

    enabled: bool
    grace_seconds: float
    ahead_days: int
    retention: dict[str, float]
    created: list[HistoryDay]
    moved: int
    dropped: list[HistoryDay]
    partitions: list[HistoryDay]


def history_partitions(
    *, ahead: int | None = None, move: bool = False, drop: bool = False
) -> HistoryReport:
    """Create the history's days up to ``ahead`` days after today (``XJOBS["HISTORY_AHEAD"]``
    when None) and list them (SPEC HIST-06). ``move``: move every finished job past
    ``HISTORY_GRACE`` now, a batch at a time (the rows a table held before HISTORY was turned
    on, say); ``drop``: drop the days past ``RETENTION``. Both need ``XJOBS["HISTORY"]`` on::

        history_partitions(ahead=7)
        history_partitions(move=True)["moved"]  # 10000
    """
    settings = conf.get()
    days = settings.history_ahead if ahead is None else ahead
    if isinstance(days, bool) or not isinstance(days, int) or not 0 <= days <= MAX_AHEAD:
        raise InvariantError(
            f"ahead={ahead!r} must be a whole number of days from 0 to {MAX_AHEAD}",
            hint="e.g. --ahead 7 creates today's partitions and the next seven days'",
        )
    if (move or drop) and not settings.history:
        raise InvariantError(
            "moving to or dropping from the history needs XJOBS['HISTORY'] on",
            hint="set XJOBS['HISTORY'] = True first, so every worker keeps the history too",
        )
    history = get_driver().history()
    created = history.ensure_partitions(days)
    moved = history.move_finished(grace=settings.history_grace) if move else 0
    if moved:
        metrics.inc("xjobs_history_moved_total", moved)
    dropped = history.drop_partitions(settings.retention) if drop else []
    for gone in dropped:
        metrics.inc("xjobs_history_dropped_total", state=gone.state)
    return HistoryReport(
        enabled=settings.history,
        grace_seconds=settings.history_grace,
        ahead_days=days,
        retention=dict(settings.retention),
        created=_days(created),
        moved=moved,
        dropped=_days(dropped),
        partitions=_days(history.partitions()),
    )


def _days(parts: list[HistoryPartition]) -> list[HistoryDay]:
    return [HistoryDay(state=p.state, day=p.day.isoformat(), name=p.name) for p in parts]
