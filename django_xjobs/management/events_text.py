"""``manage.py xjobs events [ID]``: the recent events with what each publish did, or one event
with its data and refusals; each a (json-able result, text) pair like every ``xjobs`` action."""

from __future__ import annotations

import json
from argparse import ArgumentParser

from ..durations import format_span
from ..errors import InvariantError
from ..operations import inspect_event, list_events
from ..operations.answers import EventReport, EventSummary

#: the most events one call lists: a terminal's worth many times over, and one bounded read
MAX_LIMIT = 1000


def add_arguments(events: ArgumentParser) -> None:
    """The ``events`` action's own options (``--json`` and the global ones are added for it)."""
    events.add_argument("event_id", nargs="?", help="one event: its data and refusals")
    events.add_argument("--name", help="only events of this name")
    events.add_argument("--tenant", help="only events published for this tenant")
    events.add_argument("--limit", default="50", help=f"how many, newest first (1 to {MAX_LIMIT})")
    events.add_argument(
        "--reveal",
        action="store_true",
        help="with an id: print values under XJOBS['REDACT_KEYS'] in clear (masked by default)",
    )


def events_report(
    event_id: str | None,
    *,
    name: str | None,
    tenant: str | None,
    limit: str,
    reveal: bool = False,
) -> tuple[object, str]:
    """``xjobs events``: a table of the recent events, or one event's page."""
    if event_id is not None:
        if name is not None or tenant is not None:
            raise InvariantError(
                "xjobs events takes an event id or --name/--tenant, not both",
                hint="python manage.py xjobs events <id> shows one event",
            )
        return _one(inspect_event(event_id, reveal=reveal))
    for flag, value in (("--name", name), ("--tenant", tenant)):
        if value == "":
            raise InvariantError(
                f"{flag} {value!r} names nothing", hint=f"leave {flag} out to list them all"
            )
    rows = list_events(name=name, tenant_id=tenant, limit=_limit(limit))
    if not rows:
        return rows, "no live events" + (" of that name or tenant" if name or tenant else "")
    return rows, "\n".join([HEADER, *(_line(r) for r in rows)])


def _limit(text: str) -> int:
    """``--limit``: a whole number from 1 to ``MAX_LIMIT``, refused with a coded line."""
    try:
        limit = int(text)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise InvariantError(
            f"--limit {text!r} is not a whole number from 1 to {MAX_LIMIT}",
            hint="e.g. python manage.py xjobs events --limit 20",
        )
    return limit


def _columns(*cells: str) -> str:
    event_id, name, tenant, age, released, started, cancelled, refused = cells
    return (
        f"{event_id:<36}  {name:<32} {tenant:<16} {age:>8} {released:>8} {started:>7} "
        f"{cancelled:>9} {refused:>7}"
    )


def _line(row: EventSummary) -> str:
    return _columns(
        row.id,
        row.name,
        row.tenant_id or "-",
        format_span(row.age_seconds),
        str(row.released),
        str(row.started),
        str(row.cancelled),
        str(row.refused),
    )


#: the columns of ``xjobs events``: what each publish did, counted in its own transaction
HEADER = _columns("id", "name", "tenant", "age", "released", "started", "cancelled", "refused")


def _one(report: EventReport) -> tuple[object, str]:
    lines = [
        f"{report.name}  {report.id}",
        f"  tenant     {report.tenant_id or '-'}",
        f"  key        {report.correlation_key or '-'}",
        f"  published  {report.published_at} ({format_span(report.age_seconds)} ago)",
        f"  expires    {report.expires_at}",
        f"  released   {report.released} waiting run(s)",
        f"  started    {report.started} job(s) (on_event)",
        f"  cancelled  {report.cancelled} run(s) (cancel_on)",
        f"  data       {json.dumps(report.payload, ensure_ascii=False)}",
        "  refused:" if report.refusals else "  refused: none",
        *(f"    {r.job}  {r.code}: {r.message}" for r in report.refusals),
    ]
    return report, "\n".join(lines)
