"""Where a due job stands in its queue: behind the due jobs a claim takes first, or, under fair
share, behind the turns of the other groups."""

from __future__ import annotations

from ... import conf
from ...drivers.contract import JobSnapshot, Standing
from ...limits.keys import SEPARATOR
from .causes import Reason, because

#: counts of jobs ahead stop here: an operator call, never a full scan
AHEAD_CAP = 10_000


def place_reasons(row: JobSnapshot, standing: Standing) -> list[Reason]:
    share = conf.get().fair_share
    if share is not None and standing.key is not None:
        return _turns(row, standing, share)
    if not standing.ahead:
        return []
    more = "at least " if standing.ahead >= AHEAD_CAP else ""
    older = standing.ahead - standing.higher_priority
    return [
        because(
            "behind",
            f"behind {more}{standing.ahead} due job{'s' if standing.ahead != 1 else ''} of queue "
            f"{row.queue!r} that a claim takes first ({standing.higher_priority} of higher "
            f"priority, {older} older)",
            ahead=standing.ahead,
            higher_priority=standing.higher_priority,
            at_least=bool(more),
        )
    ]


def _turns(row: JobSnapshot, standing: Standing, share: str) -> list[Reason]:
    """XJOBS["FAIR_SHARE"]: the claim takes each group's first run, then each group's second..."""
    ahead = standing.key_ahead + standing.other_keys_ahead
    if not ahead:
        return []
    name, _, rendered = (standing.key or "").partition(SEPARATOR)
    group = rendered if not name else f"{name}[{rendered}]"
    turn = standing.key_ahead + 1
    return [
        because(
            "fair_share",
            f"fair share ({share}): this is turn {turn} of its group {group!r}, and a claim "
            f"takes one run of each group per turn: {ahead} due job(s) go first "
            f"({standing.key_ahead} of its own group, {standing.other_keys_ahead} of the "
            f"{standing.other_keys} other group(s) waiting)",
            group=group,
            turn=turn,
            groups_waiting=standing.other_keys,
            ahead=ahead,
        )
    ]
