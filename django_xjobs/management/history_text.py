"""``manage.py xjobs partitions``: the finished jobs' history by day (issue 46), created ahead,
and on demand the mover's and retention's work; a (json-able result, text) pair like every
``xjobs`` action."""

from __future__ import annotations

from argparse import ArgumentParser

from ..durations import format_span
from ..errors import InvariantError
from ..operations import history_partitions
from ..operations.history import MAX_AHEAD, HistoryReport


def add_arguments(partitions: ArgumentParser) -> None:
    """The ``partitions`` action's own options (``--json`` and the global ones are added)."""
    partitions.add_argument(
        "--ahead", help=f"days to create ahead of today (0 to {MAX_AHEAD}; default HISTORY_AHEAD)"
    )
    partitions.add_argument(
        "--move",
        action="store_true",
        help="move every finished job past HISTORY_GRACE now, in batches (needs HISTORY on)",
    )
    partitions.add_argument(
        "--drop",
        action="store_true",
        help="drop the days past RETENTION now, as the hourly pass does (needs HISTORY on)",
    )


def partitions_report(ahead: str | None, *, move: bool, drop: bool) -> tuple[object, str]:
    report = history_partitions(ahead=_ahead(ahead), move=move, drop=drop)
    return report, _text(report)


def _ahead(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise InvariantError(
            f"--ahead {text!r} must be a whole number of days",
            hint=f"e.g. --ahead 7 (0 to {MAX_AHEAD})",
        ) from None


def _text(report: HistoryReport) -> str:
    grace = format_span(report.grace_seconds)
    lines = [
        f"history: {'on' if report.enabled else 'off'} (moved {grace} after a job finished; "
        f"{report.ahead_days} day(s) made ahead)",
    ]
    if report.created:
        lines.append(f"created {len(report.created)} partition(s)")
    if report.moved:
        lines.append(f"moved {report.moved} finished job(s) to the history")
    lines += [f"dropped {d.name} (past RETENTION)" for d in report.dropped]
    by_state: dict[str, list[str]] = {}
    for day in report.partitions:
        by_state.setdefault(day.state, []).append(day.day)
    for state, days in by_state.items():
        kept = report.retention.get(state)
        shown = "kept" if kept is None else f"dropped after {format_span(kept)}"
        lines.append(f"{state:<10} {days[0]} .. {days[-1]}  {len(days)} day(s), {shown}")
    if not report.partitions:
        lines.append("no partitions yet")
    return "\n".join(lines)
